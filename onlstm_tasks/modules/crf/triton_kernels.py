"""The CRF's forward and backward algorithms as two Triton kernels, one program per sentence (imported only where
they run: :mod:`.triton_path`).

A program holds the ``[K, K]`` transitions in registers (tags padded to ``KP``, a power of two, with -inf outside)
and walks its own sentence's ``length`` steps: the forward algorithm's log-sum-exp over the previous tag, each step
one ``[KP, KP]`` tile, in float32 with the usual max shift (pytorch-crf's arithmetic). The backward walks back with the
backward algorithm and writes the marginals: the emissions' gradient of every step, and per sentence its sums of the
pairwise marginals (the transitions' gradient) and of the first and last steps' (start's and end's), which the
caller sums over the batch (no atomics: the result does not depend on the order programs run in).

Shapes (contiguous): emissions, alphas and grad_emissions [B, T, K] float32; lengths [B] int64 (>= 1); start and
end [K]; transitions [K, K] (from i to j); log_z and grad_log_z [B]; grad_transitions [B, K, K]; grad_start and
grad_end [B, K].
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _log_sum_exp(scores, axis: tl.constexpr):
    """log(sum(exp(scores))) along ``axis``; -inf where every score is -inf (no NaN)."""
    top = tl.max(scores, axis=axis)
    top = tl.where(top == float("-inf"), 0.0, top)
    shifted = scores - tl.expand_dims(top, axis)
    return top + tl.log(tl.sum(tl.exp(shifted), axis=axis))


@triton.jit(do_not_specialize=["T"])  # one build for every length
def crf_forward_kernel(emissions_ptr, lengths_ptr, start_ptr, transitions_ptr, end_ptr, alphas_ptr, log_z_ptr, T, K,
                       KP: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    tags = tl.arange(0, KP)
    real = tags < K
    moves = tl.load(transitions_ptr + tags[:, None] * K + tags[None, :], mask=real[:, None] & real[None, :],
                    other=float("-inf"))  # [from i, to j]
    length = tl.load(lengths_ptr + b)
    row = emissions_ptr + b * T * K
    saved = alphas_ptr + b * T * K
    alpha = (tl.load(start_ptr + tags, mask=real, other=float("-inf"))
             + tl.load(row + tags, mask=real, other=float("-inf")))
    tl.store(saved + tags, alpha, mask=real)
    for t in range(1, length):
        alpha = _log_sum_exp(alpha[:, None] + moves, 0) + tl.load(row + t * K + tags, mask=real, other=float("-inf"))
        tl.store(saved + t * K + tags, alpha, mask=real)
    final = alpha + tl.load(end_ptr + tags, mask=real, other=float("-inf"))
    top = tl.max(final, 0)
    top = tl.where(top == float("-inf"), 0.0, top)
    tl.store(log_z_ptr + b, top + tl.log(tl.sum(tl.exp(final - top), 0)))


@triton.jit(do_not_specialize=["T"])
def crf_backward_kernel(emissions_ptr, lengths_ptr, transitions_ptr, end_ptr, alphas_ptr, log_z_ptr, grad_log_z_ptr,
                        grad_emissions_ptr, grad_transitions_ptr, grad_start_ptr, grad_end_ptr, T, K,
                        KP: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    tags = tl.arange(0, KP)
    real = tags < K
    moves = tl.load(transitions_ptr + tags[:, None] * K + tags[None, :], mask=real[:, None] & real[None, :],
                    other=float("-inf"))
    length = tl.load(lengths_ptr + b)
    total = tl.load(log_z_ptr + b)
    weight = tl.load(grad_log_z_ptr + b)
    row = emissions_ptr + b * T * K
    saved = alphas_ptr + b * T * K
    grads = grad_emissions_ptr + b * T * K
    last = length - 1
    beta = tl.load(end_ptr + tags, mask=real, other=float("-inf"))  # beta of step t over its tags (j)
    alpha = tl.load(saved + last * K + tags, mask=real, other=float("-inf"))
    unary = tl.exp(alpha + beta - total)
    tl.store(grad_end_ptr + b * K + tags, weight * unary, mask=real)
    tl.store(grads + last * K + tags, weight * unary, mask=real)
    pairs = tl.zeros((KP, KP), dtype=tl.float32)
    for back in range(0, last):
        t = last - back
        arriving = tl.load(row + t * K + tags, mask=real, other=float("-inf")) + beta  # [j]
        previous = tl.load(saved + (t - 1) * K + tags, mask=real, other=float("-inf"))  # alpha of step t-1 [i]
        through = moves + arriving[None, :]  # [i, j]
        pairs += weight * tl.exp(previous[:, None] + through - total)
        beta = _log_sum_exp(through, 1)  # beta of step t-1 over its tags (i)
        unary = tl.exp(previous + beta - total)
        tl.store(grads + (t - 1) * K + tags, weight * unary, mask=real)
    tl.store(grad_start_ptr + b * K + tags, weight * unary, mask=real)
    tl.store(grad_transitions_ptr + b * K * K + tags[:, None] * K + tags[None, :], pairs,
             mask=real[:, None] & real[None, :])
