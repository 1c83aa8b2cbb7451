"""Aspect-sentiment heads: (embedded sentence, aspect span) -> a fixed-size representation.

Every head follows one signature, ``forward(x [B,T,D], mask [B,T] bool, aspect_mask [B,T] bool, heads=None) ->
[B, output_size]``, takes its input size first (so configs never type it) and builds its encoders from any
``SequenceEncoder`` factory (ON-LSTM by default; LSTM/GRU by swapping ``class_path``). ``aspect_mask`` marks the
aspect's tokens, a contiguous run inside the real tokens; ``heads`` is the batch's tree (``[B, T]``, 0-based, or
None), which only a head that reads a tree uses (:class:`~onlstm_tasks.modules.tree_aspect_head.TreeAwareAspectHead`).

:meth:`AspectHead.features` also returns the output of the head's encoder over the whole sentence, where it has one
(the pooling and tree-aware heads): the classifier reads the induced trees from it without a second pass.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from onlstm_tasks.encoders.base import EncoderFactory, EncoderOutput, lengths_to_mask, reverse_padded
from onlstm_tasks.encoders.defaults import ASPECT_HEAD, default_encoder

DEFAULT_ENCODER = default_encoder(**ASPECT_HEAD)  # every head's: a unidirectional ON-LSTM, hidden 300, chunk 10


def aspect_bounds(aspect_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[B,T] bool -> (start, end) [B] long, the aspect's token span [start, end)."""
    positions = torch.arange(aspect_mask.size(1), device=aspect_mask.device)
    start = torch.where(aspect_mask, positions, aspect_mask.size(1)).min(dim=1).values
    end = torch.where(aspect_mask, positions + 1, 0).max(dim=1).values
    return start, end


