"""One ON-LSTM layer as a PyTorch operator: ``torch.ops.onlstm_tasks.onlstm_layer``, its backward
``torch.ops.onlstm_tasks.onlstm_layer_backward``, and :func:`run_layer`, which the encoder calls.

Registered with :func:`torch.library.custom_op`, with a fake (meta) implementation and its autograd formula, so
``torch.compile`` (``fullgraph=True``, dynamic shapes), ``torch.library.opcheck``, autocast and DDP treat it like a
built-in operator: the data-dependent work (the rows' lengths) happens inside it, where the compiler does not trace.

The work itself is a back end's (:mod:`.registry`: one interface, chosen in one place by :func:`.registry.resolve`):
its forward returns the outputs and its own named ``Saved`` tensors, which travel through the operator as a list
and come back to its backward as the same named tuple.

State carry (full batches only): a language model's windows of a contiguous stream start from the previous window's
final ``h, c`` instead of zeros; the backward drops the gradient into them (truncated back-propagation through time).

Eager mode skips the operator: :func:`run_layer` calls the same forward and backward through a plain
:class:`torch.autograd.Function` (:class:`_EagerLayer`), whose Python dispatch costs less host time per call than the
registered operator's, and which keeps the saved buffers off its outputs (the operator returns them, so its backward
gets a zero gradient for each; ``python scripts/benchmark_layer_call.py`` times both); under ``torch.compile`` (and
``torch.jit.trace``) it calls the operator, which the compiler takes whole. Tests hold the two paths to the same
outputs and gradients.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from .registry import LayerInputs, OutputGrads, resolve


def _no_autocast(x: Tensor) -> torch.autocast:
    """The operator's inputs are in the weights' dtype (:func:`run_layer`); autocast, still on inside its
    implementation, would run the back end's GEMMs (the input projection, the weights' gradients) in bf16."""
    return torch.autocast(x.device.type, enabled=False)


@torch.library.custom_op("onlstm_tasks::onlstm_layer", mutates_args=())
def onlstm_layer(x: Tensor, lengths: Tensor, weight_ih: Tensor, bias: Tensor, weight_hh: Tensor,
                 h0: Optional[Tensor], c0: Optional[Tensor], symmetric: bool, backend: str,
                 save: bool) -> tuple[Tensor, Tensor, Tensor, Tensor, list[Tensor]]:
    """K ON-LSTM directions of one layer over x [B, T, D] (direction 0 left to right, direction 1 right to left
    within each row's length), rows of ``lengths`` [B] (int) true steps, from the state ``h0, c0`` [K, B, H] (None:
    zeros; a full batch only). ``weight_ih`` [K, G, D], ``bias`` [K, G] (both biases summed), ``weight_hh``
    [K, G, H]; ``symmetric`` picks the master input variant (False: the paper's ``1 - cumax``).

    Returns hidden states [B, T, K H] (directions concatenated), forget distances ``1 - mean(f~)`` and input
    distances ``mean(i~)`` [K, B, T], all zero at padded steps, the cell state after the last step [K, B, H]
    (zeros for a ragged batch), then the back end's saved tensors (``save=True``; else an empty list)."""
    return _forward(x, lengths, weight_ih, bias, weight_hh, h0, c0, symmetric, backend, save)


def _forward(x, lengths, weight_ih, bias, weight_hh, h0, c0, symmetric, backend, save):
    """The layer's forward on its back end (:func:`onlstm_layer`, arguments and returns as there): one definition
    for the operator and the eager path."""
    run = resolve(backend, x, weight_hh.size(-1))
    with _no_autocast(x):
        h, d_forget, d_input, c_last, saved = run.forward(
            LayerInputs(x, lengths, weight_ih, bias, weight_hh, h0, c0, symmetric), save)
    return h, d_forget, d_input, c_last, list(saved) if save else []


@onlstm_layer.register_fake
def _(x, lengths, weight_ih, bias, weight_hh, h0, c0, symmetric, backend, save):
    batch, steps, _ = x.shape
    dirs, _, hidden = weight_hh.shape
    saved = [x.new_empty(shape) for shape in resolve(backend, x, hidden).saved_shapes(x, weight_hh)] if save else []
    return (x.new_empty(batch, steps, dirs * hidden), x.new_empty(dirs, batch, steps), x.new_empty(dirs, batch, steps),
            x.new_empty(dirs, batch, hidden), saved)


@torch.library.custom_op("onlstm_tasks::onlstm_layer_backward", mutates_args=())
def onlstm_layer_backward(grad_h: Optional[Tensor], grad_forget: Optional[Tensor], grad_input: Optional[Tensor],
                          grad_c_last: Optional[Tensor], x: Tensor, lengths: Tensor, weight_ih: Tensor,
                          weight_hh: Tensor, h: Tensor, h0: Optional[Tensor], saved: list[Tensor], symmetric: bool,
                          backend: str) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The gradients of :func:`onlstm_layer`'s ``(x, weight_ih, bias, weight_hh)`` from those of its first four
    outputs (None: zero) and what it saved."""
    return _backward_grads(grad_h, grad_forget, grad_input, grad_c_last, x, lengths, weight_ih, weight_hh, h, h0,
                           saved, symmetric, backend)


def _backward_grads(grad_h, grad_forget, grad_input, grad_c_last, x, lengths, weight_ih, weight_hh, h, h0, saved,
                    symmetric, backend):
    """The layer's backward on its back end (:func:`onlstm_layer_backward`, arguments and returns as there): one
    definition for the operator and the eager path."""
    run = resolve(backend, x, weight_hh.size(-1))
    layer = LayerInputs(x, lengths, weight_ih, None, weight_hh, h0, None, symmetric)
    with _no_autocast(x):
        return tuple(run.backward(layer, h, run.Saved(*saved), OutputGrads(grad_h, grad_forget, grad_input,
                                                                              grad_c_last)))


@onlstm_layer_backward.register_fake
def _(grad_h, grad_forget, grad_input, grad_c_last, x, lengths, weight_ih, weight_hh, h, h0, saved, symmetric,
      backend):
    dirs, gates, _ = weight_hh.shape
    return torch.empty_like(x), torch.empty_like(weight_ih), h.new_empty(dirs, gates), torch.empty_like(weight_hh)


def _setup_context(ctx, inputs, output):
    x, lengths, weight_ih, bias, weight_hh, h0, c0, symmetric, backend, save = inputs
    ctx.save_for_backward(x, lengths, weight_ih, weight_hh, output[0], h0, *output[4])
    ctx.symmetric, ctx.backend, ctx.saving = symmetric, backend, save


def _backward(ctx, grad_h, grad_forget, grad_input, grad_c_last, unused):
    if not ctx.saving:
        raise RuntimeError("onlstm_layer ran with save=False, which keeps nothing for a backward")
    x, lengths, weight_ih, weight_hh, h, h0, *saved = ctx.saved_tensors
    d_x, d_weight_ih, d_bias, d_weight_hh = torch.ops.onlstm_tasks.onlstm_layer_backward(
        grad_h, grad_forget, grad_input, grad_c_last, x, lengths, weight_ih, weight_hh, h, h0, saved, ctx.symmetric,
        ctx.backend)
    return d_x, None, d_weight_ih, d_bias, d_weight_hh, None, None, None, None, None


onlstm_layer.register_autograd(_backward, setup_context=_setup_context)


class _EagerLayer(torch.autograd.Function):
    """:func:`onlstm_layer` with ``save=True`` for eager mode, its first four outputs: the same forward and backward
    without the registered operator's dispatch (see the module's docstring)."""

    @staticmethod
    def forward(ctx, x, lengths, weight_ih, bias, weight_hh, h0, c0, symmetric, backend):
        h, d_forget, d_input, c_last, saved = _forward(x, lengths, weight_ih, bias, weight_hh, h0, c0, symmetric,
                                                       backend, True)
        ctx.save_for_backward(x, lengths, weight_ih, weight_hh, h, h0, *saved)
        ctx.symmetric, ctx.backend = symmetric, backend
        ctx.set_materialize_grads(False)  # the back ends take None for an output without a gradient
        return h, d_forget, d_input, c_last

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_h, grad_forget, grad_input, grad_c_last):
        x, lengths, weight_ih, weight_hh, h, h0, *saved = ctx.saved_tensors
        d_x, d_weight_ih, d_bias, d_weight_hh = _backward_grads(
            grad_h, grad_forget, grad_input, grad_c_last, x, lengths, weight_ih, weight_hh, h, h0, saved,
            ctx.symmetric, ctx.backend)
        return d_x, None, d_weight_ih, d_bias, d_weight_hh, None, None, None, None


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
    if torch.compiler.is_compiling() or torch.jit.is_tracing():  # a tracer takes the operator whole
        outputs = torch.ops.onlstm_tasks.onlstm_layer(x, lengths, weight_ih, bias, weight_hh, h0, c0, symmetric,
                                                      backend, save)
    elif save:
        outputs = _EagerLayer.apply(x, lengths, weight_ih, bias, weight_hh, h0, c0, symmetric, backend)
    else:
        outputs = _forward(x, lengths, weight_ih, bias, weight_hh, h0, c0, symmetric, backend, False)
    return outputs[0], outputs[1], outputs[2], outputs[3]
