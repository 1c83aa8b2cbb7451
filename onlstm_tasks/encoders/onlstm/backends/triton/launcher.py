"""The ``triton`` back end of the ON-LSTM layer: the time loop of a layer's pass in Triton kernels that split each
step over many programs (:mod:`.kernels`; how a pass is split and launched: :func:`plan`, :func:`_launch`),
forward and backward, in the batch's own layout (no sorting by length, no host read).

Before the loop, the input projection of every step and direction is one batched GEMM; after the backward loop,
the gradients of ``W_ih``, ``W_hh``, the bias and ``x`` are GEMMs and one reduction over the saved
``dL/d(pre-activations)``. Runs on CUDA tensors, and on CPU tensors under Triton's interpreter
(``TRITON_INTERPRET=1`` when Triton is first imported, for tests). float32 only: the kernels accumulate in float32,
and the layer's inputs come in the weights' dtype (bf16 activations under autocast are cast up by
:func:`onlstm_tasks.encoders.onlstm.layer_op.run_layer`). On a GPU the recurrent products use TF32 where PyTorch's switch for recurrent layers
allows it (:func:`recurrent_tf32`, the one cuDNN's LSTM follows), full float32 otherwise.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from ...tuning import BLOCK_K, LEVEL_VALUES_PER_WARP, MAX_NEURONS, MAX_ROWS, MIN_NEURONS, STAGES


def interpreted() -> bool:
    """Whether Triton built the kernels for its interpreter (``TRITON_INTERPRET=1`` when they were first imported),
    which runs them on CPU tensors."""
    from triton.runtime.interpreter import InterpretedFunction

    from .kernels import onlstm_forward_kernel

    return isinstance(onlstm_forward_kernel, InterpretedFunction)


def why_not(x: Tensor) -> str | None:
    """Why the Triton kernels cannot run on ``x``, or None where they can."""
    if x.dtype != torch.float32:
        return f"the Triton kernels run in float32, not {x.dtype}"
    if x.device.type not in ("cuda", "cpu"):
        return f"the Triton kernels run on CUDA devices, not {x.device.type}"
    try:
        import triton  # noqa: F401
    except ImportError:
        return "Triton is not installed (pip install triton)"
    if x.device.type == "cpu" and not interpreted():
        return "Triton runs on CPU tensors only in its interpreter (TRITON_INTERPRET=1, for tests)"
    return None


class TritonSaved(NamedTuple):
    """What the backward reads besides the layer's inputs and outputs, in the batch's layout."""

    acts: Tensor  # [K, B, T, G]: every step's pre-activations
    cells: Tensor  # [K, B, T + 1, H]: c_{-1}, c_0, ... by step (index t + 1 after step t)


class TritonBackend:
    name = "triton"
    Saved = TritonSaved

    @staticmethod
    def why_not(x: Tensor) -> str | None:
        return why_not(x)

    @staticmethod
    def saved_shapes(x: Tensor, weight_hh: Tensor) -> list[tuple]:
        batch, steps, _ = x.shape
        dirs, gates, hidden = weight_hh.shape
        return [(dirs, batch, steps, gates), (dirs, batch, steps + 1, hidden)]

    @staticmethod
    def forward(layer, save: bool):
        return _forward(*layer, save)

    @staticmethod
    def backward(layer, h: Tensor, saved: TritonSaved, grads):
        return _backward(layer, h, saved, grads)


def _sizes(weight_hh: Tensor) -> tuple[int, int, int, int, int]:
    dirs, gates, hidden = weight_hh.shape
    levels = (gates - 4 * hidden) // 2
    return dirs, gates, hidden, levels, hidden // levels


def recurrent_tf32() -> bool:
    """Whether the recurrent products may use TF32, by PyTorch's switch for recurrent layers (cuDNN's LSTM follows
    the same one: ``torch.backends.cudnn.rnn.fp32_precision``, default ``"tf32"``; before PyTorch 2.9,
    ``torch.backends.cudnn.allow_tf32``, default True). Never in the interpreter (plain float32)."""
    if interpreted():
        return False
    rnn = getattr(torch.backends.cudnn, "rnn", None)
    precision = getattr(rnn, "fp32_precision", None)
    if precision is not None and precision != "none":
        return precision == "tf32"
    return bool(torch.backends.cudnn.allow_tf32)


class Plan(NamedTuple):
    """How a layer's pass is split: the kernels' compile-time constants, the grid, and whether one persistent
    launch runs every step (else one launch per half-step)."""

    constants: dict
    grid: tuple[int, int, int]
    persistent: bool
    options: dict  # num_warps, num_stages


def resident_programs(device: torch.device) -> int:
    """How many programs of the kernels can be resident at once: one per multiprocessor on a GPU (0 in the
    interpreter, which runs programs one after another)."""
    if device.type != "cuda":
        return 0
    return torch.cuda.get_device_properties(device).multi_processor_count


def plan(batch: int, hidden: int, levels: int, dirs: int, symmetric: bool, resident: int,
         neurons: int | None = None) -> Plan:
    """The split of a pass of ``batch`` rows: all rows (up to :data:`MAX_ROWS`) in one tile, and the fewest neurons
    per program (whole levels, at least :data:`MIN_NEURONS`) whose grid is resident at once (``resident``
    programs); a persistent launch where it is (``resident`` 0: never). ``neurons`` fixes the neurons per program."""
    chunk = hidden // levels
    padded_chunk = triton_next_power_of_2(chunk)
    padded_levels = max(16, triton_next_power_of_2(levels))
    warps = 4 if padded_levels <= 32 else 8
    rows_cap = max(16, warps * LEVEL_VALUES_PER_WARP // padded_levels)
    rows = min(MAX_ROWS, rows_cap, max(16, triton_next_power_of_2(batch)))
    tiles = triton_cdiv(batch, rows)
    block = max(1, (neurons or MIN_NEURONS) // padded_chunk)  # levels per program
    while neurons is None and dirs * triton_cdiv(levels, block) * tiles > resident > 0 \
            and 2 * block * padded_chunk <= MAX_NEURONS:
        block *= 2
    grid = (dirs, triton_cdiv(levels, block), tiles)
    constants = dict(H=hidden, L=levels, C=chunk, K=dirs, SYMMETRIC=symmetric, BB=rows, BK=BLOCK_K,
                     BN=block * padded_chunk, LB=block, LAP=max(16, triton_next_power_of_2(block)),
                     LP=padded_levels, CP=padded_chunk, PRECISION="tf32" if recurrent_tf32() else "ieee")
    persistent = 0 < grid[0] * grid[1] * grid[2] <= resident
    return Plan(constants | {"PERSISTENT": persistent}, grid, persistent, dict(num_warps=warps, num_stages=STAGES))


def gpu_plan(hidden: int, levels: int, dirs: int, symmetric: bool, batch: int = 32) -> Plan:
    """The plan of a launch at these sizes on a GPU of 132 multiprocessors (an H100 or H200), for
    scripts/compile_triton_kernels.py."""
    return plan(batch, hidden, levels, dirs, symmetric, resident=132)


def triton_next_power_of_2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def full_rows(lengths: Tensor, steps: int) -> Tensor:
    """1.0 where every row has all ``steps`` steps, else 0.0 (a 0-d tensor: no host read)."""
    return (lengths == steps).all().to(torch.float32)


def _forward(x: Tensor, lengths: Tensor, weight_ih: Tensor, bias: Tensor, weight_hh: Tensor, h0: Tensor | None,
             c0: Tensor | None, symmetric: bool, save: bool) -> tuple[Tensor, Tensor, Tensor, Tensor, TritonSaved | None]:
    """``(h [B, T, K H], forget and input distances [K, B, T], c after the last step [K, B, H] (zeros for a ragged
    batch), what the backward reads or None)``; the arguments as :func:`.layer_op.onlstm_layer`'s."""
    from .kernels import onlstm_forward_kernel

    batch, steps, features = x.shape
    dirs, gates, hidden, levels, _ = _sizes(weight_hh)
    # the input projection of every step and direction, one GEMM: [K, B T, G]
    acts = torch.baddbmm(bias[:, None, :], x.reshape(1, batch * steps, features).expand(dirs, -1, -1),
                         weight_ih.transpose(1, 2)).view(dirs, batch, steps, gates)
    h_out = x.new_zeros(batch, steps, dirs * hidden)
    forget, inputs = x.new_zeros(dirs, batch, steps), x.new_zeros(dirs, batch, steps)
    hbuf = x.new_empty(2, dirs, batch, hidden)
    # saved cells: zero where a row has ended (nothing writes there), so that the outputs are a function of the inputs
    cells = x.new_zeros(dirs, batch, steps + 1, hidden) if save else x.new_zeros(dirs, batch, 2, hidden)
    if h0 is None:
        hbuf[0].zero_()
    else:
        hbuf[0].copy_(h0)
        cells[:, :, 0].copy_(c0)
    if batch and steps:
        split = plan(batch, hidden, levels, dirs, symmetric, resident_programs(x.device))
        args = (acts, weight_hh.contiguous(), lengths.contiguous(), hbuf, cells, h_out, forget, inputs)
        _launch(onlstm_forward_kernel, split, args, (batch, steps, cells.size(2)), 2 * steps, x.device)
    last = cells[:, :, steps if save else steps % 2]
    c_last = last * full_rows(lengths, steps)
    return h_out, forget, inputs, c_last, TritonSaved(acts, cells) if save else None


