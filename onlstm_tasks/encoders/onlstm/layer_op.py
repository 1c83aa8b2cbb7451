"""One ON-LSTM layer as a PyTorch operator: ``torch.ops.onlstm_tasks.onlstm_layer``, its backward
``torch.ops.onlstm_tasks.onlstm_layer_backward``, and :func:`run_layer`, which the encoder calls.

Registered with :func:`torch.library.custom_op`, with a fake (meta) implementation and its autograd formula, so
``torch.compile`` (``fullgraph=True``, dynamic shapes), ``torch.library.opcheck``, autocast and DDP treat it like a
built-in operator: the data-dependent work (the rows' lengths, read once per call) happens inside it, where the
compiler does not trace.

Inside, a layer's ``K`` directions (one, or two for a bidirectional layer) run side by side on one layout
(:class:`.batch_plan.BatchPlan`): rows sorted by length, time first, the right-to-left direction reading each row
reversed within its length. The time loop (:class:`.layer_pass.LayerPass`) runs on one of two back ends:
``"compiled"`` (the C++ kernels of ``csrc/onlstm_cpu.cpp``, float32 on the CPU) or ``"torch"`` (PyTorch operations,
any device and dtype); ``"auto"`` picks the first where it can run. The backward is derived by hand and not
differentiable again (no double backward).

Padding: ``batch_sizes[t]`` rows are running at step t. A run of steps is computed on the first ``n`` rows, ``n``
those running at its first step; rows that end inside the run keep stepping on zero inputs (cheaper than slicing
every step), but their outputs at padded steps are zeroed and receive no gradient, so they never reach a real
position. A new run starts when the running rows fall to ``SHRINK`` of ``n`` (:mod:`.runs`): finished rows then
stop costing anything, as in a packed sequence.

State carry (full batches only): a language model's windows of a contiguous stream start from the previous window's
final ``h, c`` instead of zeros; the backward drops the gradient into them (truncated back-propagation through time).
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from . import native
from .batch_plan import BatchPlan
from .layer_pass import LayerPass
from .runs import gather_runs, scatter_runs

BACKENDS = ("auto", "compiled", "torch", "fused")
_SAVED = 8  # x as the loop read it, then the seven buffers of LayerPass.saved


def fused_why_not(x: Tensor) -> str | None:
    """Why the fused back end (``torch.compile`` of each step's element-wise work) cannot run on ``x``'s device,
    or None where it can: a GPU needs Triton, and only CUDA and CPU devices are supported."""
    if x.device.type == "cuda":
        from torch.utils._triton import has_triton

        return None if has_triton() else "Triton is not installed (torch.compile writes the fused step in Triton)"
    if x.device.type != "cpu":
        return f"the fused step runs on CUDA and CPU devices, not {x.device.type}"
    return None


def resolve_backend(backend: str, x: Tensor) -> str:
    """``"compiled"``, ``"torch"`` or ``"fused"`` for a layer over ``x``. ``"auto"`` takes the compiled loop where it
    can run (float32 on the CPU, extension built), the fused step on a CUDA device with Triton, and the PyTorch loop
    elsewhere; a back end asked for where it cannot run is a ValueError that says why."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}")
    if backend == "torch":
        return "torch"
    if backend == "fused" or (backend == "auto" and x.device.type == "cuda"):
        reason = fused_why_not(x)
        if reason is not None and backend == "fused":
            raise ValueError(f"backend 'fused' cannot run here: {reason}; use backend 'auto' or 'torch'")
        return "torch" if reason is not None else "fused"
    reason = native.why_not(x)
    if reason is not None and backend == "compiled":
        raise ValueError(f"backend 'compiled' cannot run here: {reason}; use backend 'auto' or 'torch'")
    return "torch" if reason is not None else "compiled"


