"""``TaskModel``: what the NER tagger and the aspect classifier share around their network.

Each holds a plain-torch network as ``self.net`` (:mod:`onlstm_tasks.modules`: an ``embedder`` and whatever reads
trees), and around it the same pieces: the frozen language model of a ``tree_source: lm`` (:attr:`tree_lm`), the
heads a batch's tree readers get, the tree fields of a prediction, the test report file and the optimisers (the
validation metric ``monitor`` steers the scheduler). A task declares what differs: its network, its metrics, its
loops.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import lightning.pytorch as pl
import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import nn

from onlstm_tasks.embedders.base import TokenEmbedder
from onlstm_tasks.encoders.base import EncoderOutput
from onlstm_tasks.tasks.hub import TaskHubMixin
from onlstm_tasks.tasks.lm_trees import attach_lm_trees
from onlstm_tasks.tasks.optimization import optimizers_config
from onlstm_tasks.tasks.tree_fields import induced_tree_fields
from onlstm_tasks.tasks.words import EncodesWords
from onlstm_tasks.trees.source import TreeSource

log = logging.getLogger(__name__)

EmbedderFactory = Callable[[Sequence[str], Sequence[str]], TokenEmbedder]


class TaskModel(EncodesWords, TaskHubMixin, pl.LightningModule):
    """Base of the task LightningModules that hold a network ``self.net``; ``monitor``: the validation metric a
    learning-rate scheduler follows. A task's ``__init__`` declares its own arguments and hands these on with
    ``**options`` (jsonargparse follows them here; Lightning saves both levels as hyper-parameters).

    Args:
        word_vocab, char_vocab, labels: data facts linked from the data module (and kept in checkpoints).
        embedder: builds the input layer from the vocabularies (default: the task's ``default_embedder``).
        optimizer, lr_scheduler: LightningCLI-style callables (default Adam, lr 1e-3; no scheduler).
        pretrained_lm: a :class:`~onlstm_tasks.tasks.language_model.LanguageModel` checkpoint whose word vectors
            and encoder start the model's (read at the start of ``fit`` only).
        lm_trees: set by the model itself, never by hand: for a ``tree_source: {kind: lm, lm_checkpoint: ...}`` of
            the network, what rebuilds that frozen language model without its file (a JSON string, saved in
            checkpoints; :mod:`onlstm_tasks.tasks.lm_trees`).
    """

    monitor: str
    default_embedder: EmbedderFactory
    net: nn.Module

    def __init__(
        self,
        word_vocab: list[str],
        char_vocab: list[str],
        labels: list[str],
        embedder: EmbedderFactory | None = None,
        optimizer: OptimizerCallable | None = None,
        lr_scheduler: LRSchedulerCallable | None = None,
        pretrained_lm: str | None = None,
        lm_trees: str | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()  # with the task's own arguments (Lightning collects every level)
        self.labels = list(labels)
        self.embedder_factory = embedder or self.default_embedder
        self.optimizer_factory, self.scheduler_factory = optimizer, lr_scheduler

    def build_embedder(self) -> TokenEmbedder:
        """The input layer, built from the vocabularies (the network's first part)."""
        return self.embedder_factory(self.hparams.word_vocab, self.hparams.char_vocab)

    def attach_lm_trees(self) -> None:
        """Called once ``self.net`` is built: the frozen language model a ``tree_source: lm`` of the network reads
        (rebuilt from the ``lm_trees`` hyper-parameter, or read from its checkpoint files and then saved in that
        hyper-parameter, so the task's checkpoint needs no file)."""
        self.tree_lm = attach_lm_trees(self.net, self.hparams.lm_trees)
        if self.tree_lm is not None:
            self.hparams["lm_trees"] = self.tree_lm.config_json()

    # ---- probing (EncodesWords) ---------------------------------------------------------------------------
    def word_embedder(self) -> TokenEmbedder:
        return self.net.embedder

    # ---- trees --------------------------------------------------------------------------------------------
    def tree_heads(self, batch) -> torch.Tensor | None:
        """The heads the network's tree readers get: the frozen language model's (``tree_source: lm``), else the
        batch's gold heads ([B, T], 0-based; None without them: batches built outside the data module may lack
        them)."""
        if self.tree_lm is not None:
            return self.tree_lm.heads(batch.tokens.words, batch.tokens.mask)
        return getattr(batch, "heads", None)

    def tree_fields(self, batch, encoded: EncoderOutput | None, reader: nn.Module) -> list[dict]:
        """A prediction's tree fields per row (``tree``, ``heads``): the language model's trees, those the network
        read (``tree_source: lm``); else those the distances of ``encoded`` induce, read as ``reader``'s own
        ``tree_source`` reads them (:func:`induced_tree_fields`: empty dicts for an encoder without distances), or
        empty dicts where no pass over the whole sentence was made (``encoded`` None)."""
        if self.tree_lm is not None:
            return self.tree_lm.tree_fields(batch.tokens.words, batch.tokens.mask)
        if encoded is None:
            return [{} for _ in batch.index]
        source = getattr(reader, "tree_source", TreeSource())
        return induced_tree_fields(encoded, batch.tokens.mask, batch.tokens.words, source.distance_layer,
                                   source.direction_combination, gate=source.distance_gate)

    # ---- test report and optimisation ---------------------------------------------------------------------
    def save_test_report(self, title: str, report: str) -> None:
        """Prints the test report (global rank 0) and writes it to ``test_report.txt`` in the run's log folder."""
        log_dir = self.trainer.log_dir  # a collective under DDP: every process must ask
        if self.trainer.is_global_zero:
            print(f"\n{title}:\n{report}")
            if log_dir:
                path = Path(log_dir) / "test_report.txt"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(report)
                log.info("test report saved to %s", path)

    def configure_optimizers(self):
        trainable = [p for p in self.parameters() if p.requires_grad]  # not the frozen language model's
        return optimizers_config(trainable, self.optimizer_factory, self.scheduler_factory, self.monitor)
