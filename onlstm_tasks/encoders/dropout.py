"""Dropout variants used by recurrent encoders (AWD-LSTM style)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from . import fused_step


def locked_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Variational dropout: one mask per sequence, shared over time. ``x`` is [B, T, D]."""
    if not training or p == 0.0:
        return x
    keep = x.new_empty(x.size(0), 1, x.size(2)).bernoulli_(1.0 - p) / (1.0 - p)
    return x * keep


def drop_connect(weights: Sequence[torch.Tensor], p: float, training: bool) -> list[torch.Tensor]:
    """DropConnect on weight matrices: one independent mask per matrix and call (so per forward pass), inverted
    scaling.

    In training, each entry is zeroed with probability ``p`` (rounded to a multiple of 2^-15, see
    :func:`keep_threshold`) and the rest scaled by the inverse of the keep probability; in eval the weights are used
    as they are. (The ON-LSTM authors do not rescale in training and multiply by ``1 - p`` in eval: the same model up
    to the factor ``1 - p`` on the weight, which :meth:`ONLSTM.load_reference_state_dict` applies.)

    The masks come from :func:`random_lanes` (torch's generator: ``torch.manual_seed`` reproduces them) and are
    applied by one of two back ends, which give the same result for the same random state:

    - float32 on the CPU with the compiled library built (:mod:`.fused_step`): one pass per matrix reads its lanes
      and writes the masked weights, and the backward reads the same lanes to mask the gradient; no mask is
      materialised. At NER shapes this is a third of the time of the PyTorch operations below, forward and backward
      (``scripts/benchmark_dropconnect.py``);
    - elsewhere (CUDA, other dtypes, no compiler): a boolean mask from :func:`keep_masks`, applied as ``w * kept``
      scaled in place, so no float mask is materialised.
    """
    weights = list(weights)
    if not training or p == 0.0 or not weights:
        return weights
    threshold, scale = keep_threshold(1.0 - p)
    sizes = [w.numel() for w in weights]
    if all(fused_step.usable(w) for w in weights):
        lanes = random_lanes(sum(sizes), weights[0].device).split(sizes)
        return [_CompiledDropConnect.apply(w, lane, threshold, scale) for w, lane in zip(weights, lanes)]
    kept, scale = keep_masks(sum(sizes), 1.0 - p, weights[0].device)
    # the product is not saved for the backward, so scaling it in place is safe (and saves a float mask)
    return [(w * mask.view_as(w)).mul_(scale) for w, mask in zip(weights, kept.split(sizes))]


def keep_threshold(keep: float) -> tuple[int, float]:
    """``(threshold, scale)`` of a keep probability at 15-bit resolution: an entry is kept when a uniform 15-bit
    integer is below ``threshold = round(keep * 2^15)`` (so the keep probability is rounded to a multiple of
    2^-15, at most 1.5e-5 off: ``dropconnect: 0.3`` keeps 0.700012 of the weights), and kept entries are scaled by
    ``scale = 2^15 / threshold``, the inverse of the rounded probability, which keeps the mask's mean exactly 1."""
    threshold = round(keep * 2**15)
    if threshold <= 0:
        raise ValueError(f"keep probability {keep} rounds to 0 at 15-bit resolution")
    return threshold, 2**15 / threshold


def random_lanes(n: int, device: torch.device | str | None = None) -> torch.Tensor:
    """``n`` int16 values whose low 15 bits are uniform and independent: the four 16-bit lanes of each word of
    ``random_`` on int64 (uniform on [0, 2^63), so the top lane's sign bit is always 0). A quarter of the random
    words of ``torch.rand``, which is most of a mask's cost on CPU."""
    return torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_().view(torch.int16)[:n]


def keep_masks(n: int, keep: float, device: torch.device | str | None = None) -> tuple[torch.Tensor, float]:
    """An inverted-dropout mask of ``n`` independent entries as ``(kept, scale)`` with PyTorch operations: ``kept``
    [n] is True when the low 15 bits of :func:`random_lanes` are below ``keep_threshold(keep)``, so with probability
    ``keep`` rounded to 2^-15; the mask is ``kept * scale``. About 2.5x faster on CPU than thresholding
    ``torch.rand`` (0.40 vs 1.0 ms for one 1088 x 256 matrix).
    """
    threshold, scale = keep_threshold(keep)
    return random_lanes(n, device).bitwise_and_(0x7FFF) < threshold, scale


class _CompiledDropConnect(torch.autograd.Function):
    """``(weight, lanes, threshold, scale) -> weight * mask`` in one compiled pass (:func:`.fused_step.drop_connect`);
    the backward masks the gradient with the same lanes."""

    @staticmethod
    def forward(ctx, weight, lanes, threshold, scale):
        ctx.save_for_backward(lanes)
        ctx.mask_args = (threshold, scale)
        return fused_step.drop_connect(weight, lanes, threshold, scale)

    @staticmethod
    def backward(ctx, grad):
        (lanes,) = ctx.saved_tensors
        return fused_step.drop_connect(grad, lanes, *ctx.mask_args), None, None, None


def check_probability(name: str, p: float) -> None:
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {p}")
