"""The ``triton`` back end of the ON-LSTM layer: the whole time loop of a layer's pass in one kernel launch
(:mod:`.triton_kernels`), forward and backward, in the batch's own layout (no sorting by length, no host read).

Before the loop, the input projection of every step and direction is one batched GEMM; after the backward loop,
the gradients of ``W_ih``, ``W_hh``, the bias and ``x`` are GEMMs and one reduction over the saved
``dL/d(pre-activations)``. Runs on CUDA tensors, and on CPU tensors under Triton's interpreter
(``TRITON_INTERPRET=1`` when Triton is first imported, for tests). float32 only: the kernels accumulate in float32,
and the layer's inputs come in the weights' dtype (bf16 activations under autocast are cast up by
:func:`.layer_op.run_layer`). On a GPU the recurrent products use TF32 where ``torch.backends.cuda.matmul.allow_tf32``
allows it (as cuDNN's LSTM does), full float32 otherwise.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

ROWS = 16  # batch rows per program (tl.dot needs 16)
BLOCK_K = 32  # hidden units per block of the recurrent product's depth
BLOCK_N = 64  # neurons per block of the cell update


def interpreted() -> bool:
    """Whether Triton built the kernels for its interpreter (``TRITON_INTERPRET=1`` when they were first imported),
    which runs them on CPU tensors."""
    from triton.runtime.interpreter import InterpretedFunction

    from .triton_kernels import onlstm_forward_kernel

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


class Saved(NamedTuple):
    """What the backward reads besides the layer's inputs and outputs, in the batch's layout."""

    acts: Tensor  # [K, B, T, G]: every step's pre-activations
    cells: Tensor  # [K, B, T + 1, H]: c_{-1}, c_0, ... by step (index t + 1 after step t)


class TritonBackend:
    name = "triton"
    Saved = Saved

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
    def backward(layer, h: Tensor, saved: Saved, grads):
        return _backward(layer, h, saved, grads)


def _sizes(weight_hh: Tensor) -> tuple[int, int, int, int, int]:
    dirs, gates, hidden = weight_hh.shape
    levels = (gates - 4 * hidden) // 2
    return dirs, gates, hidden, levels, hidden // levels


def _constants(hidden: int, levels: int) -> dict:
    precision = "tf32" if torch.backends.cuda.matmul.allow_tf32 and not interpreted() else "ieee"  # (TF32: GPUs)
    return dict(BB=ROWS, BK=BLOCK_K, BN=min(BLOCK_N, max(16, triton_next_power_of_2(hidden))),
                LP=max(16, triton_next_power_of_2(levels)), PRECISION=precision)


def kernel_constants(hidden: int, levels: int, dirs: int, symmetric: bool, backward: bool) -> dict:
    """The compile-time constants of a launch of the forward or the backward kernel (what Triton specializes on)."""
    sizes = dict(H=hidden, L=levels, C=hidden // levels, K=dirs, SYMMETRIC=symmetric, **_constants(hidden, levels))
    if backward:
        sizes["CP"] = max(2, triton_next_power_of_2(hidden // levels))
    return sizes


def triton_next_power_of_2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def full_rows(lengths: Tensor, steps: int) -> Tensor:
    """1.0 where every row has all ``steps`` steps, else 0.0 (a 0-d tensor: no host read)."""
    return (lengths == steps).all().to(torch.float32)


def _forward(x: Tensor, lengths: Tensor, weight_ih: Tensor, bias: Tensor, weight_hh: Tensor, h0: Tensor | None,
             c0: Tensor | None, symmetric: bool, save: bool) -> tuple[Tensor, Tensor, Tensor, Tensor, Saved | None]:
    """``(h [B, T, K H], forget and input distances [K, B, T], c after the last step [K, B, H] (zeros for a ragged
    batch), what the backward reads or None)``; the arguments as :func:`.layer_op.onlstm_layer`'s."""
    from .triton_kernels import onlstm_forward_kernel

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
        masters = x.new_empty(dirs, batch, 2, _constants(hidden, levels)["LP"])
        grid = (dirs, triton_cdiv(batch, ROWS))
        onlstm_forward_kernel[grid](acts, weight_hh.contiguous(), lengths.contiguous(), hbuf, cells, masters, h_out,
                                    forget, inputs, batch, steps, cells.size(2),
                                    **kernel_constants(hidden, levels, dirs, symmetric, backward=False))
    last = cells[:, :, steps if save else steps % 2]
    c_last = last * full_rows(lengths, steps)
    return h_out, forget, inputs, c_last, Saved(acts, cells) if save else None


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _backward(layer, h: Tensor, saved: Saved, grads) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The gradients of ``(x, weight_ih, bias, weight_hh)`` from those of the outputs (None: zero)."""
    from .triton_kernels import onlstm_backward_kernel

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
    carry = h.new_zeros(2, dirs, batch, hidden)
    if grad_c_last is not None:
        carry[0] = grad_c_last * full_rows(lengths, steps)
    d_acts = h.new_zeros(dirs, batch, steps, gates)
    if batch and steps:
        constants = kernel_constants(hidden, levels, dirs, symmetric, backward=True)
        masters = h.new_empty(dirs, batch, 2, constants["LP"])
        level = h.new_empty(dirs, batch, 2, hidden)
        grid = (dirs, triton_cdiv(batch, ROWS))
        onlstm_backward_kernel[grid](acts, weight_hh.contiguous(), lengths.contiguous(), cells, masters, grad_h,
                                     grad_dist, carry, level, d_acts, batch, steps, **constants)
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
