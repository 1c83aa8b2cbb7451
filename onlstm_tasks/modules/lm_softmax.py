"""The output layer of a language model: a full softmax over the vocabulary or an adaptive one.

* ``full``: ``nn.Linear(width, vocab_size)``, logits for every word at every position (the cost of a large
  vocabulary: ``width x vocab_size`` multiply-adds per token, forward and backward).
* ``adaptive``: :class:`torch.nn.AdaptiveLogSoftmaxWithLoss` (Grave et al., 2017): a head over the ``cutoffs[0]``
  most frequent word ids plus one entry per tail cluster; the words of cluster ``i`` (ids ``cutoffs[i]`` ..
  ``cutoffs[i+1] - 1``) are scored from a projection of width ``width / div_value ** (i + 1)``, only for the
  positions whose target lies in that cluster. It relies on word ids in order of decreasing frequency, which is
  how :func:`~onlstm_tasks.data.lm.build_lm_vocabulary` numbers them (after ``<pad>``, ``<unk>``, ``<eos>``).

Both are scored through the same two functions: :func:`position_nll` (negative log-likelihood of each position's
target, what training, perplexity and ``predict`` records use) and :func:`log_probs` (the whole distribution).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from onlstm_tasks.data.core.batching import IGNORE

SOFTMAXES = ("full", "adaptive")
DEFAULT_CUTOFFS = (2000, 10000)


def check_softmax(softmax: str, cutoffs: Sequence[int] | None, div_value: float, tie_weights: bool) -> None:
    """Checks what a config can get wrong before the vocabulary is known; raises ``ValueError`` naming the key."""
    if softmax not in SOFTMAXES:
        raise ValueError(f"softmax must be one of {SOFTMAXES}, got {softmax!r}")
    if softmax == "adaptive" and tie_weights:
        raise ValueError("tie_weights needs softmax: full (the adaptive softmax scores its tail clusters through "
                         "their own projections, not the word vectors); set tie_weights: false")
    if cutoffs is not None:
        cuts = list(cutoffs)
        if not cuts or any(not isinstance(c, int) or c < 1 for c in cuts) or cuts != sorted(set(cuts)):
            raise ValueError(f"adaptive_cutoffs must be increasing positive word counts, got {cutoffs}")
    if not div_value > 0:
        raise ValueError(f"div_value must be positive, got {div_value}")


def adaptive_softmax(width: int, vocab_size: int, cutoffs: Sequence[int] | None = None,
                     div_value: float = 4.0) -> nn.AdaptiveLogSoftmaxWithLoss:
    """The adaptive softmax over ``vocab_size`` ids; ``cutoffs`` default to :data:`DEFAULT_CUTOFFS` (those below
    the vocabulary size). Raises ``ValueError`` when a cutoff does not leave words for every cluster."""
    if cutoffs is None:
        cutoffs = [c for c in DEFAULT_CUTOFFS if c < vocab_size - 1]
        if not cutoffs:
            raise ValueError(f"a vocabulary of {vocab_size} ids is too small for the default adaptive_cutoffs "
                             f"{list(DEFAULT_CUTOFFS)}; give adaptive_cutoffs below {vocab_size - 1} or use softmax: "
                             f"full")
    cuts = list(cutoffs)
    if cuts[-1] >= vocab_size - 1:
        raise ValueError(f"adaptive_cutoffs {cuts} must stay below the vocabulary size minus one "
                         f"({vocab_size - 1}): every cluster needs words")
    return nn.AdaptiveLogSoftmaxWithLoss(width, vocab_size, cuts, div_value=div_value)


def position_nll(decoder: nn.Module, states: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``[B, T]`` negative log-likelihood (nats) of each position's target word given its ``[B, T, width]`` state;
    0 where the target is ``IGNORE``."""
    if isinstance(decoder, nn.AdaptiveLogSoftmaxWithLoss):
        nll = states.new_zeros(targets.shape)
        real = targets != IGNORE
        if real.any():
            nll[real] = -decoder(states[real], targets[real]).output
        return nll
    return F.cross_entropy(decoder(states).transpose(1, 2), targets, ignore_index=IGNORE, reduction="none")


def log_probs(decoder: nn.Module, states: torch.Tensor) -> torch.Tensor:
    """``[..., vocab_size]`` log-probabilities of every word given each ``[..., width]`` state."""
    if isinstance(decoder, nn.AdaptiveLogSoftmaxWithLoss):
        flat = decoder.log_prob(states.reshape(-1, states.size(-1)))
        return flat.view(*states.shape[:-1], flat.size(-1))
    return F.log_softmax(decoder(states), dim=-1)
