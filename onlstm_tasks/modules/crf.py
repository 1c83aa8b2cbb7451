"""Linear-chain CRF: pytorch-crf's parameters, a likelihood with no time loop in Python, and a batched Viterbi that
honours scheme constraints.

Training (:meth:`CRF.nll`) is the forward algorithm over *all* tag sequences with no time loop in Python: on a GPU
(and under ``torch.compile``) :mod:`.crf_scan`'s ``ceil(log2 T)`` batched rounds, on the CPU one call of the compiled
forward-backward kernels (:mod:`.crf_cpu`), and where those were not built pytorch-crf's per-step loop, which is the
oracle both are tested against (the parameters are pytorch-crf's, so checkpoints load as before). The gold path's
score is gathers either way. Constraints only apply to decoding, where a disallowed start,
transition or end scores -inf, so an invalid sequence is never predicted whatever the emissions and learned
transitions are (as long as both are finite). Decoding runs the scan too on a GPU (:func:`.crf_scan.viterbi`),
and on the CPU the per-step loop below, which is faster there (``scripts/benchmark_crf.py``).

Shapes: emissions [B, T, K] float, tags [B, T] long, mask [B, T] bool. Masks are left-aligned (each row a run of
Trues then Falses) with at least one True per row (:func:`onlstm_tasks.encoders.base.check_mask`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torchcrf
from torch import nn

from onlstm_tasks.encoders.base import check_mask
from onlstm_tasks.modules import crf_cpu, crf_scan
from onlstm_tasks.modules.transitions import allowed_transitions


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
        partition = partition_function(emissions)
        if partition is None:  # the CPU without the compiled kernels: pytorch-crf's loop is faster there
            return -self.crf(emissions, tags.masked_fill(~mask, 0), mask=mask, reduction="mean")
        return crf_scan.nll(emissions, tags, mask, self.crf.start_transitions, self.crf.transitions,
                            self.crf.end_transitions, partition=partition)

    def decode(self, emissions: torch.Tensor, mask: torch.Tensor, pad_value: int = 0) -> torch.Tensor:
        """Best (constrained) tag sequences, [B, T] long; padded positions hold ``pad_value`` (default 0)."""
        emissions = self._check(emissions, mask)
        decoder = crf_scan.viterbi if emissions.device.type == "cuda" else viterbi_decode
        with torch.inference_mode():  # cheaper small ops; the clone below hands back an ordinary tensor
            tags, _ = decoder(emissions, mask, *self.constrained_parameters())
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


def partition_function(emissions: torch.Tensor):
    """The log-partition function :meth:`CRF.nll` uses for ``emissions``: the scan on a GPU and under
    ``torch.compile``, the compiled kernels on the CPU, or None (pytorch-crf's loop) where those were not built."""
    if emissions.device.type != "cpu" or torch.compiler.is_compiling():
        return crf_scan.log_partition
    return crf_cpu.log_partition if crf_cpu.usable(emissions) else None


@torch.no_grad()
def viterbi_decode(
    emissions: torch.Tensor,
    mask: torch.Tensor,
    start: torch.Tensor,
    transitions: torch.Tensor,
    end: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Batched Viterbi: ``(tags [B, T] long, best scores [B])``; ``mask`` must be left-aligned. No gradients.

    Loops over time only; the forward pass and the backtracking are vectorised over the batch. Scores may hold
    -inf (forbidden moves). Padded positions of ``tags`` repeat the row's last real tag; callers overwrite them.

    Speed: the forward pass keeps only the best score per tag (``amax`` is far cheaper than ``max`` with indices
    on CPU) and backtracking recomputes the argmax for the one chosen tag per row. The "from" axis is padded with
    -inf scores to a multiple of 32: ATen's CPU max-reduction is so much faster per element on such widths that
    the padded step is quicker in total (37 tags: ~20% per step on the machine of scripts/benchmark_crf.py).

    Agreement with ``torchcrf.CRF.decode``: the scores are bit-identical (``max_i((s_i + trans_ij) + e_j)`` equals
    ``max_i(s_i + trans_ij) + e_j`` in floating point because rounding is monotone) and ties go to the first index
    in both. Backtracking takes ``argmax_i(s_i + trans_ij)`` without pytorch-crf's ``+ e_j``, so the two can only
    differ where two candidates lie within one rounding step of each other and that addition rounds them to the
    same value; both paths then have the same (rounded) best score. Not seen in 300 random float32 batches of
    32 x 40 x 37 (about 370k backtracking choices); the emission add would cost ~15% of the decoding time.
    """
    batch, steps, num_tags = emissions.shape
    width = -(-num_tags // 32) * 32
    lengths = mask.sum(dim=1)  # [B]
    # per-step views made once (indexing inside the loops costs as much as the small ops themselves)
    emission_at = emissions.transpose(0, 1).contiguous().unbind(0)  # T x [B, K]
    # scores[t, b, 0, i]: best score of a path over tokens 0..t ending in tag i (-inf for padding tags i >= K).
    # Rows are not frozen past their end: those values are never read, and real steps only read real steps.
    scores = emissions.new_full((steps, batch, 1, width), float("-inf"))
    score_row_at = scores.unbind(0)  # T x [B, 1, W]: the forward pass reads these
    score_at = scores[:, :, 0, :num_tags].unbind(0)  # T x [B, K]: the forward pass writes, backtracking reads
    # transitions_to[j, i] = transitions[i, j] (score of i -> j); padding columns are 0 (their scores are -inf)
    transitions_to = transitions.new_zeros((num_tags, width))
    transitions_to[:, :num_tags] = transitions.t()

    torch.add(start, emission_at[0], out=score_at[0])
    for t in range(1, steps):
        # [B, 1, W(from)] + [K(to), W(from)] -> max over "from" -> [B, K(to)], then + emission of "to"
        best = torch.add(score_row_at[t - 1], transitions_to).amax(dim=2)
        torch.add(best, emission_at[t], out=score_at[t])
    shortest = int(lengths.min()) if batch else steps
    if shortest == steps:
        last = score_at[steps - 1]
    else:
        last = scores[lengths - 1, torch.arange(batch, device=emissions.device), 0, :num_tags]

    # backtracking writes each step's tags straight into its row of path [T, B]
    path = emissions.new_empty((steps, batch), dtype=torch.long)
    tag_at = path.unbind(0)
    best_score, _ = torch.max(last + end, dim=1, out=(emissions.new_empty(batch), tag_at[steps - 1]))
    transitions_to = transitions.t().contiguous()  # [K(to), K(from)], unpadded
    real_at = mask.t().unbind(0) if shortest < steps else None  # T x [B]
    for t in range(steps - 1, 0, -1):
        # best predecessor of the current tag j: argmax_i (scores[t-1, b, i] + trans[i, j])
        candidates = torch.add(score_at[t - 1], transitions_to.index_select(0, tag_at[t]))
        if t < shortest:
            torch.argmax(candidates, dim=1, out=tag_at[t - 1])
        else:  # past a row's end, carry its last real tag back (every row is real before the shortest length)
            torch.where(real_at[t], candidates.argmax(dim=1), tag_at[t], out=tag_at[t - 1])
    tags = path.t().contiguous()  # [B, T]
    return tags, best_score
