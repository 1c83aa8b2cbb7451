"""DropConnect on weight matrices (AWD-LSTM style), for the ON-LSTM and the library LSTM/GRU: the masks' random
lanes and the two ways to apply them (the compiled kernels of :mod:`onlstm_tasks.native.onlstm`, or PyTorch
operations)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from onlstm_tasks import native
from onlstm_tasks.native import onlstm as kernels


def drop_connect(weights: Sequence[torch.Tensor], p: float, training: bool, native_ops: bool = True) -> list[torch.Tensor]:
    """DropConnect on weight matrices: one independent mask per matrix and call (so per forward pass), inverted
    scaling.

    In training, each entry is zeroed with probability ``p`` (rounded to a multiple of 2^-15, see
    :func:`keep_threshold`) and the rest scaled by the inverse of the keep probability; in eval the weights are used
    as they are. (The ON-LSTM authors do not rescale in training and multiply by ``1 - p`` in eval: the same model up
    to the factor ``1 - p`` on the weight, which :meth:`ONLSTM.load_reference_state_dict` applies.)

    The masks are drawn as :func:`random_lanes` (``torch.manual_seed`` reproduces them) and
    applied by one of two back ends, which give bit-identical results from the same lanes:

    - float32 on the CPU with the compiled kernels built (:mod:`onlstm_tasks.native`) and ``native_ops`` (the
      ON-LSTM passes its back end's :func:`~onlstm_tasks.encoders.onlstm.registry.allows_native_ops`), outside
      ``torch.compile``: one pass per matrix reads its lanes
      and writes the masked weights, and the backward reads the same lanes to mask the gradient: no mask is
      materialised. With the lanes' generator, forward plus backward take a third (one thread) to a half (two
      threads) of the time of the PyTorch path (``scripts/benchmark_encoders.py --dropconnect-only`` prints both);
    - elsewhere (CUDA, other dtypes, no compiler): ``w * kept`` scaled in place, ``kept`` the boolean mask.
    """
    weights = list(weights)
    if not training or p == 0.0 or not weights:
        return weights
    threshold, scale = keep_threshold(1.0 - p)
    sizes = [w.numel() for w in weights]
    compiled = native_ops and not torch.compiler.is_compiling() and all(native.usable(w) for w in weights)
    lanes = random_lanes(sum(sizes), weights[0].device, compiled).split(sizes)
    apply = _CompiledDropConnect.apply if compiled else _masked
    return [apply(w, lane, threshold, scale) for w, lane in zip(weights, lanes)]


def _masked(weight: torch.Tensor, lanes: torch.Tensor, threshold: int, scale: float) -> torch.Tensor:
    """``weight`` with the entries whose lanes' low 15 bits are below ``threshold`` scaled by ``scale``, the others
    zeroed, as PyTorch operations (differentiable)."""
    kept = (lanes & 0x7FFF) < threshold
    # the product is not saved for the backward, so scaling it in place is safe (and saves a float mask)
    return (weight * kept.view_as(weight)).mul_(scale)


def keep_threshold(keep: float) -> tuple[int, float]:
    """``(threshold, scale)`` of a keep probability at 15-bit resolution: an entry is kept when a uniform 15-bit
    integer is below ``threshold = round(keep * 2^15)`` (so the keep probability is rounded to a multiple of
    2^-15, at most 1.5e-5 off: ``dropconnect: 0.3`` keeps 0.700012 of the weights), and kept entries are scaled by
    ``scale = 2^15 / threshold``, the inverse of the rounded probability, which keeps the mask's mean exactly 1."""
    threshold = round(keep * 2**15)
    if threshold <= 0:
        raise ValueError(f"keep probability {keep} rounds to 0 at 15-bit resolution")
    return threshold, 2**15 / threshold


def random_lanes(n: int, device: torch.device | str | None = None, compiled: bool | None = None) -> torch.Tensor:
    """``n`` int16 values whose low 15 bits are uniform and independent, on ``device``, drawn from or seeded by
    torch's generator (so ``torch.manual_seed`` reproduces them).

    With ``compiled`` (None: whenever the compiled kernels can run on ``device``, :mod:`onlstm_tasks.native`): the
    two 16-bit halves of 32-bit words from sixteen xoshiro128++ generators side by side, whose 128-bit states torch's generator draws afresh at every call (64
    words): 0.04 ms for a 1088 x 256 matrix, against 0.29 ms for the words of torch's own CPU generator below (an
    mt19937), which was the largest part of DropConnect's cost. Elsewhere: the four 16-bit lanes of each word of
    ``random_`` on int64 (uniform on [0, 2^63), so the top lane's sign bit is always 0), a quarter of the random words
    of ``torch.rand``."""
    device = torch.device("cpu" if device is None else device)
    if compiled is None:
        compiled = native.usable(torch.empty(0, device=device))
    if compiled:
        state = torch.randint(-2**31, 2**31, (4 * kernels.STREAMS,), dtype=torch.int32)
        return kernels.random_words((n + 1) // 2, state).view(torch.int16)[:n]
    return torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_().view(torch.int16)[:n]


class _CompiledDropConnect(torch.autograd.Function):
    """``(weight, lanes, threshold, scale) -> weight * mask`` in one compiled pass (:func:`.kernels.masked`);
    the backward masks the gradient with the same lanes."""

    @staticmethod
    def forward(ctx, weight, lanes, threshold, scale):
        ctx.save_for_backward(lanes)
        ctx.mask_args = (threshold, scale)
        return kernels.masked(weight, lanes, threshold, scale)

    @staticmethod
    def backward(ctx, grad):
        (lanes,) = ctx.saved_tensors
        return kernels.masked(grad, lanes, *ctx.mask_args), None, None, None
