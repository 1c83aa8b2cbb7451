"""One ON-LSTM layer (one direction, or both side by side) as a single autograd node with a hand-written backward.

The forward computes the input projection of every step in one matmul, then runs the time loop writing each
step's activations in place into preallocated buffers. The backward walks the steps in reverse carrying only
``dL/dc`` and ``dL/dh``, writes each step's ``dL/d(pre-activation)`` into one [K, T, B, G] tensor and ends with three
big matmuls (``dW_hh``, ``dW_ih``, ``dx``). Without gradients the loop runs on scratch buffers and saves nothing.

The maths, the gate layout and the regrouped update with its three rewrites (doubled cell-candidate rows, negated
input/forget rows, doubled cell state) are in :mod:`.equations`.

Where the code is: this module holds the autograd Functions; :mod:`.layer_pass` one layer's forward and backward
pass (buffers, time loop, recurrent products) and :mod:`.runs` the runs of steps it walks. For float32 on the CPU
with the compiled library built, the whole time loop, recurrent products included, runs in one compiled call per
layer (per direction or block of rows with two threads; ``_onlstm_step.c`` through :mod:`.compiled`); otherwise the
loop is Python's, each step's recurrent product a PyTorch ``baddbmm`` and its element-wise work either one compiled
call or PyTorch operations on whole-batch views (:mod:`.steps_torch`). Every back end reads and writes the same
buffers in the same conventions; scripts/benchmark_encoders.py times all three.

Padding: rows are sorted by length (longest first) and ``batch_sizes[t]`` rows are running at step t. A run of
steps is computed on the first ``n`` rows, ``n`` those running at its first step; rows that end inside the run
keep stepping on zero inputs (cheaper than slicing every step), but their outputs at padded steps are zeroed and
receive no gradient, so they never reach a real position. A new run starts when the running rows fall to
``SHRINK`` of ``n``: finished rows then stop costing anything, as in a packed sequence.

State carry (:func:`onlstm_layer_carry`, full batches only): a language model's windows of a contiguous stream start
from the previous window's final ``h, c`` instead of zeros. Step 0 then adds ``h_{-1} W_hh^T`` (skipped from a zero
state) and the doubled cell buffer starts at ``2 c_{-1}``; the backward adds step 0's share of ``dW_hh`` and drops the
gradient into ``h_{-1}, c_{-1}`` (truncated back-propagation through time: the initial state is a constant).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch.autograd.function import once_differentiable

from . import compiled
from .layer_pass import LayerPass
from .runs import gather_runs, scatter_runs

COMPILED_GRAD_WIDTH = 1024  # see _input_grad and _weight_grads


class LayerState(NamedTuple):
    """The recurrent state of K directions of one layer between two windows: h and c, each [K, B, H]."""

    h: torch.Tensor
    c: torch.Tensor


def onlstm_layer(
    x: torch.Tensor,
    weight_ih: torch.Tensor,
    bias: torch.Tensor,
    weight_hh: torch.Tensor,
    batch_sizes: list[int],
    symmetric: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Runs ``K`` ON-LSTM directions of one layer side by side over time-major inputs, from a zero state.

    x [K, T, B, D] (direction k reads ``x[k]`` left to right), weight_ih [K, G, D], bias [K, G] (both biases
    summed), weight_hh [K, G, H]. Rows are sorted by length, longest first; ``batch_sizes`` (T non-increasing ints,
    the first positive) counts the rows running at each step, the same for every direction. ``symmetric`` picks
    the master input variant (``False``: the paper's ``1 - cumax``). Running both directions of a bidirectional
    layer in one call halves the number of per-step operations.

    Returns hidden states [K, T, B, H], forget distances ``1 - mean(f~)`` [K, T, B] and input distances
    ``mean(i~)`` [K, T, B], all zero at padded steps. Differentiable in ``x`` and the weights (first order only).
    One direction over a full batch whose ``x`` lies batch-major in memory (a transposed view of [B, T, D]) gets
    its hidden states laid out the same way, so that ``h[0].transpose(0, 1)`` is contiguous.
    """
    if not batch_sizes or batch_sizes[0] == 0:  # nothing to run (an empty batch or sequence)
        dirs, steps, batch, _ = x.shape
        zeros = x.new_zeros(dirs, steps, batch)
        return x.new_zeros(dirs, steps, batch, weight_hh.size(-1)), zeros, zeros.clone()
    if torch.is_grad_enabled() and any(t.requires_grad for t in (x, weight_ih, bias, weight_hh)):
        return ONLSTMLayerFunction.apply(x, weight_ih, bias, weight_hh, batch_sizes, symmetric)
    with torch.no_grad():
        return LayerPass(x, weight_ih, bias, weight_hh, batch_sizes, symmetric, save=False).outputs


