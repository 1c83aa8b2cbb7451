"""The network of a word-level language model in the AWD-LSTM style (Merity et al., 2018).

embedding (embedding dropout: whole word types dropped) -> locked dropout -> encoder (its own locked dropout
between layers and DropConnect on the recurrent weights) -> locked dropout -> softmax over the vocabulary: a full
one, whose weight is the embedding's when ``tie_weights``, or an adaptive one (:mod:`.lm_softmax`). A bidirectional model is a forward and a backward language
model side by side (ELMo): two independent stacks (:class:`~onlstm_tasks.encoders.IndependentDirections`)
sharing the embedding and the softmax.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from onlstm_tasks.data.core.batching import IGNORE, TokenBatch
from onlstm_tasks.embedders.base import TokenEmbedder, zero_padding
from onlstm_tasks.encoders.base import EncoderFactory, EncoderOutput
from onlstm_tasks.encoders.dropout import check_probability, locked_dropout
from onlstm_tasks.encoders.independent_directions import IndependentDirections

from onlstm_tasks.modules.lm_softmax import adaptive_softmax, check_softmax, log_probs, position_nll


class LMEmbedding(TokenEmbedder):
    """Word vectors with embedding dropout (a dropped word type is zero at every occurrence in the batch, kept
    ones scaled by ``1 / (1 - p)``) and locked dropout on the result, both in training mode only."""

    def __init__(self, vocab_size: int, dim: int, embedding_dropout: float = 0.1, dropout: float = 0.4) -> None:
        super().__init__()
        check_probability("embedding_dropout", embedding_dropout)
        check_probability("input_dropout", dropout)
        self.embedding = nn.Embedding(vocab_size, dim, padding_idx=0)
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)  # AWD-LSTM's range
        with torch.no_grad():
            self.embedding.weight[0].zero_()
        self.output_size, self.embedding_dropout, self.dropout = dim, embedding_dropout, dropout

    def forward(self, batch: TokenBatch) -> torch.Tensor:
        weight = self.embedding.weight
        if self.training and self.embedding_dropout > 0:
            keep = 1.0 - self.embedding_dropout
            weight = weight * weight.new_empty(weight.size(0), 1).bernoulli_(keep).div_(keep)
        x = F.embedding(batch.word_ids, weight, padding_idx=0)
        return zero_padding(locked_dropout(x, self.dropout, self.training), batch.mask)


@dataclass
class LMOutput:
    """The states each direction's softmax reads ([B, T, width]: the last layer after output dropout; ``backward``
    None for a forward-only model), the encoder's output, and the last layer's states of both directions after
    output dropout (for activation regularisation). Score them with :meth:`LanguageModelNet.nll` or
    :meth:`LanguageModelNet.log_probs`."""

    forward: torch.Tensor
    backward: torch.Tensor | None
    encoded: EncoderOutput
    dropped: torch.Tensor


class LanguageModelNet(nn.Module):
    """Embedding, encoder (one stack, or two for ``bidirectional``) and the softmax layer.

    Args:
        vocab_size, embedding_dim: the word vectors.
        encoder: builds one left-to-right :class:`SequenceEncoder` from its input size; it must be
            unidirectional (a bidirectional encoder would let the forward model see the words it predicts).
        bidirectional: adds a backward language model (a second stack built by ``encoder``).
        tie_weights: the softmax weight is the embedding matrix; needs the encoder's output size (per
            direction) to equal ``embedding_dim`` (e.g. ``hidden_size: [1150, 1150, 400]`` with 400-d words), and
            ``softmax: full``: with the adaptive softmax it is refused (its tail clusters score words through
            their own projections, so there is no one matrix to share).
        softmax: ``full`` (``decoder`` is an ``nn.Linear``) or ``adaptive`` (``decoder`` is an
            ``nn.AdaptiveLogSoftmaxWithLoss`` with ``adaptive_cutoffs`` and ``div_value``; cutoffs default to
            2,000 and 10,000 ids, those below the vocabulary size), see :mod:`onlstm_tasks.modules.lm_softmax`.
        embedding_dropout, input_dropout, output_dropout: see :class:`LMEmbedding`; output dropout is locked
            dropout on the last layer's states.
    """

    def __init__(self, vocab_size: int, embedding_dim: int, encoder: EncoderFactory, bidirectional: bool = False,
                 tie_weights: bool = True, embedding_dropout: float = 0.1, input_dropout: float = 0.4,
                 output_dropout: float = 0.4, softmax: str = "full", adaptive_cutoffs: list[int] | None = None,
                 div_value: float = 4.0) -> None:
        super().__init__()
        check_probability("output_dropout", output_dropout)
        check_softmax(softmax, adaptive_cutoffs, div_value, tie_weights)
        self.embedder = LMEmbedding(vocab_size, embedding_dim, embedding_dropout, input_dropout)
        one = encoder(embedding_dim)
        if getattr(one, "num_directions", 1) != 1 or getattr(one, "bidirectional", False):
            raise ValueError(f"a language model's encoder must be unidirectional (a bidirectional "
                             f"{type(one).__name__} lets each direction's upper layers see the words to predict); "
                             f"set bidirectional: true on the model for a forward and a backward language model")
        self.encoder = IndependentDirections(embedding_dim, encoder) if bidirectional else one
        self.bidirectional = bidirectional
        self.directions = 2 if bidirectional else 1
        width = self.encoder.output_size // self.directions
        if softmax == "adaptive":
            self.decoder = adaptive_softmax(width, vocab_size, adaptive_cutoffs, div_value)
        else:
            self.decoder = nn.Linear(width, vocab_size)
            bound = 1.0 / math.sqrt(width)
            nn.init.uniform_(self.decoder.bias, -bound, bound)
        if tie_weights:
            if width != embedding_dim:
                raise ValueError(f"tie_weights needs the encoder's output size per direction ({width}) to equal "
                                 f"embedding_dim ({embedding_dim}): make the last layer {embedding_dim} wide "
                                 f"(e.g. hidden_size: [1150, 1150, {embedding_dim}]) or set tie_weights: false")
            self.decoder.weight = self.embedder.embedding.weight
        self.output_dropout = output_dropout

    def forward(self, tokens: TokenBatch, state: object | None = None, carry: bool = False) -> LMOutput:
        """``carry``: a window of a contiguous stream (every row full), whose final state the next window starts
        from: the encoder gets no mask (a full batch, known without reading the mask on the host)."""
        x = self.embedder(tokens)
        mask = None if carry else tokens.mask
        if state is None:
            encoded = self.encoder(x, mask)
        else:
            encoded = self.encoder(x, mask, state=state)
        dropped = locked_dropout(encoded.hidden, self.output_dropout, self.training)
        halves = dropped.chunk(self.directions, dim=-1)
        return LMOutput(halves[0], halves[1] if self.bidirectional else None, encoded, dropped)

    def nll(self, states: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """``[B, T]`` negative log-likelihood (nats) of each position's target (0 where it is ``IGNORE``) given one
        direction's states (:attr:`LMOutput.forward` or ``backward``)."""
        return position_nll(self.decoder, states, targets)

    def log_probs(self, states: torch.Tensor) -> torch.Tensor:
        """``[B, T, vocab_size]`` log-probabilities of every word given one direction's states."""
        return log_probs(self.decoder, states)


def token_nll(nll: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The summed ``[B, T]`` negative log-likelihood (nats, 0 where the target is ``IGNORE``) and the number of
    positions with a target."""
    return nll.sum(), (targets != IGNORE).sum()


def activation_penalties(encoded: EncoderOutput, dropped: torch.Tensor,
                         mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """AR (mean squared output-dropped activation of the last layer) and TAR (mean squared change of the raw
    last-layer states between consecutive real tokens), averaged over real positions and units."""
    real = mask[..., None].to(dropped.dtype)
    units = dropped.size(-1)
    ar = (dropped.pow(2) * real).sum() / (real.sum() * units).clamp(min=1)
    hidden = encoded.hidden
    both = (mask[:, 1:] & mask[:, :-1])[..., None].to(hidden.dtype)
    tar = ((hidden[:, 1:] - hidden[:, :-1]).pow(2) * both).sum() / (both.sum() * units).clamp(min=1)
    return ar, tar
