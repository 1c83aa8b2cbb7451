"""The CRF's per-step loops: the batched Viterbi below (the CPU's decoder) and, for the likelihood, pytorch-crf's
own forward algorithm (the oracle, called by :meth:`~.layer.CRF.nll` where no faster path runs)."""

from __future__ import annotations

import torch


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
