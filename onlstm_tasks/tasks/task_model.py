"""``TaskModel``: what the NER tagger and the aspect classifier share around their network.

Each holds a plain-torch network as ``self.net`` (:mod:`onlstm_tasks.modules`: an ``embedder`` and whatever reads
trees), and around it the same pieces: the frozen language model of a ``tree_source: lm`` (:attr:`tree_lm`), the
heads a batch's tree readers get, the tree fields of a prediction, the test report file and the optimisers (the
validation metric ``monitor`` steers the scheduler). A task declares what differs: its network, its metrics, its
loops.
"""

from __future__ import annotations

import logging
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


class TaskModel(EncodesWords, TaskHubMixin, pl.LightningModule):
    """Base of the task LightningModules that hold a network ``self.net``; ``monitor``: the validation metric a
    learning-rate scheduler follows."""

    monitor: str
    net: nn.Module

    def attach(self, lm_trees: str | None, optimizer: OptimizerCallable | None,
               lr_scheduler: LRSchedulerCallable | None) -> None:
        """Called once ``self.net`` is built: the frozen language model a ``tree_source: lm`` of the network reads
        (rebuilt from the ``lm_trees`` hyper-parameter, or read from its checkpoint files and then saved in that
        hyper-parameter, so the task's checkpoint needs no file), and the optimiser factories."""
        self.tree_lm = attach_lm_trees(self.net, lm_trees)
        if self.tree_lm is not None:
            self.hparams["lm_trees"] = self.tree_lm.config_json()
        self.optimizer_factory, self.scheduler_factory = optimizer, lr_scheduler

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
