"""Logs wall time per training epoch, training tokens per second and the process's peak memory."""

from __future__ import annotations

import resource
import sys
import time

from lightning.pytorch.callbacks import Callback


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MB (Linux reports KB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


class EpochResources(Callback):
    """Logs ``epoch_seconds`` (training part of the epoch), ``train_tokens_per_second`` and ``peak_rss_mb``; under
    DDP the slowest process's seconds, the tokens per second of all processes together and the largest peak."""

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self._start, self._tokens = time.perf_counter(), 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._tokens += sum(len(words) for words in batch.tokens.words)  # on the host: no device read

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        seconds = time.perf_counter() - self._start
        # under DDP: the slowest process's time, every process's tokens, the largest process's memory
        pl_module.log("epoch_seconds", seconds, sync_dist=True, reduce_fx="max")
        pl_module.log("train_tokens_per_second", self._tokens / seconds, sync_dist=True, reduce_fx="sum")
        pl_module.log("peak_rss_mb", peak_rss_mb(), sync_dist=True, reduce_fx="max")
