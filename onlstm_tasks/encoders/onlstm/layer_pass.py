"""One ON-LSTM layer's forward and backward pass (see :mod:`.equations` for the maths, :mod:`.function` for the
conventions).

:class:`LayerPass` allocates the buffers and runs the time loop: on the whole-loop path one compiled call does
everything, input projection included (:meth:`.compiled.FusedSteps.run_all`); otherwise the input projection is one
product first, then each step's recurrent product runs here and its element-wise work in a back end (the compiled
step, :mod:`.compiled`, bound to the buffers here, when usable, else :mod:`.steps_torch`). With ``save=True`` it
keeps what its :meth:`LayerPass.backward` reads.
"""

from __future__ import annotations

import torch

from . import compiled
from . import steps_torch as torch_steps
from .equations import gate_rows
from .runs import PassLayout, gather_runs, per_step, scatter_runs, step_runs


def _start_cell(slot: torch.Tensor, c_init: torch.Tensor | None) -> None:
    """Writes ``2 c_{-1}`` (the buffers hold doubled cell states) into ``slot`` [K, B, H]: zeros, or ``2 c_init``."""
    if c_init is None:
        slot.zero_()
    else:
        slot.copy_(c_init).mul_(2.0)


def _project(acts: torch.Tensor, x: torch.Tensor, runs, product) -> None:
    """``acts = x W + bias`` ([K, T, B, G] from x [K, T, B, D]) at the (step, row) pairs the runs of steps compute,
    in one product, ``product(out [K, M, G], inputs [K, M, D])``; elsewhere ``acts`` keeps what it held. With
    ragged rows this skips most padded positions (a third of the product at NER's mixed lengths), as a packed
    sequence does."""
    dirs, steps, batch, gates = acts.shape
    if runs == [(batch, 0, steps)]:  # every row at every step: in place
        if acts.stride(2) > acts.stride(1):  # both batch-major (see LayerPass): rows in (row, step) order
            acts, x = acts.transpose(1, 2), x.transpose(1, 2)
        product(acts.reshape(dirs, -1, gates), x.reshape(dirs, -1, x.size(-1)))
    else:
        inputs = gather_runs(x, runs)
        out = acts.new_empty(dirs, inputs.size(1), gates)
        product(out, inputs)
        scatter_runs(out, runs, acts)


PROJECT_IN_LOOP = None  # None: decide by the sizes (project_in_loop); True / False: always / never (tests, benchmarks)
IN_LOOP_WEIGHT_BYTES = 1 << 20  # see project_in_loop