def state_at(hidden: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """hidden [B,T,H], index [B] -> hidden[b, index[b]] [B,H]."""
    return hidden.gather(1, index.view(-1, 1, 1).expand(-1, 1, hidden.size(-1))).squeeze(1)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of x [B,T,D] over the True positions of mask [B,T] -> [B,D]."""
    weights = mask.to(x.dtype).unsqueeze(-1)
    return (x * weights).sum(1) / weights.sum(1).clamp_min(1.0)


class AspectHead(nn.Module):
    """Base class: subclasses set ``output_size`` and define ``forward(x, mask, aspect_mask, heads=None)``; a head
    with an encoder over the whole sentence alone overrides :meth:`features` instead."""

    output_size: int

    def features(self, x: torch.Tensor, mask: torch.Tensor, aspect_mask: torch.Tensor,
                 heads: torch.Tensor | None = None) -> tuple[torch.Tensor, EncoderOutput | None]:
        """The head's representation [B, output_size] and its whole-sentence encoder's output (None here: the
        heads that have one say so)."""
        return self(x, mask, aspect_mask, heads), None


class TargetDependentHead(AspectHead):
    """TD-LSTM (Tang et al., 2016): one encoder reads left context + aspect left to right, another reads aspect +
    right context right to left; their last states are concatenated."""

    def __init__(self, input_size: int, encoder: EncoderFactory | None = None) -> None:
        super().__init__()
        factory = encoder or DEFAULT_ENCODER
        self.left, self.right = factory(self.encoder_input(input_size)), factory(self.encoder_input(input_size))
        if getattr(self.left, "bidirectional", False):
            raise ValueError(f"{type(self).__name__} reads each context in one direction: give it a "
                             "unidirectional encoder (bidirectional=false)")
        self.output_size = self.left.output_size + self.right.output_size

    def encoder_input(self, input_size: int) -> int:
        return input_size

    def inputs(self, x: torch.Tensor, mask: torch.Tensor, aspect_mask: torch.Tensor) -> torch.Tensor:
        return x

    def forward(self, x: torch.Tensor, mask: torch.Tensor, aspect_mask: torch.Tensor,
                heads: torch.Tensor | None = None) -> torch.Tensor:
        x = self.inputs(x, mask, aspect_mask)
        lengths = mask.sum(1)
        start, end = aspect_bounds(aspect_mask)
        # left context + aspect: the prefix [0, end)
        left = self.left(x, lengths_to_mask(end, x.size(1))).hidden
        # aspect + right context read backwards: reversed within the sentence, [start, n) becomes a prefix
        right_len = lengths - start
        right = self.right(reverse_padded(x, lengths), lengths_to_mask(right_len, x.size(1))).hidden
        return torch.cat([state_at(left, end - 1), state_at(right, right_len - 1)], dim=-1)


class TargetConnectionHead(TargetDependentHead):
    """TC-LSTM: TD-LSTM whose every input vector is concatenated with the mean aspect vector."""

    def encoder_input(self, input_size: int) -> int:
        return 2 * input_size

    def inputs(self, x: torch.Tensor, mask: torch.Tensor, aspect_mask: torch.Tensor) -> torch.Tensor:
        aspect = masked_mean(x, aspect_mask).unsqueeze(1).expand_as(x)
        return torch.cat([x, aspect], dim=-1)


class AspectAttentionHead(AspectHead):
    """ATAE-style attention (Wang et al., 2016): the encoder reads [word; aspect] vectors; attention over its
    states is conditioned on the aspect vector; the attended vector is combined with the last state."""

    def __init__(self, input_size: int, encoder: EncoderFactory | None = None, attention_size: int = 0) -> None:
        super().__init__()
        self.encoder = (encoder or DEFAULT_ENCODER)(2 * input_size)
        hidden = self.encoder.output_size
        attention_size = attention_size or hidden
        self.project_states = nn.Linear(hidden, attention_size, bias=False)
        self.project_aspect = nn.Linear(input_size, attention_size)
        self.score = nn.Linear(attention_size, 1, bias=False)
        self.combine_attended = nn.Linear(hidden, hidden, bias=False)
        self.combine_last = nn.Linear(hidden, hidden)
        self.output_size = hidden

    def attention(self, x: torch.Tensor, mask: torch.Tensor, aspect_mask: torch.Tensor) -> torch.Tensor:
        """Attention weights [B,T] (zero at padding) — exposed for inspection."""
        return self._run(x, mask, aspect_mask)[1]

    def _run(self, x, mask, aspect_mask):
        aspect = masked_mean(x, aspect_mask)  # [B,D]
        states = self.encoder(torch.cat([x, aspect.unsqueeze(1).expand_as(x)], -1), mask).hidden  # [B,T,H]
        m = torch.tanh(self.project_states(states) + self.project_aspect(aspect).unsqueeze(1))
        scores = self.score(m).squeeze(-1).masked_fill(~mask, float("-inf"))
        return states, torch.softmax(scores, dim=-1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, aspect_mask: torch.Tensor,
                heads: torch.Tensor | None = None) -> torch.Tensor:
        states, alpha = self._run(x, mask, aspect_mask)
        attended = torch.bmm(alpha.unsqueeze(1), states).squeeze(1)
        last = state_at(states, mask.sum(1) - 1)
        return torch.tanh(self.combine_attended(attended) + self.combine_last(last))


class AspectPoolingHead(AspectHead):
    """An encoder over the whole sentence, its states pooled over the aspect's positions (mean or max)."""

    def __init__(self, input_size: int, encoder: EncoderFactory | None = None,
                 pooling: Literal["mean", "max"] = "mean") -> None:
        super().__init__()
        if pooling not in ("mean", "max"):
            raise ValueError(f"pooling must be 'mean' or 'max', got {pooling!r}")
        self.encoder = (encoder or DEFAULT_ENCODER)(input_size)
        self.pooling = pooling
        self.output_size = self.encoder.output_size

    def pool(self, states: torch.Tensor, aspect_mask: torch.Tensor) -> torch.Tensor:
        """states [B,T,H] -> [B,H], pooled over the aspect's positions."""
        if self.pooling == "mean":
            return masked_mean(states, aspect_mask)
        return states.masked_fill(~aspect_mask.unsqueeze(-1), float("-inf")).max(dim=1).values

    def features(self, x: torch.Tensor, mask: torch.Tensor, aspect_mask: torch.Tensor,
                 heads: torch.Tensor | None = None) -> tuple[torch.Tensor, EncoderOutput]:
        encoded = self.encoder(x, mask)
        return self.pool(encoded.hidden, aspect_mask), encoded

    def forward(self, x: torch.Tensor, mask: torch.Tensor, aspect_mask: torch.Tensor,
                heads: torch.Tensor | None = None) -> torch.Tensor:
        return self.features(x, mask, aspect_mask, heads)[0]
