"""The aspect-head tests' toy batch: 3 sentences of 7, 4 and 1 real tokens (padding after them), ``D`` features per
token and one aspect span each."""

from __future__ import annotations

import torch

D = 6
LENGTHS = torch.tensor([7, 4, 1])
SPANS = [(2, 4), (0, 2), (0, 1)]


def aspect_batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Generator]:
    """``(x [3, 7, D], mask [3, 7], aspect mask [3, 7], the generator, to draw more from it)``."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 7, D, generator=g)
    mask = torch.arange(7)[None] < LENGTHS[:, None]
    aspect = torch.zeros(3, 7, dtype=torch.bool)
    for b, (s, e) in enumerate(SPANS):
        aspect[b, s:e] = True
    return x, mask, aspect, g
