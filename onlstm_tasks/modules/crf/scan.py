"""A linear-chain CRF with no time loop in Python: the log-partition, the gold path's score and Viterbi as a few
batched tensor operations each, whatever the length (pure functions; :class:`~onlstm_tasks.modules.crf.CRF` holds
the parameters). One scan, parameterised by its semiring (:class:`Semiring`: the log semiring for the partition
function, max-plus for Viterbi), serves both (torch-struct's idea): :func:`scan` reduces a chain of transfer
matrices to their product, or with ``prefixes`` to every prefix product.

- :func:`log_partition`: the forward algorithm as a product of the steps' transfer matrices in the log semiring,
  ``alpha_0 (x) M_1 (x) ... (x) M_{T-1}``, reduced pairwise in ``ceil(log2 T)`` rounds (torch-struct's linear-chain
  idea). Each round is one batched matrix product in exponent space, each matrix shifted by its rows' and
  columns' maxima first, and computed in float64 (autocast off), so no entry that matters underflows. Autograd
  gives the gradient (the marginals) through the same rounds.
- :func:`path_score`: the gold path's score as gathers and one sum.
- :func:`viterbi`: the best scores of every prefix by a Hillis-Steele scan in the max-plus semiring
  (``ceil(log2 T)`` rounds, ``O(T log T K^3)`` work: cheap on a GPU, where a per-step loop is launch-bound), the
  back-pointers of every step in one ``argmax``, and the backtrace by pointer jumping (composing the
  back-pointer maps in ``ceil(log2 T)`` gathers): the result stays on the device, a tensor.

Padded steps (``mask`` false) are the semiring's identity matrix, so a row's product ends at its last real token
and its back-pointers there map each tag to itself. Shapes: emissions [B, T, K], mask [B, T] bool (left-aligned,
every row with a token), start and end [K], transitions [K, K] (from i to j).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import torch

WORK_DTYPE = torch.float64


class Semiring(NamedTuple):
    """A semiring of the scan: ``matmul`` its matrix product over the last two axes, ``zero`` the value of its
    identity matrix off the diagonal for ``dtype`` (its diagonal is 0, the semiring's one)."""

    matmul: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    zero: Callable[[torch.dtype], float]


def scan(matrices: torch.Tensor, semiring: Semiring, prefixes: bool = False) -> torch.Tensor:
    """The semiring product of a chain of matrices [B, T, K, K] along T: with ``prefixes`` every prefix product
    (Hillis-Steele, ``ceil(log2 T)`` rounds, [B, T, K, K]), else only the whole product, reduced pairwise
    (``ceil(log2 T)`` rounds of half as many products each, [B, K, K]: the partition function needs no prefix, and
    its gradient flows back through T - 1 products instead of T log T)."""
    steps = matrices.size(1)
    if prefixes:
        shift = 1
        while shift < steps:  # prefix[t] = prefix[t - shift] (x) prefix[t]
            matrices = torch.cat((matrices[:, :shift], semiring.matmul(matrices[:, :-shift], matrices[:, shift:])),
                                 dim=1)
            shift *= 2
        return matrices
    matrices = _pad_to_power_of_two(matrices, semiring.zero(matrices.dtype))
    while matrices.size(1) > 1:
        matrices = semiring.matmul(matrices[:, 0::2], matrices[:, 1::2])
    return matrices[:, 0]


def _transfer_matrices(emissions: torch.Tensor, mask: torch.Tensor, start: torch.Tensor,
                       transitions: torch.Tensor, identity_off: float) -> torch.Tensor:
    """[B, T, K, K]: step 0 the row vector ``start + e_0`` repeated on every row, step t >= 1 ``trans[i, j] + e_t[j]``,
    padded steps the identity (0 on the diagonal, ``identity_off`` elsewhere)."""
    batch, steps, tags = emissions.shape
    first = (start + emissions[:, 0])[:, None, None, :].expand(batch, 1, tags, tags)
    rest = transitions + emissions[:, 1:, None, :]  # [B, T-1, K, K]
    identity = torch.full((tags, tags), identity_off, dtype=emissions.dtype, device=emissions.device)
    identity.fill_diagonal_(0.0)
    rest = torch.where(mask[:, 1:, None, None], rest, identity)
    return torch.cat((first, rest), dim=1)


def _pad_to_power_of_two(matrices: torch.Tensor, identity_off: float) -> torch.Tensor:
    steps, tags = matrices.size(1), matrices.size(-1)
    padded = 1 << max(steps - 1, 0).bit_length()
    if padded == steps:
        return matrices
    identity = torch.full((tags, tags), identity_off, dtype=matrices.dtype, device=matrices.device)
    identity.fill_diagonal_(0.0)
    return torch.cat((matrices, identity.expand(matrices.size(0), padded - steps, tags, tags)), dim=1)


def log_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``log(exp(a) @ exp(b))`` over the last two axes, as one matrix product of shifted exponentials."""
    shift_a = a.detach().amax(-1, keepdim=True).clamp_min(-1e30)  # [.., K, 1] (a row of -inf shifts by a finite)
    shift_b = b.detach().amax(-2, keepdim=True).clamp_min(-1e30)  # [.., 1, K]
    product = torch.matmul((a - shift_a).exp(), (b - shift_b).exp())
    return product.clamp_min(torch.finfo(product.dtype).tiny).log() + shift_a + shift_b


def log_partition(emissions: torch.Tensor, mask: torch.Tensor, start: torch.Tensor, transitions: torch.Tensor,
                  end: torch.Tensor) -> torch.Tensor:
    """log Z per sentence, [B] (in emissions' dtype), differentiable in every argument but ``mask``."""
    dtype = emissions.dtype
    with torch.autocast(emissions.device.type, enabled=False):
        e, s, tr, en = (t.to(WORK_DTYPE) for t in (emissions, start, transitions, end))
        product = scan(_transfer_matrices(e, mask, s, tr, LOG.zero(e.dtype)), LOG)
        alpha = product[:, 0]  # [B, K]: every row of the product is the forward vector after the last step
        return torch.logsumexp(alpha + en, dim=-1).to(dtype)


def path_score(emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor, start: torch.Tensor,
               transitions: torch.Tensor, end: torch.Tensor) -> torch.Tensor:
    """The unnormalised score of each row's tag sequence ``tags`` [B, T] (any value at padded positions), [B]."""
    tags = tags.masked_fill(~mask, 0)
    keep = mask.to(emissions.dtype)
    emitted = emissions.gather(-1, tags.unsqueeze(-1)).squeeze(-1)  # [B, T]
    moves = transitions[tags[:, :-1], tags[:, 1:]] * keep[:, 1:]  # [B, T-1]
    last = tags.gather(1, (mask.sum(1, keepdim=True) - 1))  # [B, 1]
    return start[tags[:, 0]] + (emitted * keep).sum(1) + moves.sum(1) + end[last[:, 0]]


def nll(emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor, start: torch.Tensor,
        transitions: torch.Tensor, end: torch.Tensor, partition=None) -> torch.Tensor:
    """Mean negative log-likelihood of ``tags`` over the batch (a scalar); ``partition``: the log-partition function
    (default :func:`log_partition`; on the CPU :func:`.compiled.log_partition` computes the same)."""
    log_z = (partition or log_partition)(emissions, mask, start, transitions, end)
    return (log_z - path_score(emissions, tags, mask, start, transitions, end)).mean()


def _max_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Max-plus product over the last two axes: ``max_k a[.., i, k] + b[.., k, j]``."""
    return (a.unsqueeze(-1) + b.unsqueeze(-3)).amax(-2)


LOG = Semiring(log_matmul, lambda dtype: float("-inf"))
# max-plus: a finite stand-in for -inf off the identity's diagonal, so that amax stays NaN-free
MAX_PLUS = Semiring(_max_matmul, lambda dtype: torch.finfo(dtype).min)


@torch.no_grad()
def viterbi(emissions: torch.Tensor, mask: torch.Tensor, start: torch.Tensor, transitions: torch.Tensor,
            end: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Best tag sequences ``(tags [B, T] long, best scores [B])``; padded positions repeat the row's last tag.
    Scores may hold -inf (forbidden moves); ties go to the lowest tag index."""
    batch, steps, tags = emissions.shape
    dtype = emissions.dtype
    prefix = scan(_transfer_matrices(emissions, mask, start, transitions, MAX_PLUS.zero(dtype)), MAX_PLUS,
                  prefixes=True)  # [B, T, K, K]
    alpha = prefix[:, :, 0]  # [B, T, K]: best score of a path over tokens 0..t ending in each tag
    final = alpha[:, -1] + end  # padded steps are identities: alpha[:, -1] is each row's last real step
    best, last = final.max(-1)
    # back-pointers: step t's tag j came from argmax_i alpha[t-1, i] + trans[i, j]; padded steps point to j itself
    pointers = (alpha[:, :-1, :, None] + transitions).argmax(-2)  # [B, T-1, K]
    same = torch.arange(tags, device=emissions.device).expand(batch, steps, tags)
    pointers = torch.where(mask[:, 1:, None], pointers, same[:, 1:])
    # back[t] maps the tag at step T-1 to the tag at step t: back[T-1] = id, back[t] = back[t+1] then pointers[t]
    back = torch.cat((pointers, same[:, :1]), dim=1)  # back[t] (t < T-1) holds pointers of step t+1 for now
    shift = 1
    while shift < steps:  # suffix composition: back[t] = back[t] o back[t + shift]
        back = torch.cat((back[:, :-shift].gather(-1, back[:, shift:]), back[:, -shift:]), dim=1)
        shift *= 2
    path = back.gather(-1, last[:, None, None].expand(batch, steps, 1)).squeeze(-1)
    return path, best
