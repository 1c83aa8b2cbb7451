"""The ``compiled`` and ``torch`` back ends of the ON-LSTM layer: a time loop over length-sorted, time-major rows.

A layer's ``K`` directions (one, or two for a bidirectional layer) run side by side on one layout
(:class:`.batch_plan.BatchPlan`): rows sorted by length, time first, the right-to-left direction reading each row
reversed within its length. The time loop (:class:`.layer_pass.LayerPass`) runs on one of two steps objects: C++
kernels (``"compiled"``, :class:`.steps_compiled.CompiledSteps`, float32 on the CPU) or PyTorch operations
(``"torch"``, :class:`.steps_torch.TorchSteps`, any device and dtype). The
backward is derived by hand and not differentiable again (no double backward).

Padding: ``batch_sizes[t]`` rows are running at step t. A run of steps is computed on the first ``n`` rows, ``n``
those running at its first step; rows that end inside the run keep stepping on zero inputs (cheaper than slicing
every step), but their outputs at padded steps are zeroed and receive no gradient, so they never reach a real
position. A new run starts when the running rows fall to ``SHRINK`` of ``n`` (:mod:`.runs`): finished rows then
stop costing anything, as in a packed sequence. The plan reads the lengths on the host: no wait on a CPU, one on a
GPU (where ``auto`` takes the ``triton`` back end instead).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from .layer_pass import LayerPass
from .plan import BatchPlan
from .runs import gather_runs, scatter_runs


class LoopSaved(NamedTuple):
    """What the loop's backward reads (see :meth:`.layer_pass.LayerPass.forward`), all [K, T, B, ...] in the
    length-sorted, time-major layout."""

    x_read: Tensor  # the inputs as the loop read them (zero at padded steps)
    acts: Tensor  # every step's activations
    masters: Tensor  # [i~, f~]
    probs: Tensor  # [p_i, p_f]
    cells: Tensor  # [c^_t, c_{t-1}], doubled
    tanh_c: Tensor
    eff: Tensor
    omega: Tensor


class LoopBackend:
    """A loop back end over one steps object (``steps``: :class:`.steps_compiled.CompiledSteps` or
    :class:`.steps_torch.TorchSteps`), named after it."""

    Saved = LoopSaved

    def __init__(self, steps) -> None:
        self.steps = steps
        self.name = steps.name

    def why_not(self, x: Tensor) -> str | None:
        return self.steps.why_not(x)

    @staticmethod
    def saved_shapes(x: Tensor, weight_hh: Tensor) -> list[tuple]:
        batch, steps, features = x.shape
        dirs, gates, hidden = weight_hh.shape
        levels = (gates - 4 * hidden) // 2
        return [(dirs, steps, batch, features), (dirs, steps, batch, gates), (dirs, steps, batch, 2, levels),
                (dirs, steps, batch, 2, levels), (dirs, steps + 1, batch, 2, hidden), (dirs, steps, batch, hidden),
                (dirs, steps, batch, 2, hidden), (dirs, steps, batch, levels)]

    def forward(self, layer, save: bool):
        x, lengths, weight_ih, bias, weight_hh, h0, c0, symmetric = layer
        batch, steps, _ = x.shape
        dirs, gates, hidden = weight_hh.shape
        plan = BatchPlan(lengths, batch, steps, x.device)
        if h0 is not None and not plan.full:
            raise ValueError("state carry needs a full batch: every row has all T steps")
        if batch == 0 or steps == 0 or plan.batch_sizes[0] == 0:  # nothing to run
            saved = LoopSaved(*(x.new_zeros(shape) for shape in self.saved_shapes(x, weight_hh))) if save else None
            c_last = x.new_zeros(dirs, batch, hidden) if c0 is None else c0.clone()
            return (x.new_zeros(batch, steps, dirs * hidden), x.new_zeros(dirs, batch, steps),
                    x.new_zeros(dirs, batch, steps), c_last, saved)
        in_rows, _, out_rows, _, dist_rows, _ = plan.maps(dirs)
        x_layer = x.reshape(batch * steps, -1).index_select(0, in_rows).view(dirs, steps, batch, -1)
        loop = LayerPass(x_layer.shape, weight_hh, plan.batch_sizes, symmetric, self.steps)
        x_read, h, d_forget, d_input, c_last, buffers = loop.forward(x_layer, weight_ih, bias, weight_hh, save, h0, c0)
        h_out = h.reshape(-1, hidden).index_select(0, out_rows).view(batch, steps, dirs * hidden)
        d_forget = d_forget.reshape(-1).index_select(0, dist_rows).view(dirs, batch, steps)
        d_input = d_input.reshape(-1).index_select(0, dist_rows).view(dirs, batch, steps)
        rank = torch.empty_like(plan.order)
        rank[plan.order] = torch.arange(batch, device=x.device)
        c_last = c_last.index_select(1, rank)  # back in the batch's row order
        return h_out, d_forget, d_input, c_last, LoopSaved(x_read, *buffers) if save else None

    def backward(self, layer, h: Tensor, saved: LoopSaved, grads):
        """The three big products (``dx``, ``dW_ih``, ``dW_hh``) run over the (step, row) pairs the runs of steps
        computed, gathered first where rows are ragged, so padded positions cost no arithmetic."""
        x, lengths, weight_ih, _, weight_hh, h0, _, symmetric = layer
        batch, steps, _ = h.shape
        dirs, gates, hidden = weight_hh.shape
        features = weight_ih.size(-1)
        plan = BatchPlan(lengths, batch, steps, h.device)
        if batch == 0 or steps == 0 or plan.batch_sizes[0] == 0:
            return h.new_zeros(batch, steps, features), torch.zeros_like(weight_ih), h.new_zeros(dirs, gates), \
                torch.zeros_like(weight_hh)
        loop = LayerPass((dirs, steps, batch, features), weight_hh, plan.batch_sizes, symmetric, self.steps)
        _, in_inverse, _, out_inverse, _, dist_inverse = plan.maps(dirs)

        def to_layer(t: Tensor | None, n: int) -> Tensor | None:  # the inverse of the output gathers
            if t is None:
                return None
            return t.reshape(-1, n).index_select(0, out_inverse[0]).view(dirs, steps, batch, n)

        def distances(t: Tensor | None) -> Tensor | None:
            return None if t is None else t.reshape(-1).index_select(0, dist_inverse[0]).view(dirs, steps, batch)

        h_layer = to_layer(h, hidden)
        grad_c = grads.c_last if plan.full else None  # only a full batch's last step has a state to carry
        d_pre = loop.backward(weight_hh, h_layer, saved[1:], to_layer(grads.hidden, hidden),
                              distances(grads.forget), distances(grads.input), grad_c)  # [K, T, B, G]
        x_read = saved.x_read
        runs = loop.segments
        full = runs == [(batch, 0, steps)]  # every row at every step: views, no gathering
        if full:
            d_flat, x_flat = d_pre.view(dirs, -1, gates), x_read.reshape(dirs, -1, features)
        else:
            d_flat, x_flat = gather_runs(d_pre, runs), gather_runs(x_read, runs)
        matmul = self.steps.matmul
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
