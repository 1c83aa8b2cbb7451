"""The token embedder contract: a padded :class:`TokenBatch` in, one vector per token out."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from onlstm_tasks.data.core.batching import TokenBatch


class TokenEmbedder(nn.Module):
    """Maps a batch of tokens to vectors ``[B, T, output_size]``.

    Subclasses set ``output_size`` in their constructor (derived from their own arguments, never typed by
    hand in a config) and return zeros at padded positions (``batch.mask`` False).
    """

    output_size: int

    def forward(self, batch: TokenBatch) -> torch.Tensor:
        raise NotImplementedError


def zero_padding(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``x`` [B, T, D] with the positions where ``mask`` [B, T] is False set to zero."""
    return x * mask.unsqueeze(-1).to(x.dtype)


EmbedderFactory = Callable[[Sequence[str], Sequence[str]], TokenEmbedder]  # (word_vocab, char_vocab) -> embedder
