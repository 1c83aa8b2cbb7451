"""Dropout shared by the recurrent encoders (AWD-LSTM style): locked (variational) dropout between layers, and the
check of a dropout probability. DropConnect on weights is :mod:`onlstm_tasks.encoders.dropconnect`."""

from __future__ import annotations

import torch


def locked_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Variational dropout: one mask per sequence, shared over time. ``x`` is [B, T, D]."""
    if not training or p == 0.0:
        return x
    keep = x.new_empty(x.size(0), 1, x.size(2)).bernoulli_(1.0 - p) / (1.0 - p)
    return x * keep


def check_probability(name: str, p: float) -> None:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {p}")
