"""A padded batch with mixed lengths for the recurrent-encoder tests (one row full, one of length 1)."""

from __future__ import annotations

import torch

LENGTHS = [6, 3, 1, 5]


def mixed_batch(dtype=torch.float64, features=5, seed=0, lengths=LENGTHS):
    """``(x [B, T, features], mask [B, T] bool)``: random inputs, left-aligned mask of ``lengths``."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lengths), max(lengths), features, generator=g, dtype=dtype)
    mask = torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]
    return x, mask
