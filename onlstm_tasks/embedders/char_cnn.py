"""Character CNN word features (Ma & Hovy, 2016): char embeddings -> 1-D convolution -> max over chars."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from onlstm_tasks.data.core.batching import TokenBatch
from onlstm_tasks.embedders.base import TokenEmbedder, zero_padding


class CharCNN(TokenEmbedder):
    """``batch.char_ids`` [B, T, C] -> [B, T, filters]; char id 0 is padding and never changes a result.

    Each output position of the convolution is centred on one character (the window runs
    ``(kernel_size - 1) // 2`` chars left and ``kernel_size // 2`` right, zero beyond the word); positions
    on padding characters are masked before the max-pool, and words without characters get zeros.
    """

    def __init__(self, num_chars: int, char_dim: int = 30, filters: int = 50, kernel_size: int = 3) -> None:
        super().__init__()
        self.output_size = filters
        self.kernel_size = kernel_size
        self.embedding = nn.Embedding(num_chars, char_dim, padding_idx=0)
        self.conv = nn.Conv1d(char_dim, filters, kernel_size)

    def forward(self, batch: TokenBatch) -> torch.Tensor:
        B, T, C = batch.char_ids.shape
        chars = batch.char_ids.reshape(B * T, C)
        char_mask = chars != 0  # [N, C]
        x = self.embedding(chars).transpose(1, 2)  # [N, char_dim, C], zero at padding chars
        x = F.pad(x, ((self.kernel_size - 1) // 2, self.kernel_size // 2))  # [N, char_dim, C + k - 1]
        x = self.conv(x)  # [N, filters, C]
        x = x.masked_fill(~char_mask.unsqueeze(1), float("-inf"))
        x = x.max(dim=2).values if C > 0 else x.new_zeros(B * T, self.output_size)  # [N, filters]
        x = torch.where(char_mask.any(dim=1, keepdim=True), x, torch.zeros_like(x))
        return zero_padding(x.reshape(B, T, self.output_size), batch.mask)
