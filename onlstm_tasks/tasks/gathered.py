"""Logging a score that every process already holds whole.

The task metrics (:mod:`onlstm_tasks.metrics`) gather counts or predictions from every process before computing
a score, so under DDP each process logs the same value. Logged as a plain tensor without ``sync_dist``, Lightning
warns that it should be synchronised; with ``sync_dist=True`` and ``reduce_fx="max"`` its epoch-end all-reduce is
the identity on equal values (the max of equal floats is exact, where a mean of three might not be), so nothing
is averaged and nothing is warned about.
"""

from __future__ import annotations

import lightning.pytorch as pl
import torch


def log_gathered(module: pl.LightningModule, name: str, value: torch.Tensor, prog_bar: bool = False) -> None:
    """``module.log(name, value)`` for a ``value`` computed from every process's data (equal on all of them)."""
    module.log(name, value, prog_bar=prog_bar, sync_dist=True, reduce_fx="max")
