"""The ``compiled`` steps of an ON-LSTM layer pass (:class:`CompiledSteps`): the whole time loop, recurrent
products included, in one call of the C++ kernels (:mod:`onlstm_tasks.native.onlstm`, float32 on the CPU).

A steps object is what a :class:`~.layer_pass.LayerPass` asks of its time loop; the pass allocates the buffers and
both steps objects read and write them in the same conventions (:mod:`...equations`):

- ``name``, ``why_not(x)``: whether the steps can run on ``x`` (None) or why not;
- ``keeps_masters(save)``: whether the pass keeps every step's master gates (else one scratch slot);
- ``projection(weight_ih, bias, scale)``: ``project(inputs, out)``, the input projection before the loop;
- ``run_forward(pass, acts, h, masters, fresh, weight_hh, scale, h_init)``: every step; returns the forget and input
  distances;
- ``run_backward(pass, weight_hh, saved, d_h, d_pre, d_logits_const, k, grad_c_last)``: every step, backwards;
  writes ``d_pre``;
- ``matmul(a, b)``: the backward's large products.
"""

from __future__ import annotations

import torch

from onlstm_tasks import native
from onlstm_tasks.native import onlstm as kernels

from ...tuning import WIDE


class CompiledSteps:
    name = "compiled"

    @staticmethod
    def why_not(x: torch.Tensor) -> str | None:
        return native.why_not(x)

    @staticmethod
    def keeps_masters(save: bool) -> bool:
        return save  # the kernels write the distances themselves; without save one scratch slot serves every step

    @staticmethod
    def projection(weight_ih, bias, scale):
        def project(inputs, out):  # the compiled product, on the scaled weights packed once
            return kernels.product(out.copy_(bias.expand_as(out)), inputs, weight_ih, scale[:, 0], True)

        return project

    @staticmethod
    def run_forward(layer, acts, h, masters, fresh, weight_hh, scale, h_init):
        dirs, steps, batch = layer.shape[:3]
        cells, save = layer.cells, layer.save
        d_forget, d_input = fresh(dirs, steps, batch), fresh(dirs, steps, batch)
        if save:
            _, _, probs, _, tanh_c, eff, omega = layer.saved
            c_prev, c_new, c_hat = cells[:, :-1, :, 1], cells[:, 1:, :, 1], cells[:, :-1, :, 0]
            extra = (probs.flatten(-2), c_hat, omega, eff.flatten(-2), tanh_c)
        else:
            c_prev, c_new, extra = cells[0, :, :, 1], cells[1, :, :, 1], (None,) * 5
        kernels.forward_loop(acts, h, masters.flatten(-2), c_prev, c_new, d_forget.unsqueeze(-1),
                             d_input.unsqueeze(-1), *extra, weight_hh.contiguous(), scale[:, 0].contiguous(),
                             None if h_init is None else h_init.contiguous(), layer.rows_at, layer.symmetric,
                             not save)
        return d_forget, d_input

    @staticmethod
    def run_backward(layer, weight_hh, saved, d_h, d_pre, d_logits_const, k, grad_c_last):
        dirs, steps, batch, _, hidden = layer.shape[:5]
        acts, masters, probs, cells, tanh_c, eff, omega = saved
        carry = d_h.new_zeros(dirs, batch, hidden)  # dL/dc, updated in place from step to step
        if grad_c_last is not None:
            carry.copy_(grad_c_last)
        kernels.backward_loop(d_h, acts, tanh_c, cells[:, :steps].flatten(-2), eff.flatten(-2), omega,
                              masters.flatten(-2), probs.flatten(-2),
                              None if d_logits_const is None else d_logits_const.flatten(-2), d_pre, carry,
                              weight_hh.contiguous(), layer.rows_at, batch if grad_c_last is not None else 0,
                              layer.symmetric)

    @staticmethod
    def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """``torch.bmm``, or for N at least :data:`~...tuning.WIDE` the compiled product (``a``'s rows made contiguous
        first where it is a transposed view): ``python scripts/benchmark_encoders.py --products`` times both."""
        if b.size(-1) < WIDE:
            return torch.bmm(a, b)
        return kernels.product(a.new_zeros(a.size(0), a.size(1), b.size(-1)), a.contiguous(), b)
