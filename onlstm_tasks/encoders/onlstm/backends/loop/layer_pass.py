"""One ON-LSTM layer's forward and backward pass over time-major, length-sorted inputs (see :mod:`...equations` for
the maths, :mod:`.backend` for the back ends around it and "Padding" there).

:class:`LayerPass` allocates the buffers and hands the time loop to a steps object that reads and writes them in the
same conventions: :class:`.steps_compiled.CompiledSteps` (the whole loop in one call of the C++ kernels, float32 on
the CPU) or :class:`.steps_torch.TorchSteps` (a Python loop of PyTorch operations, any device and dtype).

The input projection is one product over the (step, row) pairs the runs of steps compute, before the loop. With
``save=True`` the pass keeps what :meth:`LayerPass.backward` reads.
"""

from __future__ import annotations

import torch

from ...equations import gate_rows
from .runs import gather_runs, scatter_runs, step_runs


def _start_cell(slot: torch.Tensor, c_init: torch.Tensor | None) -> None:
    """Writes ``2 c_{-1}`` (the buffers hold doubled cell states) into ``slot`` [K, B, H]: zeros, or ``2 c_init``."""
    if c_init is None:
        slot.zero_()
    else:
        slot.copy_(c_init).mul_(2.0)


class LayerPass:
    """The geometry of one layer pass: x's shape [K, T, B, D], the gates of ``weight_hh`` [K, G, H], the runs of
    steps of ``batch_sizes``. :meth:`forward` runs the pass; :meth:`backward` needs only the geometry and what a
    saving forward returned, so the operator's backward rebuilds the geometry rather than keeping the object."""

    def __init__(self, x_shape, weight_hh: torch.Tensor, batch_sizes: list[int], symmetric: bool, steps_impl):
        dirs, steps, batch, _ = x_shape
        gates, hidden = weight_hh.shape[1:]
        levels = (gates - 4 * hidden) // 2
        self.shape = dirs, steps, batch, gates, hidden, levels, int(hidden // levels)
        self.symmetric, self.steps_impl, self.save = symmetric, steps_impl, False
        seg = self.segments = step_runs(batch_sizes)
        self.stop = seg[-1][2] if seg else 0  # steps with a running row
        self.rows_at = [rows for rows, start, end in seg for _ in range(start, end)]
        self.valid = None
        if batch_sizes and batch_sizes[-1] != batch:  # [T, B] bool: the row is running at that step
            device = weight_hh.device
            self.valid = torch.arange(batch, device=device) < torch.tensor(batch_sizes, device=device)[:, None]

    def forward(self, x, weight_ih, bias, weight_hh, save, h_init=None, c_init=None):
        """Runs the pass; returns ``(x as the pass read it (zero at padded steps), h [K, T, B, H], forget and input
        distances [K, T, B], the cell state after the last step [K, B, H] (zeros for a ragged batch), saved)``, ``saved`` the seven buffers the
        backward reads (``save=True``) or None. ``h_init, c_init``: the initial state [K, B, H] (None: zeros)."""
        dirs, steps, batch, gates, hidden, levels, chunk = self.shape
        self.save = save
        seg, stop = self.segments, self.stop
        rows = gate_rows(hidden, levels)
        new = x.new_empty
        if self.valid is not None:
            x = x.masked_fill(~self.valid[..., None], 0.0)  # padded steps run on zeros, whatever x holds there

        # doubled cell-candidate rows, negated input/forget rows (see .equations)
        scale = x.new_ones(gates, 1)
        scale[rows.cell : rows.input] = 2.0
        scale[rows.input :] = -1.0
        full = seg == [(batch, 0, steps)]
        acts = new(dirs, steps, batch, gates) if full else x.new_zeros(dirs, steps, batch, gates)  # pre-activations,
        # then every step's activations
        bias = (bias * scale[:, 0]).unsqueeze(1)
        project = self.steps_impl.projection(weight_ih, bias, scale)
        if full:  # in place
            project(x.reshape(dirs, -1, x.size(-1)), acts.view(dirs, -1, gates))
        else:
            inputs = gather_runs(x, seg)
            scatter_runs(project(inputs, inputs.new_empty(dirs, inputs.size(1), gates)), seg, acts)
        h = new(dirs, steps, batch, hidden)  # every running row written; the rest zeroed below
        # where every (step, row) is computed (a full batch) the buffers need no zeros; elsewhere the operator returns
        # them, so what no step writes is zero rather than left over
        fresh = new if full else x.new_zeros
        masters = fresh(dirs, steps, batch, 2, levels) if self.steps_impl.keeps_masters(save) else \
            new(dirs, batch, 2, levels)  # scratch that every step reuses
        if save:  # everything the backward reads
            cells = fresh(dirs, steps + 1, batch, 2, hidden)  # 2 [c^_t, c_{t-1}]: 2 c_t is written to [:, t + 1, :, 1]
            _start_cell(cells[:, 0, :, 1], c_init)
            cells[:, steps, :, 0].zero_()  # the one slot no step writes
            probs = fresh(dirs, steps, batch, 2, levels)  # [p_i, p_f]
            tanh_c, eff = fresh(dirs, steps, batch, hidden), fresh(dirs, steps, batch, 2, hidden)
            omega = fresh(dirs, steps, batch, levels)
            self.saved = (acts, masters, probs, cells, tanh_c, eff, omega)
        else:  # two cell slots, one written while the other is read
            cells = new(2, dirs, batch, 2, hidden)
            _start_cell(cells[0, :, :, 1], c_init)
            self.saved = None
        self.cells = cells

        d_forget, d_input = self.steps_impl.run_forward(self, acts, h, masters, fresh, weight_hh, scale, h_init)
        if self.valid is not None:
            h.masked_fill_(~self.valid[..., None], 0.0)  # also the rows a run never computed
            keep = self.valid.to(x.dtype)
            d_forget, d_input = d_forget * keep, d_input * keep
        # the cell state after the last step: the save buffer's slot after it, or the scratch slot it wrote (a ragged
        # batch has none: rows end at different steps)
        if self.valid is None:
            c_last = (cells[:, stop, :, 1] if save else cells[stop % 2, :, :, 1]) * 0.5
        else:
            c_last = x.new_zeros(dirs, batch, hidden)
        return x, h, d_forget, d_input, c_last, self.saved

    def backward(self, weight_hh, h, saved, grad_h, grad_forget, grad_input, grad_c_last=None):
        """dL/d(pre-activations) [K, T, B, G] from the gradients of the outputs (any of them None): h, the
        distances and the cell state after the last step (full batches). The gradient into the initial state is
        dropped (truncated back-propagation through time)."""
        dirs, steps, batch, gates, hidden, levels, chunk = self.shape
        seg, stop, valid = self.segments, self.stop, self.valid
        probs = saved[2]
        dtype, device = h.dtype, h.device

        d_pre = torch.empty_like(saved[0])
        for rows, start, end in seg:
            d_pre[:, start:end, rows:].zero_()  # rows a run never computed
        d_pre[:, stop:].zero_()
        # dL/dh_t from the output; the loop adds the recurrent part
        d_h = torch.zeros_like(h) if grad_h is None else grad_h.clone(memory_format=torch.contiguous_format)
        if grad_h is not None and valid is not None:
            d_h.masked_fill_(~valid[..., None], 0.0)

        # [i~, f~] -> dL/d[p_i, p_f] is dL/d[i~, f~] @ k, per pair member (l: level of i~ or f~, j: of p):
        # paper i~: -(l >= j); symmetric i~: (l <= j); f~: (l >= j). Then the softmax backward.
        lower = torch.ones(levels, levels, dtype=dtype, device=device).tril()
        k = torch.stack((lower.t() if self.symmetric else -lower, lower))  # [2, L, L]
        # the distances are means over levels: dL/d[i~, f~] = [g_input, -g_forget] / L at every level; the
        # softmax backward is linear, so their share of dL/d(master logits) is computed once for all steps
        d_logits_const = None
        if grad_forget is not None or grad_input is not None:
            zero = h.new_zeros(dirs, steps, batch)
            g = torch.stack((zero if grad_input is None else grad_input,
                             zero if grad_forget is None else -grad_forget), dim=-1) / levels  # [K, T, B, 2]
            if valid is not None:
                g = g * valid[..., None]
            d_logits_const = torch._softmax_backward_data(g.unsqueeze(-1) * k.sum(1), probs, 4, dtype)

        self.steps_impl.run_backward(self, weight_hh, saved, d_h, d_pre, d_logits_const, k, grad_c_last)
        return d_pre