def _launch(kernel, split: Plan, args: tuple, sizes: tuple, units: int, device: torch.device) -> None:
    """Runs ``units`` half-steps (forward) or reverse steps (backward) of ``kernel``: in one persistent launch with a
    grid barrier after each, or one launch per unit, which orders the programs' exchanges where they cannot all be
    resident (Triton's interpreter runs them one after another)."""
    counter = torch.zeros(1, dtype=torch.int32, device=device)
    if split.persistent:
        kernel[split.grid](*args, counter, *sizes, 0, units, **split.constants, **split.options)
        return
    for unit in range(units):
        kernel[split.grid](*args, counter, *sizes, unit, unit + 1, **split.constants, **split.options)


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _backward(layer, h: Tensor, saved: TritonSaved, grads) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The gradients of ``(x, weight_ih, bias, weight_hh)`` from those of the outputs (None: zero)."""
    from .kernels import onlstm_backward_kernel

    x, lengths, weight_ih, _, weight_hh, h0, _, symmetric = layer
    acts, cells = saved
    grad_h, grad_forget, grad_input, grad_c_last = grads
    batch, steps, features = x.shape
    dirs, gates, hidden, levels, _ = _sizes(weight_hh)
    grad_h = h.new_zeros(h.shape) if grad_h is None else grad_h.contiguous()
    grad_dist = h.new_zeros(2, dirs, batch, steps)
    if grad_forget is not None:
        grad_dist[0] = grad_forget
    if grad_input is not None:
        grad_dist[1] = grad_input
    carry = h.new_zeros(dirs, batch, hidden)
    if grad_c_last is not None:
        carry.copy_(grad_c_last * full_rows(lengths, steps))
    d_acts = h.new_zeros(dirs, batch, steps, gates)
    if batch and steps:
        split = plan(batch, hidden, levels, dirs, symmetric, resident_programs(h.device))
        level = h.new_empty(2, dirs, batch, 2, split.constants["LP"])
        args = (acts, weight_hh.contiguous(), lengths.contiguous(), cells, grad_h, grad_dist, carry, level, d_acts)
        _launch(onlstm_backward_kernel, split, args, (batch, steps), steps + 1, h.device)
    d_flat = d_acts.view(dirs, batch * steps, gates)
    x_flat = x.reshape(batch * steps, features)
    d_x = torch.matmul(d_flat, weight_ih).sum(0).view(batch, steps, features)
    d_weight_ih = torch.matmul(d_flat.transpose(1, 2), x_flat)
    d_bias = d_flat.sum(1)
    # step t read h_{t-1}: the output one position back (direction 0) or forward (direction 1), zero past a row's
    # end and before its start; the initial state where the pass started from one (a full batch)
    h_prev = h.new_zeros(dirs, batch, steps, hidden)
    h_dirs = h.view(batch, steps, dirs, hidden).permute(2, 0, 1, 3)
    h_prev[0, :, 1:] = h_dirs[0, :, :-1]
    if dirs == 2:
        h_prev[1, :, :-1] = h_dirs[1, :, 1:]
    if h0 is not None:
        h_prev[0, :, 0] = h0[0]
        if dirs == 2:
            h_prev[1, :, -1] = h0[1]
    d_weight_hh = torch.matmul(d_flat.transpose(1, 2), h_prev.view(dirs, batch * steps, hidden))
    return d_x, d_weight_ih, d_bias, d_weight_hh