def _saved_shapes(x: Tensor, weight_hh: Tensor) -> list[tuple]:
    batch, steps, features = x.shape
    dirs, gates, hidden = weight_hh.shape
    levels = (gates - 4 * hidden) // 2
    return [(dirs, steps, batch, features), (dirs, steps, batch, gates), (dirs, steps, batch, 2, levels),
            (dirs, steps, batch, 2, levels), (dirs, steps + 1, batch, 2, hidden), (dirs, steps, batch, hidden),
            (dirs, steps, batch, 2, hidden), (dirs, steps, batch, levels)]


Outputs = tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]


@torch.library.custom_op("onlstm_tasks::onlstm_layer", mutates_args=())
def onlstm_layer(x: Tensor, lengths: Tensor, weight_ih: Tensor, bias: Tensor, weight_hh: Tensor,
                 h0: Optional[Tensor], c0: Optional[Tensor], symmetric: bool, backend: str, save: bool) -> Outputs:
    """K ON-LSTM directions of one layer over x [B, T, D] (direction 0 left to right, direction 1 right to left
    within each row's length), rows of ``lengths`` [B] (int) true steps, from the state ``h0, c0`` [K, B, H] (None:
    zeros; a full batch only). ``weight_ih`` [K, G, D], ``bias`` [K, G] (both biases summed), ``weight_hh``
    [K, G, H]; ``symmetric`` picks the master input variant (False: the paper's ``1 - cumax``).

    Returns hidden states [B, T, K H] (directions concatenated), forget distances ``1 - mean(f~)`` and input
    distances ``mean(i~)`` [K, B, T], all zero at padded steps, the cell state after the last step [K, B, H]
    (zeros for a ragged batch), then eight tensors the backward reads (``save=True``; else empty)."""
    batch, steps, _ = x.shape
    dirs, gates, hidden = weight_hh.shape
    run = resolve_backend(backend, x)
    plan = BatchPlan(lengths, batch, steps, x.device)
    if h0 is not None and not plan.full:
        raise ValueError("state carry needs a full batch: every row has all T steps")
    if batch == 0 or steps == 0 or plan.batch_sizes[0] == 0:  # nothing to run
        zeros = [x.new_zeros(shape) if save else x.new_empty(0) for shape in _saved_shapes(x, weight_hh)]
        c_last = x.new_zeros(dirs, batch, hidden) if c0 is None else c0.clone()
        return (x.new_zeros(batch, steps, dirs * hidden), x.new_zeros(dirs, batch, steps),
                x.new_zeros(dirs, batch, steps), c_last, *zeros)
    in_rows, _, out_rows, _, dist_rows, _ = plan.maps(dirs)
    x_layer = x.reshape(batch * steps, -1).index_select(0, in_rows).view(dirs, steps, batch, -1)
    layer = LayerPass(x_layer.shape, weight_hh, plan.batch_sizes, symmetric, run)
    x_read, h, d_forget, d_input, c_last, saved = layer.forward(x_layer, weight_ih, bias, weight_hh, save, h0, c0)
    h_out = h.reshape(-1, hidden).index_select(0, out_rows).view(batch, steps, dirs * hidden)
    d_forget = d_forget.reshape(-1).index_select(0, dist_rows).view(dirs, batch, steps)
    d_input = d_input.reshape(-1).index_select(0, dist_rows).view(dirs, batch, steps)
    rank = torch.empty_like(plan.order)
    rank[plan.order] = torch.arange(batch, device=x.device)
    c_last = c_last.index_select(1, rank)  # back in the batch's row order
    rest = (x_read, *saved) if save else [x.new_empty(0) for _ in range(_SAVED)]
    return h_out, d_forget, d_input, c_last, *rest


@onlstm_layer.register_fake
def _(x, lengths, weight_ih, bias, weight_hh, h0, c0, symmetric, backend, save):
    batch, steps, _ = x.shape
    dirs, _, hidden = weight_hh.shape
    rest = [x.new_empty(shape) if save else x.new_empty(0) for shape in _saved_shapes(x, weight_hh)]
    return (x.new_empty(batch, steps, dirs * hidden), x.new_empty(dirs, batch, steps), x.new_empty(dirs, batch, steps),
            x.new_empty(dirs, batch, hidden), *rest)


