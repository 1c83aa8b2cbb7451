"""``NERTagger``: the Lightning side of the CRF tagger (loops, metrics, optimisers)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable

from onlstm_tasks.data.core.tags import convert_scheme, entity_spans
from onlstm_tasks.embedders.base import EmbedderFactory
from onlstm_tasks.embedders.word_char import WordCharEmbedder
from onlstm_tasks.encoders.base import EncoderFactory, SequenceEncoder
from onlstm_tasks.encoders.defaults import TAGGER, default_encoder
from onlstm_tasks.metrics import EntityF1
from onlstm_tasks.modules.tagger import CRFTagger
from onlstm_tasks.tasks.gathered import log_gathered
from onlstm_tasks.tasks.lm_init import init_from_language_model
from onlstm_tasks.tasks.lm_features import attach_lm_features
from onlstm_tasks.tasks.task_model import TaskModel


class NERTagger(TaskModel):
    """CRF tagger over any embedder and encoder.

    Args:
        word_vocab, char_vocab, labels: data facts (linked from the data module by the CLI, and saved in
            checkpoints so prediction needs no training data). The tag scheme (IOB2 or IOBES) is read off the
            labels.
        embedder: builds the input layer from the vocabularies (default :class:`WordCharEmbedder`).
        encoder: builds any :class:`SequenceEncoder` from its input size (default: bidirectional ON-LSTM,
            hidden 256, chunk size 8). In YAML, ``class_path`` + ``init_args`` without ``input_size``. A
            :class:`~onlstm_tasks.encoders.DependencyGuidedEncoder` also receives the batches' gold heads.
        dropout: before the emission layer.
        optimizer: a LightningCLI-style optimizer callable (default Adam, lr 1e-3).
        lr_scheduler: a LightningCLI-style learning-rate scheduler callable (default none); it watches ``val_f1``.
        pretrained_lm: a :class:`~onlstm_tasks.tasks.language_model.LanguageModel` checkpoint whose encoder and
            word vectors start the encoder and the word embedding (:mod:`onlstm_tasks.tasks.lm_init`); read at the
            start of ``fit`` only (a trained model restores its own weights).
        lm_trees: set by the model itself, never by hand: for an encoder with ``tree_source: {kind: lm,
            lm_checkpoint: ...}``, what rebuilds that frozen language model without its file (a JSON string, saved in checkpoints;
            :mod:`onlstm_tasks.tasks.lm_trees`). Its heads are computed for every batch and passed to the encoder
            where gold heads travel; ``predict`` writes its trees.
        lm_features: a bidirectional :class:`~onlstm_tasks.tasks.language_model.LanguageModel` checkpoint whose
            layers, frozen and mixed by learned scalar weights, are concatenated to the embedder's features
            (:mod:`onlstm_tasks.tasks.lm_features`); read once, when the model is first built.
        lm_features_config: set by the model itself, never by hand: what rebuilds that language model without its
            file (a JSON string, saved in checkpoints; its weights travel in the state dict).

    :meth:`encode_words` (from :class:`EncodesWords`) runs the embedder and encoder over raw token lists.
    """

    empty_record = {"tags": [], "entities": []}  # the prediction of an empty input line (with "empty": true)
    monitor = "val_f1"

    def __init__(
        self,
        word_vocab: list[str],
        char_vocab: list[str],
        labels: list[str],
        embedder: EmbedderFactory | None = None,
        encoder: EncoderFactory | None = None,
        dropout: float = 0.5,
        optimizer: OptimizerCallable | None = None,
        lr_scheduler: LRSchedulerCallable | None = None,
        pretrained_lm: str | None = None,
        lm_trees: str | None = None,
        lm_features: str | None = None,
        lm_features_config: str | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        tag_scheme = scheme_of(labels)
        embedder, features = attach_lm_features((embedder or WordCharEmbedder)(word_vocab, char_vocab), lm_features,
                                                lm_features_config)
        if features is not None:
            self.hparams["lm_features_config"] = features.config_json()  # the checkpoint rebuilds it without the file
        encoder = (encoder or default_encoder(**TAGGER))(embedder.output_size)
        self.net = CRFTagger(embedder, encoder, labels, tag_scheme, dropout=dropout)
        self.labels, self.tag_scheme = list(labels), tag_scheme
        self.attach(lm_trees, optimizer, lr_scheduler)
        self.val_f1 = EntityF1(labels, scheme=tag_scheme)
        self.test_f1 = EntityF1(labels, scheme=tag_scheme)

    # ---- probing (EncodesWords) ---------------------------------------------------------------------------
    def sentence_encoder(self) -> SequenceEncoder:
        return self.net.encoder

    def setup(self, stage: str) -> None:
        if stage == "fit" and self.hparams.pretrained_lm:  # before Lightning restores any checkpoint
            own = getattr(self.net.embedder, "own", self.net.embedder)  # (not the LM features' frozen model)
            init_from_language_model(self.hparams.pretrained_lm, own, [(self.net.encoder, None)],
                                     self.hparams.word_vocab)

    # ---- loops --------------------------------------------------------------------------------------------
    def training_step(self, batch, batch_idx):
        loss = self.net.loss(batch.tokens, batch.tags, self.tree_heads(batch))
        self.log("train_loss", loss, batch_size=len(batch.index))  # the bar shows it as logged
        return loss

    def _evaluate(self, batch, metric: EntityF1, prefix: str) -> None:
        loss, predicted = self.net.evaluate(batch.tokens, batch.tags, self.tree_heads(batch))
        metric.update(predicted, batch.tags, batch.tokens.mask)
        self.log(f"{prefix}_loss", loss, sync_dist=True, batch_size=len(batch.index))

    def validation_step(self, batch, batch_idx):
        self._evaluate(batch, self.val_f1, "val")

    def on_validation_epoch_end(self) -> None:
        self._log_scores(self.val_f1, "val")

    def test_step(self, batch, batch_idx):
        self._evaluate(batch, self.test_f1, "test")

    def on_test_epoch_end(self) -> None:
        report = self.test_f1.report()  # gathered from every process, like the scores
        self._log_scores(self.test_f1, "test")
        self.save_test_report("Entity-level classification report (seqeval, conlleval-compatible mode)", report)

    def _log_scores(self, metric: EntityF1, prefix: str) -> None:
        scores = metric.compute()
        metric.reset()
        for key, value in scores.items():
            log_gathered(self, f"{prefix}_{key}", value, prog_bar=key == "f1")

    def predict_step(self, batch, batch_idx):
        """Per sentence: tokens, IOB2 tags, entities and (ON-LSTM encoders) the induced ``tree`` and ``heads``."""
        mask = batch.tokens.mask
        tags, encoded = self.net.predict(batch.tokens, self.tree_heads(batch))
        trees = self.tree_fields(batch, encoded, self.net.encoder)
        out = []
        for row, index in enumerate(batch.index):
            n = int(mask[row].sum())
            labels = [self.labels[i] for i in tags[row, :n].tolist()]
            iob2 = labels if self.tag_scheme == "iob2" else convert_scheme(labels, "iob2")
            out.append({"index": index, "tokens": batch.tokens.words[row], "tags": iob2,
                        "entities": entity_spans(iob2), **trees[row]})
        return out

    def word_heads(self, tokens) -> torch.Tensor | None:
        """Raw words' heads for probing (:meth:`encode_words`): the frozen language model's (``tree_source: lm``);
        gold heads (``tree_source: gold``) cannot come from words alone."""
        if self.tree_lm is not None:
            return self.tree_lm.heads(tokens.words, tokens.mask)
        source = getattr(self.sentence_encoder(), "tree_source", None)
        if getattr(source, "kind", None) == "gold":
            raise ValueError("this model's encoder reads gold dependency heads (tree_source gold), which raw "
                             "sentences do not have: its distances past the first stage depend on them, so it "
                             "cannot be probed from words alone (models with tree_source none, induced or lm can)")
        return None


def scheme_of(labels: Sequence[str]) -> str:
    """``iobes`` if any label has an E- or S- prefix, else ``iob2``."""
    return "iobes" if any(label[:2] in ("E-", "S-") for label in labels) else "iob2"