def onlstm_layer_carry(
    x: torch.Tensor,
    weight_ih: torch.Tensor,
    bias: torch.Tensor,
    weight_hh: torch.Tensor,
    symmetric: bool,
    initial: LayerState | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, LayerState]:
    """:func:`onlstm_layer` on a full batch (every row runs all T steps) from the state ``initial`` (None: zeros),
    also returning the state after the last step, to start the next window of a stream from.

    ``initial``: h and c [K, B, H], treated as constants (detached: no gradient flows into them, as truncated
    back-propagation through time wants). Returns ``(h, forget distances, input distances, final)`` with ``final``
    the :class:`LayerState` after step T - 1 (its h is ``h[:, -1]``); differentiable in ``x`` and the weights,
    also through ``final``. From a zero state the time loop does exactly the work of :func:`onlstm_layer`.
    """
    dirs, steps, batch, _ = x.shape
    if steps == 0 or batch == 0:  # nothing to run: the state passes through unchanged
        h, d_forget, d_input = onlstm_layer(x, weight_ih, bias, weight_hh, [batch] * steps, symmetric)
        if initial is None:
            zeros = x.new_zeros(dirs, batch, weight_hh.size(-1))
            return h, d_forget, d_input, LayerState(zeros, zeros.clone())
        return h, d_forget, d_input, LayerState(initial.h.detach(), initial.c.detach())
    h0, c0 = (None, None) if initial is None else (initial.h.detach(), initial.c.detach())
    if torch.is_grad_enabled() and any(t.requires_grad for t in (x, weight_ih, bias, weight_hh)):
        h, d_forget, d_input, c_last = ONLSTMCarryFunction.apply(x, weight_ih, bias, weight_hh, symmetric, h0, c0)
    else:
        with torch.no_grad():
            layer = LayerPass(x, weight_ih, bias, weight_hh, [batch] * steps, symmetric, save=False,
                           h_init=h0, c_init=c0)
            (h, d_forget, d_input), c_last = layer.outputs, layer.final_cell()
    return h, d_forget, d_input, LayerState(h[:, -1].clone(), c_last)  # a copy: the state outlives h


class ONLSTMLayerFunction(torch.autograd.Function):
    """``(x, weight_ih, bias, weight_hh, batch_sizes, symmetric) -> (h, forget distances, input distances)``.

    See :func:`onlstm_layer`. The backward is derived by hand and ``once_differentiable``: double backward
    (gradients of gradients) is not supported.
    """

    @staticmethod
    def forward(ctx, x, weight_ih, bias, weight_hh, batch_sizes, symmetric):
        layer = LayerPass(x, weight_ih, bias, weight_hh, batch_sizes, symmetric, save=True)
        return _keep_for_backward(ctx, layer, weight_ih, weight_hh, h0=None)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_h, grad_forget, grad_input):
        return *_parameter_grads(ctx, grad_h, grad_forget, grad_input), None, None


