"""Dropout variants used by recurrent encoders (AWD-LSTM style)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def locked_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Variational dropout: one mask per sequence, shared over time. ``x`` is [B, T, D]."""
    if not training or p == 0.0:
        return x
    keep = x.new_empty(x.size(0), 1, x.size(2)).bernoulli_(1.0 - p) / (1.0 - p)
    return x * keep


def drop_connect(weight: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """DropConnect on a weight matrix: one mask per call (so per forward pass), inverted scaling.

    In training, each entry is zeroed with probability ``p`` and the rest scaled by ``1 / (1 - p)``; in eval the
    weight is used as it is. (The ON-LSTM authors do not rescale in training and multiply by ``1 - p`` in eval:
    the same model up to the factor ``1 - p`` on the weight, which :meth:`ONLSTM.load_reference_state_dict`
    applies.)
    """
    if not training or p == 0.0:
        return weight
    return F.dropout(weight, p=p, training=True)


def check_probability(name: str, p: float) -> None:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {p}")
