"""Character BiLSTM word features (Lample et al., 2016): final forward and backward states, concatenated."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from onlstm_tasks.data.core.batching import TokenBatch
from onlstm_tasks.embedders.base import TokenEmbedder, zero_padding


class CharLSTM(TokenEmbedder):
    """``batch.char_ids`` [B, T, C] -> [B, T, 2 * hidden_size]; char id 0 is padding.

    Only words with at least one character run through the LSTM, packed to their true length, so padding
    characters and padded words change nothing; words without characters get zeros. Characters are
    assumed left-aligned in each word (padding only at the end).
    """

    def __init__(self, num_chars: int, char_dim: int = 30, hidden_size: int = 25) -> None:
        super().__init__()
        self.output_size = 2 * hidden_size
        self.embedding = nn.Embedding(num_chars, char_dim, padding_idx=0)
        self.lstm = nn.LSTM(char_dim, hidden_size, batch_first=True, bidirectional=True)

    def forward(self, batch: TokenBatch) -> torch.Tensor:
        B, T, C = batch.char_ids.shape
        chars = batch.char_ids.reshape(B * T, C)
        lengths = (chars != 0).sum(dim=1)  # [N]
        real = (lengths > 0).nonzero(as_tuple=True)[0]  # indices of words with characters
        out = self.embedding.weight.new_zeros(B * T, self.output_size)
        if real.numel() > 0:
            x = self.embedding(chars[real])  # [n, C, char_dim]
            packed = pack_padded_sequence(x, lengths[real].cpu(), batch_first=True, enforce_sorted=False)
            _, (h, _) = self.lstm(packed)  # h: [2, n, hidden], final state of each direction
            out = out.index_copy(0, real, torch.cat([h[0], h[1]], dim=-1))
        return zero_padding(out.reshape(B, T, self.output_size), batch.mask)
