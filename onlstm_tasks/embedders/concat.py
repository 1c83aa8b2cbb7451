"""Several token embedders side by side."""

from __future__ import annotations

import torch
from torch import nn

from onlstm_tasks.data.core.batching import TokenBatch
from onlstm_tasks.embedders.base import TokenEmbedder, zero_padding


class ConcatEmbedder(TokenEmbedder):
    """Concatenates the outputs of ``parts`` on the feature axis, then applies dropout.

    ``output_size`` is the sum of the parts' sizes.
    """

    def __init__(self, parts: list[TokenEmbedder], dropout: float = 0.0) -> None:
        super().__init__()
        if not parts:
            raise ValueError("ConcatEmbedder needs at least one part")
        self.parts = nn.ModuleList(parts)
        self.output_size = sum(p.output_size for p in parts)
        self.dropout = nn.Dropout(dropout)

    def forward(self, batch: TokenBatch) -> torch.Tensor:
        x = torch.cat([part(batch) for part in self.parts], dim=-1)  # [B, T, output_size]
        return zero_padding(self.dropout(x), batch.mask)