@torch.library.custom_op("onlstm_tasks::onlstm_layer_backward", mutates_args=())
def onlstm_layer_backward(grad_h: Optional[Tensor], grad_forget: Optional[Tensor], grad_input: Optional[Tensor],
                          grad_c_last: Optional[Tensor], lengths: Tensor, weight_ih: Tensor, weight_hh: Tensor,
                          h: Tensor, h0: Optional[Tensor], x_read: Tensor, acts: Tensor, masters: Tensor,
                          probs: Tensor, cells: Tensor, tanh_c: Tensor, eff: Tensor, omega: Tensor, symmetric: bool,
                          backend: str) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The gradients of :func:`onlstm_layer`'s ``(x, weight_ih, bias, weight_hh)`` from those of its first four
    outputs (None: zero) and what it saved. The three big products (``dx``, ``dW_ih``, ``dW_hh``) run over the
    (step, row) pairs the runs of steps computed, gathered first where rows are ragged, so padded positions cost no
    arithmetic."""
    batch, steps, _ = h.shape
    dirs, gates, hidden = weight_hh.shape
    features = weight_ih.size(-1)
    plan = BatchPlan(lengths, batch, steps, h.device)
    if batch == 0 or steps == 0 or plan.batch_sizes[0] == 0:
        return h.new_zeros(batch, steps, features), torch.zeros_like(weight_ih), h.new_zeros(dirs, gates), \
            torch.zeros_like(weight_hh)
    layer = LayerPass((dirs, steps, batch, features), weight_hh, plan.batch_sizes, symmetric,
                      resolve_backend(backend, h))
    _, in_inverse, _, out_inverse, _, dist_inverse = plan.maps(dirs)

    def to_layer(t: Tensor | None, n: int) -> Tensor | None:  # the inverse of the output gathers
        if t is None:
            return None
        return t.reshape(-1, n).index_select(0, out_inverse[0]).view(dirs, steps, batch, n)

    def distances(t: Tensor | None) -> Tensor | None:
        return None if t is None else t.reshape(-1).index_select(0, dist_inverse[0]).view(dirs, steps, batch)

    h_layer = to_layer(h, hidden)
    grad_c = grad_c_last if plan.full else None  # only a full batch's last step has a state to carry
    saved = (acts, masters, probs, cells, tanh_c, eff, omega)
    d_pre = layer.backward(weight_hh, h_layer, saved, to_layer(grad_h, hidden), distances(grad_forget),
                           distances(grad_input), grad_c)  # [K, T, B, G]
    runs = layer.segments
    full = runs == [(batch, 0, steps)]  # every row at every step: views, no gathering
    if full:
        d_flat, x_flat = d_pre.view(dirs, -1, gates), x_read.reshape(dirs, -1, features)
    else:
        d_flat, x_flat = gather_runs(d_pre, runs), gather_runs(x_read, runs)
    matmul = _products(layer.backend)
    d_x_flat = matmul(d_flat, weight_ih)
    d_x_layer = d_x_flat.view(dirs, steps, batch, features) if full else \
        scatter_runs(d_x_flat, runs, x_read.new_zeros(x_read.shape))
    d_weight_ih = matmul(d_flat.transpose(1, 2), x_flat)
    d_bias = d_flat.sum(1)
    # step t reads h_{t-1}: from a zero state step 0 contributes nothing, from h0 it adds its share
    later = [(rows, max(start, 1), stop) for rows, start, stop in runs if stop > 1]
    d_later = d_flat[:, batch:] if full else gather_runs(d_pre, later)
    d_weight_hh = matmul(d_later.transpose(1, 2), gather_runs(h_layer, later, offset=-1))
    if h0 is not None:
        d_weight_hh.baddbmm_(d_pre[:, 0].transpose(1, 2), h0)
    d_x = d_x_layer[0].reshape(-1, features).index_select(0, in_inverse[0])  # the inverse of the input gather
    for k in range(1, dirs):
        d_x += d_x_layer[k].reshape(-1, features).index_select(0, in_inverse[k])
    return d_x.view(batch, steps, features), d_weight_ih, d_bias, d_weight_hh


def _products(backend: str):
    """``matmul(a, b)`` ([K, M, depth] x [K, depth, N]) for the backward's large products: ``torch.bmm``, or on
    the compiled backend for N at least :data:`.native.WIDE` the compiled product (``a``'s rows made contiguous
    first where it is a transposed view)."""

    def matmul(a: Tensor, b: Tensor) -> Tensor:
        if backend != "compiled" or b.size(-1) < native.WIDE:
            return torch.bmm(a, b)
        return native.product(a.new_zeros(a.size(0), a.size(1), b.size(-1)), a.contiguous(), b)

    return matmul


@onlstm_layer_backward.register_fake
def _(grad_h, grad_forget, grad_input, grad_c_last, lengths, weight_ih, weight_hh, h, h0, x_read, acts, masters,
      probs, cells, tanh_c, eff, omega, symmetric, backend):
    batch, steps, _ = h.shape
    dirs, gates, _ = weight_hh.shape
    return (h.new_empty(batch, steps, weight_ih.size(-1)), torch.empty_like(weight_ih), h.new_empty(dirs, gates),
            torch.empty_like(weight_hh))


def _setup_context(ctx, inputs, output):
    x, lengths, weight_ih, bias, weight_hh, h0, c0, symmetric, backend, save = inputs
    ctx.save_for_backward(lengths, weight_ih, weight_hh, output[0], h0, *output[4:])
    ctx.symmetric, ctx.backend, ctx.saving = symmetric, backend, save


def _backward(ctx, grad_h, grad_forget, grad_input, grad_c_last, *unused):
    if not ctx.saving:
        raise RuntimeError("onlstm_layer ran with save=False, which keeps nothing for a backward")
    lengths, weight_ih, weight_hh, h, h0, *saved = ctx.saved_tensors
    grads = torch.ops.onlstm_tasks.onlstm_layer_backward(grad_h, grad_forget, grad_input, grad_c_last, lengths,
                                                         weight_ih, weight_hh, h, h0, *saved, ctx.symmetric,
                                                         ctx.backend)
    d_x, d_weight_ih, d_bias, d_weight_hh = grads
    return d_x, None, d_weight_ih, d_bias, d_weight_hh, None, None, None, None, None


onlstm_layer.register_autograd(_backward, setup_context=_setup_context)


def run_layer(x: Tensor, lengths: Tensor, weight_ih: Tensor, bias: Tensor, weight_hh: Tensor, symmetric: bool,
              backend: str = "auto", state: tuple[Tensor, Tensor] | None = None
              ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """:func:`onlstm_layer`'s first four outputs ``(h [B, T, K H], forget and input distances [K, B, T], c_last
    [K, B, H])``, saving for the backward only when a gradient will be asked for. ``state``: ``(h0, c0)``, each
    [K, B, H], treated as constants (detached). Inputs of another floating dtype than the recurrent weight's (bf16
    activations under autocast) are cast to it first, so that the time loop and its cell state stay in the weights'
    precision (float32)."""
    dtype = weight_hh.dtype  # under autocast x may come lower (bf16, fp16): the layer, its cell state included,
    x, weight_ih, bias = x.to(dtype), weight_ih.to(dtype), bias.to(dtype)  # runs in the weights' dtype
    save = torch.is_grad_enabled() and any(t.requires_grad for t in (x, weight_ih, bias, weight_hh))
    h0, c0 = (None, None) if state is None else (state[0].detach().to(dtype), state[1].detach().to(dtype))
    outputs = torch.ops.onlstm_tasks.onlstm_layer(x, lengths, weight_ih, bias, weight_hh, h0, c0, symmetric, backend,
                                                  save)
    return outputs[0], outputs[1], outputs[2], outputs[3]
