"""Embedder -> aspect head -> dropout -> polarity logits: the aspect-sentiment network as a plain torch module (as
:class:`~onlstm_tasks.modules.tagger.CRFTagger` is the NER one)."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from onlstm_tasks.data.core.batching import TokenBatch
from onlstm_tasks.embedders.base import TokenEmbedder
from onlstm_tasks.encoders.base import EncoderOutput
from onlstm_tasks.modules.aspect_heads import AspectHead


class AspectOutput(NamedTuple):
    logits: torch.Tensor  # [B, C]
    encoded: EncoderOutput | None  # the head's encoder over the whole sentence, where it has one (trees read off it)


class AspectSentimentNet(nn.Module):
    """Composes any :class:`TokenEmbedder` with any :class:`AspectHead` (built from the embedder's output size) and
    an output layer over the head's ``output_size``. Every head gets the batch's tree (``heads``, [B, T], 0-based,
    or None); only a head that reads one uses it."""

    def __init__(self, embedder: TokenEmbedder, head: AspectHead, num_labels: int, dropout: float = 0.5) -> None:
        super().__init__()
        self.embedder, self.head = embedder, head
        self.dropout = nn.Dropout(dropout)
        self.classify = nn.Linear(head.output_size, num_labels)

    def forward(self, tokens: TokenBatch, aspect_mask: torch.Tensor,
                heads: torch.Tensor | None = None) -> AspectOutput:
        """One pass: the class logits and the whole-sentence encoder's output (for the induced trees)."""
        features, encoded = self.head.features(self.embedder(tokens), tokens.mask, aspect_mask, heads)
        return AspectOutput(self.classify(self.dropout(features)), encoded)
