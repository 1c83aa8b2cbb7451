"""Optimiser and LR scheduler from LightningCLI-style callables, shared by the task modules."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable


def optimizers_config(parameters: Iterable[torch.nn.Parameter], optimizer: OptimizerCallable | None,
                      lr_scheduler: LRSchedulerCallable | None, monitor: str):
    """What ``configure_optimizers`` returns: the optimiser (default Adam, lr 1e-3) and, if given, the scheduler
    stepped on ``monitor``, a score where higher is better. A ``ReduceLROnPlateau`` must then have ``mode: max``;
    with its default ``min`` it would cut the learning rate while the score improves, so that is an error."""
    built = (optimizer or (lambda params: torch.optim.Adam(params, lr=1e-3)))(parameters)
    if lr_scheduler is None:
        return built
    scheduler = lr_scheduler(built)
    if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau) and scheduler.mode != "max":
        raise ValueError(f"ReduceLROnPlateau watches {monitor}, where higher is better: set its mode to 'max' "
                         f"(lr_scheduler init_args: {{mode: max}}), got mode={scheduler.mode!r}")
    return {"optimizer": built, "lr_scheduler": {"scheduler": scheduler, "monitor": monitor}}
