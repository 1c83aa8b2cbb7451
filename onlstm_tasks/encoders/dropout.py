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


def keep_masks(n: int, keep: float, like: torch.Tensor) -> torch.Tensor:
    """``n`` independent entries, each ``1 / keep`` with probability ``keep`` and 0 otherwise (dtype and device of
    ``like``): an inverted-dropout mask.

    Drawn as 31-bit uniform integers, two from each 64-bit word of ``random_`` (its words are uniform on
    [0, 2^63), so both halves' low 31 bits are uniform), compared with ``keep * 2^31``; the scale is the inverse
    of the probability so rounded, which keeps the mask's mean exactly 1. That resolution (2^-31) is finer than
    thresholding ``torch.rand`` (2^-24), and half the random words make it about 1.4x faster on CPU, where the
    generator is most of DropConnect's cost.
    """
    threshold = round(keep * 2**31)
    if threshold <= 0:
        raise ValueError(f"keep probability {keep} rounds to 0 at 31-bit resolution")
    words = torch.empty((n + 1) // 2, dtype=torch.int64, device=like.device).random_()
    kept = words.view(torch.int32)[:n].bitwise_and_(0x7FFFFFFF).lt_(threshold)
    return kept.to(like.dtype).mul_(2**31 / threshold)


def check_probability(name: str, p: float) -> None:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {p}")
