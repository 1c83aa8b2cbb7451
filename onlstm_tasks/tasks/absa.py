"""``AspectSentimentClassifier``: embedder -> aspect head -> polarity, as a thin LightningModule."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import nn
from torchmetrics.classification import MulticlassAccuracy, MulticlassConfusionMatrix, MulticlassF1Score

from onlstm_tasks.classification_report import format_report
from onlstm_tasks.embedders.base import TokenEmbedder
from onlstm_tasks.embedders.word_char import WordCharEmbedder
from onlstm_tasks.encoders.base import EncoderOutput, SequenceEncoder
from onlstm_tasks.modules.aspect_classifier import AspectClassifier
from onlstm_tasks.modules.aspect_heads import AspectHead, AspectPoolingHead
from onlstm_tasks.tasks.hub import TaskHubMixin
from onlstm_tasks.tasks.lm_init import init_from_language_model
from onlstm_tasks.tasks.lm_trees import attach_lm_trees
from onlstm_tasks.tasks.optimization import optimizers_config
from onlstm_tasks.tasks.tree_fields import induced_tree_fields
from onlstm_tasks.tasks.words import EncodesWords
from onlstm_tasks.trees.source import TreeSource

log = logging.getLogger(__name__)

EmbedderFactory = Callable[[Sequence[str], Sequence[str]], TokenEmbedder]
HeadFactory = Callable[[int], AspectHead]


class AspectSentimentClassifier(EncodesWords, TaskHubMixin, pl.LightningModule):
    """Polarity of one aspect term in a sentence.

    Args:
        word_vocab, char_vocab, labels: data facts linked from the data module (and kept in checkpoints).
        embedder: builds the input layer from the vocabularies (default :class:`WordCharEmbedder`, no chars).
        head: builds an aspect head from the embedder's output size (default :class:`AspectPoolingHead`);
            TD / TC / attention / pooling heads live in ``onlstm_tasks.modules.aspect_heads``, the tree-aware head
            (which also receives the batches' gold heads) in ``onlstm_tasks.modules.tree_aspect_head``.
        dropout: before the output layer.
        optimizer, lr_scheduler: LightningCLI-style callables (default Adam, lr 1e-3).
        pretrained_lm: a :class:`~onlstm_tasks.tasks.language_model.LanguageModel` checkpoint whose word vectors
            start the word embedding and whose encoder starts the head's encoder(s): the whole-sentence encoder,
            or TD/TC's left (forward) and right (backward) context encoders, each from the matching stack of a
            bidirectional language model. Read at the start of ``fit`` only.
        lm_trees: set by the model itself, never by hand: for a head with ``tree_source: {kind: lm, lm_checkpoint:
            ...}``, what rebuilds that frozen language model without its file (a JSON string, saved in checkpoints;
            :mod:`onlstm_tasks.tasks.lm_trees`). Its heads are computed for every batch and passed to the head where
            gold heads travel; ``predict`` writes its trees.

    :meth:`encode_words` (from :class:`EncodesWords`) runs the embedder and the head's whole-sentence encoder
    (``head.encoder`` reading the embedded words alone, as in :class:`AspectPoolingHead`) over raw token lists.
    """

    def __init__(
        self,
        word_vocab: list[str],
        char_vocab: list[str],
        labels: list[str],
        embedder: EmbedderFactory | None = None,
        head: HeadFactory | None = None,
        dropout: float = 0.5,
        optimizer: OptimizerCallable | None = None,
        lr_scheduler: LRSchedulerCallable | None = None,
        pretrained_lm: str | None = None,
        lm_trees: str | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.labels = list(labels)
        embedder = (embedder or default_embedder)(word_vocab, char_vocab)
        self.net = AspectClassifier(embedder, (head or AspectPoolingHead)(embedder.output_size), len(labels),
                                    dropout=dropout)
        self.tree_lm = attach_lm_trees(self.net.head, lm_trees)  # tree_source lm: the frozen language model
        if self.tree_lm is not None:
            self.hparams["lm_trees"] = self.tree_lm.config_json()  # the checkpoint rebuilds it without the file
        self.optimizer_factory, self.scheduler_factory = optimizer, lr_scheduler
        n = len(labels)
        self.metrics = nn.ModuleDict({
            f"{stage}_{name}": metric
            for stage in ("val", "test")
            for name, metric in (("accuracy", MulticlassAccuracy(n, average="micro")),
                                 ("macro_f1", MulticlassF1Score(n, average="macro")))
        })
        self.test_confusion = MulticlassConfusionMatrix(n)
        self.register_load_state_dict_pre_hook(_weights_under_net)  # checkpoints written before the network moved

    # ---- probing (EncodesWords) ---------------------------------------------------------------------------
    def word_embedder(self) -> TokenEmbedder:
        return self.net.embedder

    def sentence_encoder(self) -> SequenceEncoder:
        """``head.encoder`` when it reads the embedded sentence alone; TD/TC heads (left/right context encoders)
        and the attention head (whose encoder reads [word; aspect] vectors) have no such encoder."""
        encoder = getattr(self.net.head, "encoder", None)
        if not isinstance(encoder, SequenceEncoder) or encoder.input_size != self.net.embedder.output_size:
            why = ("its encoder reads [word; aspect] vectors" if isinstance(encoder, SequenceEncoder) else
                   "it has no `encoder` attribute (e.g. TD/TC heads encode the left and right contexts separately)")
            raise ValueError(f"{type(self.net.head).__name__} has no encoder over the whole sentence alone ({why}); "
                             f"encode_words needs a head such as AspectPoolingHead")
        return encoder

    def setup(self, stage: str) -> None:
        if stage == "fit" and self.hparams.pretrained_lm:  # before Lightning restores any checkpoint
            init_from_language_model(self.hparams.pretrained_lm, self.net.embedder, self._lm_targets(),
                                     self.hparams.word_vocab)

    def _lm_targets(self) -> list[tuple[nn.Module, str | None]]:
        """The head's encoders a language model starts: TD/TC's left and right context encoders read towards the
        aspect like a forward and a backward language model; other heads' whole-sentence encoder."""
        head = self.net.head
        if isinstance(getattr(head, "left", None), SequenceEncoder):
            return [(head.left, "forward"), (head.right, "backward")]
        return [(self.sentence_encoder(), None)]

    def forward(self, batch) -> torch.Tensor:
        """Class logits [B, C]."""
        return self.net(batch.tokens, batch.aspect_mask, self.tree_heads(batch)).logits

    # ---- loops --------------------------------------------------------------------------------------------
    def training_step(self, batch, batch_idx):
        loss = F.cross_entropy(self(batch), batch.labels)
        self.log("train_loss", loss, prog_bar=True, batch_size=len(batch.index))
        return loss

    def _evaluate(self, batch, stage: str) -> torch.Tensor:
        logits = self(batch)
        self.log(f"{stage}_loss", F.cross_entropy(logits, batch.labels), sync_dist=True, batch_size=len(batch.index))
        predicted = logits.argmax(-1)
        for name in ("accuracy", "macro_f1"):
            metric = self.metrics[f"{stage}_{name}"]
            metric.update(predicted, batch.labels)
            self.log(f"{stage}_{name}", metric, prog_bar=name == "accuracy", batch_size=len(batch.index))
        return predicted

    def validation_step(self, batch, batch_idx):
        self._evaluate(batch, "val")

    def test_step(self, batch, batch_idx):
        self.test_confusion.update(self._evaluate(batch, "test"), batch.labels)

    def on_test_epoch_end(self) -> None:
        report = format_report(self.test_confusion.compute(), self.labels)  # summed over every process
        self.test_confusion.reset()
        log_dir = self.trainer.log_dir  # a collective under DDP: every process must ask
        if self.trainer.is_global_zero:
            print(f"\nPer-class report:\n{report}")
            if log_dir:
                path = Path(log_dir) / "test_report.txt"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(report)

    def predict_step(self, batch, batch_idx):
        """Per example: the aspect (tokens and token span), the polarity and class probabilities, and the tree the
        sentence encoder induces (``tree``, ``heads``) when the head has one over the whole sentence and it is an
        ON-LSTM (the JSONL writer adds the aspect term and character span from the input)."""
        logits, encoded = self.net(batch.tokens, batch.aspect_mask, self.tree_heads(batch))
        probabilities = torch.softmax(logits, dim=-1)
        trees = self._induced_trees(batch, encoded)
        rows = []
        for row, index in enumerate(batch.index):
            p = probabilities[row]
            words = batch.tokens.words[row]
            span = batch.aspect_mask[row].nonzero().flatten().tolist()
            rows.append({"index": index, "aspect": " ".join(words[span[0]: span[-1] + 1]),
                         "span": [span[0], span[-1] + 1], "polarity": self.labels[int(p.argmax())],
                         "probabilities": {label: round(float(v), 6) for label, v in zip(self.labels, p)},
                         **trees[row]})
        return rows

    def _induced_trees(self, batch, encoded: EncoderOutput | None) -> list[dict]:
        """Tree fields per row (:func:`induced_tree_fields`) from the head's pass over the whole sentence
        (``encoded``), read as the head's own ``tree_source`` would read them (its ``distance_layer`` and
        ``direction_combination``); empty dicts for heads without such an encoder (TD/TC, attention) or encoders
        without distances."""
        if self.tree_lm is not None:  # tree_source lm: the language model's trees, those the head read
            return self.tree_lm.tree_fields(batch.tokens.words, batch.tokens.mask)
        if encoded is None:
            return [{} for _ in batch.index]
        source = getattr(self.net.head, "tree_source", TreeSource())
        return induced_tree_fields(encoded, batch.tokens.mask, batch.tokens.words, source.distance_layer,
                                   source.direction_combination, gate=source.distance_gate)

    def tree_heads(self, batch) -> torch.Tensor | None:
        """The heads the head reads: the frozen language model's (``tree_source: lm``), else the batch's gold heads
        (None without them)."""
        if self.tree_lm is not None:
            return self.tree_lm.heads(batch.tokens.words, batch.tokens.mask)
        return getattr(batch, "heads", None)

    def configure_optimizers(self):
        trainable = [p for p in self.parameters() if p.requires_grad]  # not the frozen language model's
        return optimizers_config(trainable, self.optimizer_factory, self.scheduler_factory, "val_accuracy")


def _weights_under_net(module, state_dict, prefix, *args) -> None:
    """Moves the weights of a checkpoint written before the network moved into ``net`` (``embedder.*``,
    ``head.*``, ``classify.*`` at the top) to their place under ``net.``."""
    for key in [k for k in state_dict if k.startswith(tuple(f"{prefix}{part}." for part in OLD_TOP))]:
        state_dict[f"{prefix}net.{key[len(prefix):]}"] = state_dict.pop(key)


OLD_TOP = ("embedder", "head", "classify")


def default_embedder(word_vocab: Sequence[str], char_vocab: Sequence[str]) -> TokenEmbedder:
    return WordCharEmbedder(word_vocab, char_vocab, word_dim=300, char_encoder="none", dropout=0.5)