def project_in_loop(dirs: int, inputs: int, hidden: int, gates: int, threads: int | None = None) -> bool:
    """Whether the whole-loop path computes the input projection step by step inside the loop (with the recurrent
    product, in one pass over each step's pre-activations) rather than in one large product first.

    In the loop the projection shares the threads of the loop's pieces (a large product first is a phase of its own,
    which two threads speed up less) and skips a pass over memory, but every step reads the input weights again.
    So: when the input and recurrent weights one thread's piece reads each step (the directions it runs) take at
    most :data:`IN_LOOP_WEIGHT_BYTES`. Measured with scripts/benchmark_loop_choices.py on a 2-core AMD EPYC (512 KiB L2,
    32 MiB L3 shared with other tenants), since the projection first is the compiled product (compiled.project), in
    three runs: for NER layers of hidden 256 (1.6 MiB a direction) one large product first was within 4% of the loop
    either way on one thread and 1-4% faster on two; for bidirectional NER layers on one thread (both directions'
    weights, 3.2 MiB and more) 7-18% faster; for the language model's 1150-wide layers (30-44 MiB) 12-21% faster. The
    loop kept an edge of 2-6% for layers of 0.4 MiB (hidden 128; one run of a sweep)."""
    if PROJECT_IN_LOOP is not None:
        return PROJECT_IN_LOOP
    threads = torch.get_num_threads() if threads is None else threads
    per_thread = -(-dirs // max(1, min(threads, dirs)))  # directions one piece runs
    return per_thread * (inputs + hidden) * gates * 4 <= IN_LOOP_WEIGHT_BYTES


def _fused_forward_steps(layer: PassLayout, acts, h, masters, distances) -> compiled.FusedSteps:
    """The compiled step bound to the layer's buffers (see :mod:`.compiled`): ``fn(t, rows)`` runs step t's
    element-wise work as :func:`.steps_torch.forward_steps` does, writing the same buffers and the distances
    ``(forget, input)``; ``fn.run_all`` runs every step, recurrent products included."""
    dirs, steps, batch, gates, hidden, levels, chunk = layer.shape
    if layer.save:
        acts, masters, probs, cells, tanh_c, eff, omega = layer.saved
        c_slots = [(cells[..., 1, :], cells[:, 1:, :, 1])]
        saved = dict(prob=probs.flatten(-2), c_hat=cells[..., 0, :], omega=omega, eff=eff.flatten(-2),
                     tanh_c=tanh_c)
    else:  # two slots [K, B, H], one written while the other is read
        slots = layer.cells[..., 1, :].unbind(0)
        c_slots, saved = [(slots[0], slots[1]), (slots[1], slots[0])], None
    return compiled.FusedSteps(hidden=hidden, levels=levels, symmetric=layer.symmetric, act=acts, h=h,
                               master=masters.flatten(-2), c_slots=c_slots, saved=saved, distances=distances)


def _fused_backward_steps(layer: PassLayout, saved, d_h, d_pre, d_logits_const, k, grad_c_last):
    """The compiled step's backward bound to the layer's buffers: ``fn(t, rows, carry_rows)`` does what
    :func:`.steps_torch.backward_steps` does for step t; ``fn.run_all`` runs every step, recurrent products
    included."""
    dirs, steps, batch, gates, hidden, levels, chunk = layer.shape
    acts, masters, probs, cells, tanh_c, eff, omega = saved
    carry = d_h.new_empty(dirs, batch, hidden)  # dL/dc, updated in place from step to step
    if grad_c_last is not None:
        carry.copy_(grad_c_last)
    return compiled.FusedBackwardSteps(
        hidden=hidden, levels=levels, symmetric=layer.symmetric, d_h=d_h, act=acts, tanh_c=tanh_c,
        cells=cells.flatten(-2), eff=eff.flatten(-2), omega=omega, master=masters.flatten(-2),
        prob=probs.flatten(-2), d_pre=d_pre, carry=carry,
        d_const=None if d_logits_const is None else d_logits_const.flatten(-2))


class LayerPass:
    """The forward pass (run by the constructor) and, with ``save=True``, what the backward needs.

    ``h_init, c_init``: the initial state [K, B, H] (None: zeros, and step 0 skips the recurrent product), for full
    batches only.
    """

    def __init__(self, x, weight_ih, bias, weight_hh, batch_sizes, symmetric, save, h_init=None, c_init=None):
        dirs, steps, batch, _ = x.shape
        gates, hidden = weight_hh.shape[1:]
        levels = (gates - 4 * hidden) // 2
        chunk = hidden // levels
        self.shape = dirs, steps, batch, gates, hidden, levels, chunk
        self.symmetric, self.save = symmetric, save
        seg = self.segments = step_runs(batch_sizes)
        self.stop = stop = seg[-1][2]  # steps with a running row
        self.rows_at = [rows for rows, start, end in seg for _ in range(start, end)]
        rows = gate_rows(hidden, levels)
        new = x.new_empty
        self.valid = None
        if batch_sizes[-1] != batch:  # [T, B] bool: the row is running at that step
            self.valid = torch.arange(batch, device=x.device) < torch.tensor(batch_sizes, device=x.device)[:, None]
            x = x.masked_fill(~self.valid[..., None], 0.0)  # padded steps run on zeros, whatever x holds there
        self.x = x

        # doubled cell-candidate rows, negated input/forget rows (see the module docstring)
        scale = x.new_ones(gates, 1)
        scale[rows.cell : rows.input] = 2.0
        scale[rows.input :] = -1.0
        bias = bias * scale[:, 0]
        # x's rows lie batch-major (one direction's view of a full [B, T, D] batch): so do those of the
        # pre-activations (projected without reordering x) and of h (which [B, T, H] then views without a copy)
        batch_major = dirs == 1 and self.valid is None and x.stride(2) > x.stride(1)

        def step_buffer(n: int) -> torch.Tensor:  # [K, T, B, n], laid out as x; a tensor of its own, not a view
            if batch_major:
                return x.new_empty_strided((1, steps, batch, n), (steps * batch * n, n, steps * n, 1))
            return new(dirs, steps, batch, n)

        acts = step_buffer(gates)  # pre-activations, then every step's activations
        whole_loop = compiled.loop_usable(x)  # the whole time loop, recurrent products included, compiled
        in_loop = whole_loop and project_in_loop(dirs, x.size(-1), hidden, gates)  # the input projection too
        if whole_loop:  # the scaled input weights, packed for the compiled products (in the loop or first)
            w_ih = compiled.packed(weight_ih.transpose(1, 2), scale[:, 0])
        if not in_loop and whole_loop:  # the input projection first, in one compiled product
            _project(acts, x, seg, lambda out, inputs: compiled.project(out, inputs, w_ih, bias))
        elif not in_loop:  # the same through PyTorch's
            w_ih_t = (weight_ih * scale).transpose(1, 2)
            _project(acts, x, seg, lambda out, inputs: torch.baddbmm(bias.unsqueeze(1), inputs, w_ih_t, out=out))
        if not whole_loop:
            w_hh_t = (weight_hh * scale).transpose(1, 2)  # [K, H, G]
        h = step_buffer(hidden)  # not a view: callers may change it in place
        fused = compiled.usable(x)  # the compiled step (whole loop or per step), which also writes the distances
        if save or not fused:  # [i~, f~] of every step: the backward reads them, or the distances are their means
            masters = x.new_zeros(dirs, steps, batch, 2, levels)
        else:  # scratch that every step reuses
            masters = new(dirs, batch, 2, levels)
        distances = (x.new_zeros(dirs, steps, batch), x.new_zeros(dirs, steps, batch)) if fused else None
        if save:  # everything the backward reads
            cells = new(dirs, steps + 1, batch, 2, hidden)  # 2 [c^_t, c_{t-1}]: 2 c_t is written to [:, t + 1, :, 1]
            _start_cell(cells[:, 0, :, 1], c_init)
            probs = new(dirs, steps, batch, 2, levels)  # [p_i, p_f]
            tanh_c, eff = new(dirs, steps, batch, hidden), new(dirs, steps, batch, 2, hidden)
            omega = new(dirs, steps, batch, levels)
            self.saved = (acts, masters, probs, cells, tanh_c, eff, omega)
        else:  # two cell slots, one written while the other is read
            cells = new(2, dirs, batch, 2, hidden)
            _start_cell(cells[0, :, :, 1], c_init)
        self.cells = cells
        if whole_loop:
            inputs = dict(x=x, weight_ih=w_ih, bias=bias) if in_loop else {}
            _fused_forward_steps(self, acts, h, masters, distances).run_all(
                compiled.packed(weight_hh.transpose(1, 2), scale[:, 0]), self.rows_at, stop,
                h0=None if h_init is None else h_init.contiguous(), **inputs)
        else:
            if h_init is not None:  # step 0's recurrent term (the loop skips it: zero from a zero state)
                acts[:, 0].baddbmm_(h_init, w_hh_t)
            if fused:
                steps_fn, rows_at = _fused_forward_steps(self, acts, h, masters, distances), self.rows_at
                elementwise = lambda t: steps_fn(t, rows_at[t])  # noqa: E731
            else:
                elementwise = torch_steps.forward_steps(self, acts, h, masters)
            a_all, h_prevs = per_step(acts, seg), per_step(h, seg, offset=-1)
            for t in range(stop):
                if t:
                    a_all[t].baddbmm_(h_prevs[t], w_hh_t)
                elementwise(t)

        if distances is not None:
            d_forget, d_input = distances
        else:
            means = masters.mean(-1)  # [K, T, B, 2]: mean i~, mean f~
            d_forget, d_input = 1.0 - means[..., 1], means[..., 0]
        if self.valid is not None:
            h.masked_fill_(~self.valid[..., None], 0.0)  # also the rows a run never computed
            keep = self.valid.to(x.dtype)
            d_forget, d_input = d_forget * keep, d_input * keep
        self.outputs = h, d_forget, d_input

    def final_cell(self) -> torch.Tensor:
        """The cell state c [K, B, H] after the last step (a full batch's: rows that ended early have none), read
        from the buffers, which hold ``2 c``: the save buffer's slot after the last step, or the scratch slot the
        last step wrote (they alternate)."""
        cells, stop = self.cells, self.stop
        return (cells[:, stop, :, 1] if self.save else cells[stop % 2, :, :, 1]) * 0.5

    def backward(self, weight_hh, h, saved, grad_h, grad_forget, grad_input, grad_c_last=None):
        """dL/d(pre-activations) [K, T, B, G] from the gradients of the outputs (any of them None): h, the
        distances and, for a full batch, the cell state after the last step, and the bias gradient [K, G] where the
        compiled loop summed it on the way (else None). The gradient into the initial state is dropped."""
        dirs, steps, batch, gates, hidden, levels, chunk = self.shape
        seg, stop, valid = self.segments, self.stop, self.valid
        probs = saved[2]
        dtype, device = h.dtype, h.device

        d_pre = torch.empty_like(saved[0])  # laid out as the pre-activations (batch-major where they are)
        for rows, start, end in seg:
            d_pre[:, start:end, rows:].zero_()  # rows a run never computed
        d_pre[:, stop:].zero_()
        # dL/dh_t from the output; the loop adds the recurrent part
        d_h = torch.zeros_like(h) if grad_h is None else torch.empty_like(h).copy_(grad_h)
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
        if compiled.loop_usable(h):  # the whole time loop, recurrent products included, in compiled calls
            fused = _fused_backward_steps(self, saved, d_h, d_pre, d_logits_const, k, grad_c_last)
            d_bias = fused.run_all(compiled.packed(weight_hh), rows_at, stop, batch if grad_c_last is not None else 0)
            return d_pre, d_bias
        if compiled.usable(h):
            fused = _fused_backward_steps(self, saved, d_h, d_pre, d_logits_const, k, grad_c_last)
            last_carry = batch if grad_c_last is not None else 0
            elementwise = lambda t: fused(t, rows_at[t], rows_at[t + 1] if t + 1 < stop else last_carry)  # noqa: E731
        else:
            elementwise = torch_steps.backward_steps(self, saved, d_h, d_pre, d_logits_const, k, grad_c_last)
        d_hs, d_pres = per_step(d_h, seg), per_step(d_pre, seg)
        for t in reversed(range(stop)):
            if t + 1 < stop:  # the recurrent part of dL/dh_t
                n, n_next = rows_at[t], rows_at[t + 1]
                (d_hs[t] if n_next == n else d_hs[t][:, :n_next]).baddbmm_(d_pres[t + 1], weight_hh)
            elementwise(t)
        return d_pre, None
