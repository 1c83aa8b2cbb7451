"""Optimiser and LR scheduler from LightningCLI-style callables, shared by the task modules."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable


def optimizers_config(parameters: Iterable[torch.nn.Parameter], optimizer: OptimizerCallable | None,
                      lr_scheduler: LRSchedulerCallable | None, monitor: str, higher_is_better: bool = True):
    """What ``configure_optimizers`` returns: the optimiser (default Adam, lr 1e-3) and, if given, the scheduler
    stepped on ``monitor``. A ``ReduceLROnPlateau`` must watch it in the right direction (``mode: max`` for a
    score where higher is better, ``min`` for one such as perplexity); the wrong mode would cut the learning
    rate while the model improves, so that is an error."""
    built = (optimizer or (lambda params: torch.optim.Adam(params, lr=1e-3)))(parameters)
    if lr_scheduler is None:
        return built
    scheduler = lr_scheduler(built)
    mode, better = ("max", "higher") if higher_is_better else ("min", "lower")
    if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau) and scheduler.mode != mode:
        raise ValueError(f"ReduceLROnPlateau watches {monitor}, where {better} is better: set its mode to "
                         f"'{mode}' (lr_scheduler init_args: {{mode: {mode}}}), got mode={scheduler.mode!r}")
    return {"optimizer": built, "lr_scheduler": {"scheduler": scheduler, "monitor": monitor}}