class ONLSTMCarryFunction(torch.autograd.Function):
    """``(x, weight_ih, bias, weight_hh, symmetric, h0, c0) -> (h, forget distances, input distances, c_last)``
    on a full batch, from the constant initial state ``h0, c0`` [K, B, H] (both None: zeros); ``c_last`` [K, B, H]
    is the cell state after the last step. See :func:`onlstm_layer_carry`; ``once_differentiable`` as
    :class:`ONLSTMLayerFunction`, no gradient for ``h0, c0``.
    """

    @staticmethod
    def forward(ctx, x, weight_ih, bias, weight_hh, symmetric, h0, c0):
        steps, batch = x.shape[1:3]
        layer = LayerPass(x, weight_ih, bias, weight_hh, [batch] * steps, symmetric, save=True, h_init=h0, c_init=c0)
        c_last = layer.final_cell()
        return (*_keep_for_backward(ctx, layer, weight_ih, weight_hh, h0), c_last)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_h, grad_forget, grad_input, grad_c_last):
        return *_parameter_grads(ctx, grad_h, grad_forget, grad_input, grad_c_last), None, None, None


def _keep_for_backward(ctx, layer: LayerPass, weight_ih, weight_hh, h0):
    """Saves what the backward of a layer Function reads and returns the layer's outputs."""
    outputs = layer.outputs
    ctx.save_for_backward(layer.x, weight_ih, weight_hh, outputs[0], h0, *layer.saved)
    layer.outputs = layer.x = layer.saved = layer.cells = None  # saved above, with checks against later in-place
    # changes (outputs kept on ctx directly would also make a reference cycle through their grad_fn)
    ctx.layer = layer
    ctx.set_materialize_grads(False)
    return outputs


def _parameter_grads(ctx, grad_h, grad_forget, grad_input, grad_c_last=None):
    """The gradients of a layer Function's ``(x, weight_ih, bias, weight_hh)`` (None where not needed).

    Three big products over the (step, row) pairs the runs of steps computed: with ragged rows these are gathered
    first (one pass over memory), so that padded positions cost no arithmetic, as in the forward's projection."""
    x, weight_ih, weight_hh, h, h0, *saved = ctx.saved_tensors  # x: zero at padded steps
    layer = ctx.layer
    d_pre, d_bias = layer.backward(weight_hh, h, saved, grad_h, grad_forget, grad_input, grad_c_last)  # [K, T, B, G]
    dirs, steps, batch, gates = d_pre.shape
    runs = layer.segments
    full = runs == [(batch, 0, steps)]  # every row at every step: views, no gathering
    # one direction's full batch laid out batch-major (see LayerPass): x, h and d_pre all list rows in (row, step)
    # order, so each is one [K, B T, n] view in that order
    batch_major = full and d_pre.stride(2) > d_pre.stride(1)
    if batch_major:
        d_flat, x_flat = _rows_by_row(d_pre), _rows_by_row(x)
    elif full:
        d_flat, x_flat = d_pre.view(dirs, -1, gates), x.reshape(dirs, -1, x.size(-1))
    else:
        d_flat, x_flat = gather_runs(d_pre, runs), gather_runs(x, runs)
    need = ctx.needs_input_grad
    d_x = None
    if need[0]:
        d_x_flat = _input_grad(d_flat, weight_ih)
        if batch_major:
            d_x = d_x_flat.view(dirs, batch, steps, -1).transpose(1, 2)
        else:
            d_x = d_x_flat.view(x.shape) if full else scatter_runs(d_x_flat, runs, x.new_zeros(x.shape))
    weight_grad = _weight_grads(d_flat)
    d_weight_ih = weight_grad(x_flat) if need[1] else None
    if not need[2]:
        d_bias = None
    elif d_bias is None:  # (the compiled loop sums it as it goes)
        d_bias = d_flat.sum(1)
    d_weight_hh = None
    if need[3]:  # step t reads h_{t-1}; from a zero state step 0 contributes nothing, from h0 it adds its share
        if batch_major:  # (so more than one step: with one, both layouts are the same)
            d_weight_hh = _recurrent_grad_by_row(weight_grad, _rows_by_row(h), d_pre, h)
        else:
            later = [(rows, max(start, 1), stop) for rows, start, stop in runs if stop > 1]
            h_prev = gather_runs(h, later, offset=-1)
            if full:  # steps 1.. of d_flat: its rows from the batch's on (views)
                d_weight_hh = weight_grad(h_prev, first=batch)
            else:
                d_weight_hh = _weight_grads(gather_runs(d_pre, later))(h_prev)
        if h0 is not None:  # full batches only
            d_weight_hh.baddbmm_(d_pre[:, 0].transpose(1, 2), h0)
    return d_x, d_weight_ih, d_bias, d_weight_hh


