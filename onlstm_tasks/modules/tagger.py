"""Embedder -> encoder -> emissions -> CRF: the NER network as a plain torch module."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from onlstm_tasks.data.core.batching import TokenBatch
from onlstm_tasks.embedders.base import TokenEmbedder
from onlstm_tasks.encoders.base import EncoderOutput, SequenceEncoder, encode
from onlstm_tasks.modules.crf import CRF


class CRFTagger(nn.Module):
    """Composes any :class:`TokenEmbedder` and any :class:`SequenceEncoder` with a constrained CRF.

    The encoder must read what the embedder writes (``encoder.input_size == embedder.output_size``); the
    emission layer sizes itself from ``encoder.output_size``. Gold ``heads`` ([B, T], 0-based, or None) reach the
    encoder only when it is a :class:`~onlstm_tasks.encoders.base.TreeEncoder`.
    """

    def __init__(self, embedder: TokenEmbedder, encoder: SequenceEncoder, labels: Sequence[str], scheme: str,
                 dropout: float = 0.5) -> None:
        super().__init__()
        if encoder.input_size != embedder.output_size:
            raise ValueError(f"encoder.input_size ({encoder.input_size}) must equal embedder.output_size "
                             f"({embedder.output_size})")
        self.embedder, self.encoder = embedder, encoder
        self.dropout = nn.Dropout(dropout)
        self.emit = nn.Linear(encoder.output_size, len(labels))
        self.crf = CRF(len(labels), labels=labels, scheme=scheme)

    def emissions(self, tokens: TokenBatch, heads: torch.Tensor | None = None) -> tuple[torch.Tensor, EncoderOutput]:
        encoded = encode(self.encoder, self.embedder(tokens), tokens.mask, heads)
        return self.emit(self.dropout(encoded.hidden)), encoded  # [B, T, K]

    def loss(self, tokens: TokenBatch, tags: torch.Tensor, heads: torch.Tensor | None = None) -> torch.Tensor:
        return self.crf.nll(self.emissions(tokens, heads)[0], tags, tokens.mask)

    def decode(self, tokens: TokenBatch, heads: torch.Tensor | None = None) -> torch.Tensor:
        return self.crf.decode(self.emissions(tokens, heads)[0], tokens.mask)

    def evaluate(self, tokens: TokenBatch, tags: torch.Tensor,
                 heads: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(loss, best tags)`` from one encoder pass: :meth:`loss` and :meth:`decode` of the same emissions."""
        emissions = self.emissions(tokens, heads)[0]
        return self.crf.nll(emissions, tags, tokens.mask), self.crf.decode(emissions, tokens.mask)

    def predict(self, tokens: TokenBatch, heads: torch.Tensor | None = None) -> tuple[torch.Tensor, EncoderOutput]:
        """``(best tags [B, T], the encoder's output)`` from one pass (:meth:`decode`; padding holds tag 0)."""
        emissions, encoded = self.emissions(tokens, heads)
        return self.crf.decode(emissions, tokens.mask), encoded
