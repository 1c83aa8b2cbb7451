"""Linear-chain CRF: pytorch-crf's parameters, a likelihood with no time loop in Python, and a batched Viterbi that
honours scheme constraints. Which implementation computes the likelihood and the Viterbi path is the one choice of
:func:`.paths.choose`, from one table of paths.

Training (:meth:`CRF.nll`) is the forward algorithm over *all* tag sequences with no time loop in Python: on a GPU
two Triton launches (:mod:`.triton_path`, one program per sentence), under ``torch.compile`` (and on a GPU without
Triton) :mod:`.scan`'s ``ceil(log2 T)`` batched rounds, on the CPU one call of the compiled forward-backward kernels
(:mod:`.compiled`), and where those were not built pytorch-crf's per-step loop, which is the oracle all are tested
against (the parameters are pytorch-crf's, so checkpoints load as before). The gold path's
score is gathers either way. Constraints only apply to decoding, where a disallowed start,
transition or end scores -inf, so an invalid sequence is never predicted whatever the emissions and learned
transitions are (as long as both are finite). Decoding runs the scan too on a GPU (:func:`.scan.viterbi`),
and on the CPU the per-step loop of :mod:`.loop`, which is faster there (``scripts/benchmark_crf.py``).

Shapes: emissions [B, T, K] float, tags [B, T] long, mask [B, T] bool. Masks are left-aligned (each row a run of
Trues then Falses) with at least one True per row (:func:`onlstm_tasks.encoders.base.check_mask`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torchcrf
from torch import nn

from onlstm_tasks.encoders.base import check_mask
from onlstm_tasks.modules.transitions import allowed_transitions

from . import paths, scan


class CRF(nn.Module):
    """CRF over ``num_tags`` tags; with ``labels`` and ``scheme`` ("iob2" | "iobes") decoding is constrained.

    The learned parameters are pytorch-crf's ``start_transitions`` [K], ``transitions`` [K, K] (from i to j) and
    ``end_transitions`` [K]. The constraint masks are non-persistent buffers (rebuilt from the constructor
    arguments, so checkpoints hold only the parameters).
    """

    def __init__(self, num_tags: int, labels: Sequence[str] | None = None, scheme: str | None = None) -> None:
        super().__init__()
        self.crf = torchcrf.CRF(num_tags, batch_first=True)
        self.num_tags = num_tags
        if (labels is None) != (scheme is None):
            raise ValueError("give both labels and scheme (constrained decoding) or neither")
        if labels is None:
            start = torch.ones(num_tags, dtype=torch.bool)
            allowed = torch.ones(num_tags, num_tags, dtype=torch.bool)
            end = torch.ones(num_tags, dtype=torch.bool)
        else:
            if len(labels) != num_tags:
                raise ValueError(f"got {len(labels)} labels for num_tags={num_tags}")
            start, allowed, end = (torch.tensor(m, dtype=torch.bool) for m in allowed_transitions(scheme, labels))
            # a tag that may start, end and follow itself makes every length decodable
            if not bool((start & end & allowed.diagonal()).any()):
                raise ValueError(f"labels {list(labels)} allow no valid {scheme} sequence of every length "
                                 "(add 'O')")
        self.labels = None if labels is None else list(labels)
        self.scheme = scheme
        self.register_buffer("allowed_start", start, persistent=False)
        self.register_buffer("allowed", allowed, persistent=False)
        self.register_buffer("allowed_end", end, persistent=False)

    @property
    def constrained(self) -> bool:
        return self.labels is not None

    def extra_repr(self) -> str:
        return f"num_tags={self.num_tags}, scheme={self.scheme}"

    def nll(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Mean negative log-likelihood over the batch's sentences (a scalar); no host read, no time loop.

        Tags at padded positions may hold anything (e.g. -100): they are never read.
        """
        emissions = self._check(emissions, mask)
        if tags.shape != mask.shape:
            raise ValueError(f"tags must have shape {tuple(mask.shape)}, got {tuple(tags.shape)}")
        path = paths.choose(emissions)
        if path.log_partition is None:  # pytorch-crf's own likelihood (the oracle)
            return -self.crf(emissions, tags.masked_fill(~mask, 0), mask=mask, reduction="mean")
        return scan.nll(emissions, tags, mask, self.crf.start_transitions, self.crf.transitions,
                        self.crf.end_transitions, partition=path.log_partition)

    def decode(self, emissions: torch.Tensor, mask: torch.Tensor, pad_value: int = 0) -> torch.Tensor:
        """Best (constrained) tag sequences, [B, T] long; padded positions hold ``pad_value`` (default 0)."""
        emissions = self._check(emissions, mask)
        with torch.inference_mode():  # cheaper small ops; the clone below hands back an ordinary tensor
            tags, _ = paths.choose(emissions).viterbi(emissions, mask, *self.constrained_parameters())
            tags.masked_fill_(~mask, pad_value)
        return tags.clone()

    def constrained_parameters(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(start [K], transitions [K, K], end [K])`` with -inf wherever the scheme forbids the move."""
        params = (self.crf.start_transitions, self.crf.transitions, self.crf.end_transitions)
        if not self.constrained:
            return params
        allowed = (self.allowed_start, self.allowed, self.allowed_end)
        return tuple(p.masked_fill(~a, float("-inf")) for p, a in zip(params, allowed))

    def _check(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if emissions.dim() != 3 or emissions.size(-1) != self.num_tags:
            raise ValueError(f"emissions must be [batch, time, {self.num_tags}], got {tuple(emissions.shape)}")
        check_mask(mask, emissions.shape[:2])
        return emissions.to(self.crf.transitions.dtype)
