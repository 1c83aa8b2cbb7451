"""Word embeddings, optionally initialised from pretrained GloVe / word2vec text files."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import torch
from torch import nn

from onlstm_tasks.data.batching import TokenBatch
from onlstm_tasks.data.vocab import PAD, UNK
from onlstm_tasks.embedders.base import TokenEmbedder, zero_padding
from onlstm_tasks.embedders.pretrained import copy_pretrained_rows

log = logging.getLogger(__name__)


class WordEmbedding(TokenEmbedder):
    """One trainable vector per vocabulary word, looked up by ``batch.word_ids``.

    ``vocab`` is the word vocabulary's ``itos`` list (index 0 ``<pad>``, 1 ``<unk>``), passed in by code.
    Rows start uniform in +-sqrt(3/dim) (the padding row at zero); with ``pretrained`` (a GloVe or word2vec
    text file, optionally ``.gz``) the rows of words found in the file are overwritten, and ``coverage``
    is the found fraction of the vocabulary (specials excluded). ``freeze`` stops all rows from training,
    including the random rows of words missing from the file.
    """

    def __init__(
        self,
        vocab: Sequence[str],
        dim: int = 100,
        pretrained: str | None = None,
        freeze: bool = False,
        lowercase_lookup: bool = True,
    ) -> None:
        super().__init__()
        self.output_size = dim
        self.embedding = nn.Embedding(len(vocab), dim, padding_idx=0)
        bound = math.sqrt(3.0 / dim)
        with torch.no_grad():
            self.embedding.weight.uniform_(-bound, bound)
            self.embedding.weight[0].zero_()
        self.coverage: float | None = None
        if pretrained is not None:
            with torch.no_grad():
                found = copy_pretrained_rows(self.embedding.weight, vocab, pretrained, lowercase_lookup)
            total = sum(1 for w in vocab if w not in (PAD, UNK))
            self.coverage = found / total if total else 0.0
            log.info(
                "pretrained vectors %s: found %d / %d vocabulary words (%.1f%%)",
                pretrained, found, total, 100.0 * self.coverage,
            )
        self.embedding.weight.requires_grad_(not freeze)

    def forward(self, batch: TokenBatch) -> torch.Tensor:
        return zero_padding(self.embedding(batch.word_ids), batch.mask)  # [B, T, dim]