def _input_grad(d_flat: torch.Tensor, weight_ih: torch.Tensor) -> torch.Tensor:
    """``d_flat @ weight_ih`` ([K, M, G] x [K, G, D]): through the compiled product (the one the forward projects
    with, :func:`.compiled.project`) for inputs at least :data:`COMPILED_GRAD_WIDTH` wide, else MKL's ``bmm``.
    ``python scripts/benchmark_blas_gemm.py --gradients D`` (one thread, CPU time, one run each on the 2-core AMD
    EPYC) printed 0.72x and 0.76x of ``bmm``'s time at the language model's D 1150 (G 4830 and 1680, 1400 rows),
    1.06x at D 400, 0.91-1.02x at NER's D 128-512 (G 1088)."""
    if not _compiled_for(weight_ih):
        return torch.bmm(d_flat, weight_ih)
    return _compiled_product(d_flat, weight_ih)


def _weight_grads(d_flat: torch.Tensor) -> Callable[..., torch.Tensor]:
    """``grad(b, first=0)`` = ``d_flat[:, first:]^T @ b`` ([K, M - first, G] and [K, M - first, N] -> [K, G, N]): a
    weight gradient. Through the compiled product for ``b`` at least :data:`COMPILED_GRAD_WIDTH` wide, on one
    transposed copy of ``d_flat`` shared by every such call (the product reads rows along M), else MKL's ``bmm``.
    Measured as in :func:`_input_grad` (the transposed copy included): 0.90x and 0.92x of ``bmm``'s time at N 1150,
    1.47x at N 400, 1.58-2.65x at NER's N 128-512."""
    transposed: list[torch.Tensor] = []

    def grad(b: torch.Tensor, first: int = 0) -> torch.Tensor:
        if not _compiled_for(b):
            return torch.bmm(d_flat[:, first:].transpose(1, 2), b)
        if not transposed:
            transposed.append(d_flat.transpose(1, 2).contiguous())  # [K, G, M]
        return _compiled_product(transposed[0][:, :, first:], b)

    return grad


def _compiled_for(right: torch.Tensor) -> bool:
    """Whether a product with ``right`` [K, depth, N] as its right factor goes through the compiled product: N at
    least :data:`COMPILED_GRAD_WIDTH` and the compiled loop usable for its tensors."""
    return right.size(-1) >= COMPILED_GRAD_WIDTH and compiled.loop_usable(right)


def _compiled_product(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """``left @ right`` ([K, M, depth] with contiguous rows, [K, depth, N]) through :func:`.compiled.project`."""
    dirs, width = right.size(0), right.size(-1)
    out = left.new_empty(dirs, left.size(1), width)
    compiled.project(out, left, compiled.packed(right), left.new_zeros(dirs, width))
    return out


def _rows_by_row(buf: torch.Tensor) -> torch.Tensor:
    """[K, T, B, n] laid out batch-major -> the view [K, B T, n] in (row, step) order."""
    return buf.transpose(1, 2).reshape(buf.size(0), -1, buf.size(-1))


def _recurrent_grad_by_row(weight_grad, h_flat, d_pre, h) -> torch.Tensor:
    """``sum over rows b and steps t >= 1 of d_pre[t, b]^T h[t - 1, b]`` from the (row, step) view ``h_flat``
    [K, B T, H] and ``weight_grad`` (:func:`_weight_grads` of the same view of ``d_pre``), without copying: entry i of
    ``d_pre``'s view pairs with entry i - 1 of ``h_flat``, which is the previous step of the same row except at a
    row's step 0, paired with the row before's last step; those B - 1 wrong terms are subtracted again (one small
    product)."""
    grad = weight_grad(h_flat[:, :-1], first=1)
    return grad.baddbmm_(d_pre[:, 0, 1:].transpose(1, 2), h[:, -1, :-1], alpha=-1.0)
