"""``TreeF1Monitor``: score the trees a model's ON-LSTM induces against gold trees at every validation.

Perplexity is a poor guide to tree quality (see the project's measurements: the best-perplexity language model
was not the one with the best trees), so a run that is meant to induce syntax should watch the trees themselves.
At the end of every validation (not the sanity check) this callback runs the model over the words of gold trees
(:class:`~onlstm_tasks.probing.probe.EncoderProbe`, eval mode, no gradient), induces one greedy tree per layer,
direction combination and master gate, and logs the sentence-level UF1 (percent) of each as
``{prefix}_{gate}_l{layer}_{combination}`` (layers 1-based) and the best of them as ``{prefix}``. A
``ModelCheckpoint(monitor=prefix, mode="max")`` then keeps the checkpoint whose trees score best on these gold trees.

Use a validation split's trees (``split: validation``): choosing a checkpoint, a layer or a gate on test trees
is choosing on test. The gold trees are read (and checked) when fit starts, before the first training step.

YAML::

    trainer:
      callbacks:
        - class_path: onlstm_tasks.probing.tree_monitor.TreeF1Monitor
          init_args: {gold: ontonotes/conll2012_ontonotesv5, data_dir: english_v12, revision: refs/convert/parquet}
        - class_path: onlstm_tasks.callbacks.ResumableCheckpoint
          init_args: {monitor: val_uf1, mode: max, filename: best_uf1}
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import lightning.pytorch as pl
import torch

from onlstm_tasks.data.core.common import word_options
from onlstm_tasks.probing.probe import EncoderProbe
from onlstm_tasks.probing.scoring import read_ontonotes_gold, read_ptb_gold, score_distances
from onlstm_tasks.tasks.gathered import log_gathered
from onlstm_tasks.trees.source import DIRECTION_COMBINATIONS, DISTANCE_GATES

log = logging.getLogger(__name__)

GATES = DISTANCE_GATES
FORMATS = ("ontonotes", "ptb")


class TreeF1Monitor(pl.Callback):
    """Logs the UF1 of a model's induced trees against gold trees at every validation (see the module docstring).

    Args:
        gold: the gold trees: a hub name or local folder in the ``ontonotes/conll2012_ontonotesv5`` schema
            (``format: ontonotes``, read with ``split``, ``name``, ``data_dir``, ``revision``), or a PTB
            bracketed file or directory (``format: ptb``).
        gates: which master gates' distances to score (``forget``, ``input`` or both).
        combinations: direction combinations for a bidirectional model (default ``mean, forward, backward``;
            a unidirectional model is scored ``forward`` only).
        limit: score only the first ``limit`` trees (faster validations).
        prefix: the logged names' prefix and the name of the best score.
        batch_size: sentences per forward pass.
    """

    def __init__(self, gold: str, format: str = "ontonotes", split: str = "validation", name: str | None = None,
                 data_dir: str | None = None, revision: str | None = None,
                 gates: Sequence[str] = GATES, combinations: Sequence[str] | None = None,
                 limit: int | None = None, prefix: str = "val_uf1", batch_size: int = 64) -> None:
        if format not in FORMATS:
            raise ValueError(f"TreeF1Monitor: format must be one of {FORMATS}, got {format!r}")
        gates = tuple(gates)
        if not gates or any(g not in GATES for g in gates):
            raise ValueError(f"TreeF1Monitor: gates must be a non-empty list of {GATES}, got {list(gates)}")
        if combinations is not None and (not combinations or any(c not in DIRECTION_COMBINATIONS
                                                                 for c in combinations)):
            raise ValueError(f"TreeF1Monitor: combinations must be a non-empty list of {DIRECTION_COMBINATIONS}, "
                             f"got {combinations}")
        if limit is not None and limit < 1:
            raise ValueError(f"TreeF1Monitor: limit must be positive, got {limit}")
        self.gold, self.format, self.split = gold, format, split
        self.name, self.data_dir, self.revision = name, data_dir, revision
        self.gates = gates
        self.combinations = None if combinations is None else tuple(combinations)
        self.limit, self.prefix, self.batch_size = limit, prefix, batch_size
        self._trees: list | None = None

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage == "fit" and self._trees is None:
            self._trees = self._read()

    def _read(self) -> list:
        if self.format == "ptb":
            trees, skipped = read_ptb_gold(self.gold), 0
        else:
            trees, skipped = read_ontonotes_gold(self.gold, self.split, self.name, self.data_dir, self.revision)
        trees = [t for t in trees if t.words()][: self.limit]
        if not trees:
            raise ValueError(f"TreeF1Monitor: no gold trees with words in {self.gold} ({self.split})")
        log.info("TreeF1Monitor: %d gold trees from %s (%s); %d sentences without a tree skipped", len(trees),
                 self.gold, self.split, skipped)
        return trees

    def scores(self, pl_module: pl.LightningModule, datamodule_hparams: dict | None = None) -> dict[str, float]:
        """Sentence-level UF1 (percent) per ``{prefix}_{gate}_l{layer}_{combination}``, and their best as
        ``prefix``."""
        if self._trees is None:
            self._trees = self._read()
        options = word_options(datamodule_hparams)
        probe = EncoderProbe(pl_module, *(options or ()), name=type(pl_module).__name__)
        words = [t.words() for t in self._trees]
        results: dict[str, float] = {}
        for gate in self.gates:
            distances = probe.distances(words, self.batch_size, gate)
            layers, directions = distances[0].shape[:2]
            combinations = self.combinations or (("mean", "forward", "backward") if directions == 2 else ("forward",))
            if directions == 1 and "backward" in combinations:
                raise ValueError("TreeF1Monitor: combination 'backward' needs a bidirectional model")
            for (layer, how), result in score_distances(self._trees, distances, layers, combinations).items():
                results[f"{self.prefix}_{gate}_l{layer + 1}_{how}"] = result["sentence_f1"]
        results[self.prefix] = max(results.values())
        return results

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        started = time.perf_counter()
        datamodule = getattr(trainer, "datamodule", None)
        hparams = dict(datamodule.hparams) if datamodule is not None and hasattr(datamodule, "hparams") else None
        results = self.scores(pl_module, hparams)
        # every process computes the same numbers from the same weights
        for key, value in results.items():
            log_gathered(pl_module, key, torch.tensor(value), prog_bar=key == self.prefix)
        best = max((k for k in results if k != self.prefix), key=results.get)
        log.info("TreeF1Monitor: best %s = %.2f (%s), %.1f s", self.prefix, results[self.prefix], best,
                 time.perf_counter() - started)
