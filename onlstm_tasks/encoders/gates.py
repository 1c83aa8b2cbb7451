"""The ON-LSTM's master-gate activations (the paper's cumax operator and its variants)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

MASTER_INPUT_VARIANTS = ("paper", "symmetric")


def cumax(x: torch.Tensor) -> torch.Tensor:
    """cumax(x) = cumsum(softmax(x)) over the last dimension: non-decreasing, ending at 1."""
    return torch.cumsum(F.softmax(x, dim=-1), dim=-1)


def master_input_gate(logits: torch.Tensor, variant: str) -> torch.Tensor:
    """The master input gate i~, non-increasing over levels.

    ``paper``: ``1 - cumax(x)`` (its top level is always 0). ``symmetric``: the reverse cumulative sum of the
    softmax (the variant from the blog that popularised ON-LSTM; its bottom level is always 1).
    """
    if variant == "paper":
        return 1.0 - cumax(logits)
    if variant == "symmetric":
        return torch.flip(torch.cumsum(torch.flip(F.softmax(logits, dim=-1), [-1]), dim=-1), [-1])
    raise ValueError(f"master_input must be one of {MASTER_INPUT_VARIANTS}, got {variant!r}")
