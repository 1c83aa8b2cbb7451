"""``AspectSentimentClassifier``: embedder -> aspect head -> polarity, as a thin LightningModule."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import nn
from torchmetrics.classification import MulticlassAccuracy, MulticlassConfusionMatrix, MulticlassF1Score

from onlstm_tasks.metrics.classification_report import format_report
from onlstm_tasks.embedders.base import EmbedderFactory, TokenEmbedder
from onlstm_tasks.embedders.word_char import WordCharEmbedder
from onlstm_tasks.encoders.base import SequenceEncoder
from onlstm_tasks.modules.aspect_net import AspectSentimentNet
from onlstm_tasks.modules.aspect_heads import AspectHead, AspectPoolingHead
from onlstm_tasks.tasks.lm_init import init_from_language_model
from onlstm_tasks.tasks.task_model import TaskModel

HeadFactory = Callable[[int], AspectHead]


class AspectSentimentClassifier(TaskModel):
    """Polarity of one aspect term in a sentence.

    Args:
        word_vocab, char_vocab, labels: data facts linked from the data module (and kept in checkpoints).
        embedder: builds the input layer from the vocabularies (default :class:`WordCharEmbedder`, no chars).
        head: builds an aspect head from the embedder's output size (default :class:`AspectPoolingHead`);
            TD / TC / attention / pooling heads live in ``onlstm_tasks.modules.aspect_heads``, the tree-aware head
            (which also receives the batches' gold heads) in ``onlstm_tasks.modules.tree_aspect_head``.
        dropout: before the output layer.
        optimizer: a LightningCLI-style optimizer callable (default Adam, lr 1e-3).
        lr_scheduler: a LightningCLI-style learning-rate scheduler callable (default none); it watches
            ``val_accuracy``.
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

    monitor = "val_accuracy"

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
        self.net = AspectSentimentNet(embedder, (head or AspectPoolingHead)(embedder.output_size), len(labels),
                                    dropout=dropout)
        self.attach(lm_trees, optimizer, lr_scheduler)
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
        self.log("train_loss", loss, batch_size=len(batch.index))  # the bar shows it as logged
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
        self.save_test_report("Per-class report", report)

    def predict_step(self, batch, batch_idx):
        """Per example: the aspect (tokens and token span), the polarity and class probabilities, and the tree the
        sentence encoder induces (``tree``, ``heads``) when the head has one over the whole sentence and it is an
        ON-LSTM (the JSONL writer adds the aspect term and character span from the input)."""
        logits, encoded = self.net(batch.tokens, batch.aspect_mask, self.tree_heads(batch))
        probabilities = torch.softmax(logits, dim=-1)
        trees = self.tree_fields(batch, encoded, self.net.head)  # encoded: None for heads without a sentence pass
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


def _weights_under_net(module, state_dict, prefix, *args) -> None:
    """Moves the weights of a checkpoint written before the network moved into ``net`` (``embedder.*``,
    ``head.*``, ``classify.*`` at the top) to their place under ``net.``."""
    for key in [k for k in state_dict if k.startswith(tuple(f"{prefix}{part}." for part in OLD_TOP))]:
        state_dict[f"{prefix}net.{key[len(prefix):]}"] = state_dict.pop(key)


OLD_TOP = ("embedder", "head", "classify")


def default_embedder(word_vocab: Sequence[str], char_vocab: Sequence[str]) -> TokenEmbedder:
    return WordCharEmbedder(word_vocab, char_vocab, word_dim=300, char_encoder="none", dropout=0.5)
