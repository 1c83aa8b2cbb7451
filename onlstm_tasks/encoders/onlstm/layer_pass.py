"""One ON-LSTM layer's forward and backward pass over time-major, length-sorted inputs (see :mod:`.equations` for
the maths, :mod:`.backend_loop` for the back ends around it and "Padding" there).

:class:`LayerPass` allocates the buffers and runs the time loop in one of two ways that read and write the same
buffers in the same conventions:

- ``"compiled"``: the whole time loop, recurrent products included, in one call of the C++ kernels
  (``csrc/onlstm_cpu.cpp`` through :mod:`.native`; float32 on the CPU);
- ``"torch"``: a Python loop, each step's recurrent product a ``baddbmm`` and its element-wise work PyTorch
  operations on whole-batch views (:mod:`.steps_torch`); any device and dtype.

The input projection is one ``baddbmm`` over the (step, row) pairs the runs of steps compute, before the loop, in
both. With ``save=True`` the pass keeps what :meth:`LayerPass.backward` reads.
"""

from __future__ import annotations

import torch

from . import native
from . import steps_torch
from .equations import gate_rows
from .runs import gather_runs, per_step, scatter_runs, step_runs

LOOPS = ("compiled", "torch")


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

    def __init__(self, x_shape, weight_hh: torch.Tensor, batch_sizes: list[int], symmetric: bool, backend: str):
        if backend not in LOOPS:
            raise ValueError(f"backend must be one of {LOOPS}, got {backend!r}")
        dirs, steps, batch, _ = x_shape
        gates, hidden = weight_hh.shape[1:]
        levels = (gates - 4 * hidden) // 2
        self.shape = dirs, steps, batch, gates, hidden, levels, int(hidden // levels)
        self.symmetric, self.backend, self.save = symmetric, backend, False
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
        if self.backend == "compiled":  # the compiled product, on the scaled weights packed once
            def project(inputs, out):
                return native.product(out.copy_(bias.expand_as(out)), inputs, weight_ih, scale[:, 0], True)
        else:
            w_ih_t = (weight_ih * scale).transpose(1, 2)

            def project(inputs, out):
                return torch.baddbmm(bias, inputs, w_ih_t, out=out)
        if full:  # in place
            project(x.reshape(dirs, -1, x.size(-1)), acts.view(dirs, -1, gates))
        else:
            inputs = gather_runs(x, seg)
            scatter_runs(project(inputs, inputs.new_empty(dirs, inputs.size(1), gates)), seg, acts)
        h = new(dirs, steps, batch, hidden)  # every running row written; the rest zeroed below
        # where every (step, row) is computed (a full batch) the buffers need no zeros; elsewhere the operator returns
        # them, so what no step writes is zero rather than left over
        fresh = new if full else x.new_zeros
        masters = fresh(dirs, steps, batch, 2, levels) if save or self.backend != "compiled" else \
            new(dirs, batch, 2, levels)  # scratch that every compiled step reuses
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

        if self.backend == "compiled":
            d_forget, d_input = fresh(dirs, steps, batch), fresh(dirs, steps, batch)
            if save:
                c_prev, c_new, c_hat = cells[:, :-1, :, 1], cells[:, 1:, :, 1], cells[:, :-1, :, 0]
                extra = (probs.flatten(-2), c_hat, omega, eff.flatten(-2), tanh_c)
            else:
                c_prev, c_new, extra = cells[0, :, :, 1], cells[1, :, :, 1], (None,) * 5
            native.forward_loop(acts, h, masters.flatten(-2), c_prev, c_new, d_forget.unsqueeze(-1),
                                d_input.unsqueeze(-1), *extra, weight_hh.contiguous(), scale[:, 0].contiguous(),
                                None if h_init is None else h_init.contiguous(), self.rows_at, self.symmetric,
                                not save)
        else:
            w_hh_t = (weight_hh * scale).transpose(1, 2)  # [K, H, G]
            if h_init is not None:  # step 0's recurrent term (the loop skips it: zero from a zero state)
                acts[:, 0].baddbmm_(h_init, w_hh_t)
            elementwise = steps_torch.forward_steps(self, acts, h, masters)
            a_all, h_prevs = per_step(acts, seg), per_step(h, seg, offset=-1)
            for t in range(stop):
                if t:
                    a_all[t].baddbmm_(h_prevs[t], w_hh_t)
                elementwise(t)
            means = masters.mean(-1)  # [K, T, B, 2]: mean i~, mean f~
            d_forget, d_input = 1.0 - means[..., 1], means[..., 0]
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

        rows_at = self.rows_at
        if self.backend == "compiled":
            acts, masters, probs, cells, tanh_c, eff, omega = saved
            carry = d_h.new_zeros(dirs, batch, hidden)  # dL/dc, updated in place from step to step
            if grad_c_last is not None:
                carry.copy_(grad_c_last)
            native.backward_loop(d_h, acts, tanh_c, cells[:, :steps].flatten(-2), eff.flatten(-2), omega,
                                 masters.flatten(-2), probs.flatten(-2),
                                 None if d_logits_const is None else d_logits_const.flatten(-2), d_pre, carry,
                                 weight_hh.contiguous(), rows_at, batch if grad_c_last is not None else 0,
                                 self.symmetric)
            return d_pre
        elementwise = steps_torch.backward_steps(self, saved, d_h, d_pre, d_logits_const, k, grad_c_last)
        d_hs, d_pres = per_step(d_h, seg), per_step(d_pre, seg)
        for t in reversed(range(stop)):
            if t + 1 < stop:  # the recurrent part of dL/dh_t
                n, n_next = rows_at[t], rows_at[t + 1]
                (d_hs[t] if n_next == n else d_hs[t][:, :n_next]).baddbmm_(d_pres[t + 1], weight_hh)
            elementwise(t)
        return d_pre
