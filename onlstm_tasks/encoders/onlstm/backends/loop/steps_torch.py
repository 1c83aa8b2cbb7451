"""The ``torch`` steps of an ON-LSTM layer pass (:class:`TorchSteps`): a Python loop over the steps, each step's
recurrent product a ``baddbmm`` and its element-wise work whole-batch tensor operations.

It computes the update of :mod:`...equations` in its regrouped form, in the conventions (gate layout, doubled cell
state, negated input/forget rows) described there; the compiled steps (:mod:`.steps_compiled`) read and write the
same buffers. These run anywhere: any device and dtype (float64 among them), machines where the C++ kernels were
not built, GPUs without Triton.
"""

from __future__ import annotations

import torch

from ...equations import gate_rows
from .runs import PassLayout, alternating, pair_first, per_step, scratch_views


def forward_steps(layer: PassLayout, acts, h, masters):
    """The element-wise work of step t as PyTorch operations on whole-batch views: ``fn(t)``, run after step t's
    recurrent product has been added into ``acts``. Writes what the compiled loop writes (``csrc/onlstm_cpu.cpp``)."""
    dirs, steps, batch, gates, hidden, levels, chunk = layer.shape
    seg, new = layer.segments, acts.new_empty
    _, m0, o0, c0, _ = gate_rows(hidden, levels)  # first rows of the output, cell and input blocks
    if layer.save:
        acts, masters, probs, cells, tanh_c, eff, omega = layer.saved
        views = per_step
        c_hats, c_prevs = per_step(cells[..., 0, :], seg), per_step(cells[..., 1, :], seg)
        c_news = per_step(cells[..., 1, :], seg, offset=1)
    else:  # scratch reused at every step
        cells, probs = layer.cells, new(dirs, batch, 2, levels)
        tanh_c, eff, omega = new(dirs, batch, hidden), new(dirs, batch, 2, hidden), new(dirs, batch, levels)
        views = scratch_views
        c_hats, c_prevs = alternating(cells[..., 0, :], seg), alternating(cells[..., 1, :], seg)
        c_news = alternating(cells[..., 1, :], seg, offset=1)
    h_outs = per_step(h, seg)
    master_logits = per_step(acts[..., :m0].unflatten(-1, (2, levels)), seg)
    gate_acts, out_gates = per_step(acts[..., m0:], seg), per_step(acts[..., m0:o0], seg)
    sig_2g = per_step(acts[..., o0:c0], seg)
    one_minus_if = per_step(acts[..., c0:].unflatten(-1, (2, levels, chunk)), seg)  # [1 - i, 1 - f]
    ms, ms4, ps = per_step(masters, seg), per_step(masters.unsqueeze(-1), seg), views(probs, seg)
    mis, mfs = per_step(masters[..., 0, :], seg), per_step(masters[..., 1, :], seg)
    tcs, effs4 = views(tanh_c, seg), views(eff.unflatten(-1, (levels, chunk)), seg)
    eff_ins, eff_forgets = views(eff[..., 0, :], seg), views(eff[..., 1, :], seg)
    omegas, omegas4 = views(omega, seg), views(omega.unsqueeze(-2).unsqueeze(-1), seg)

    offset = torch.tensor([[1.0], [0.0]], dtype=acts.dtype, device=acts.device)
    sign = torch.tensor([[-1.0], [1.0]], dtype=acts.dtype, device=acts.device)
    minus_one, minus_two = (torch.tensor(v, dtype=acts.dtype, device=acts.device) for v in (-1.0, -2.0))
    symmetric = layer.symmetric

    def step(t: int) -> None:
        p = torch.softmax(master_logits[t], -1, out=ps[t])  # [K, n, 2, L]
        m = torch.addcmul(offset, p.cumsum(-1), sign, out=ms[t])  # [1 - cumsum(p_i), cumsum(p_f)]
        if symmetric:
            m.addcmul_(p, offset)  # i~ = reverse cumsum of p_i = 1 - cumsum(p_i) + p_i
        gate_acts[t].sigmoid_()  # o, sigmoid(2 g), 1 - i, 1 - f
        c_hat = torch.add(minus_two, sig_2g[t], alpha=4.0, out=c_hats[t])  # 2 tanh(g)
        torch.mul(mis[t], mfs[t], out=omegas[t])
        torch.addcmul(ms4[t], one_minus_if[t], omegas4[t], value=-1.0, out=effs4[t])  # [eff_in, eff_forget]
        c = torch.mul(c_prevs[t], eff_forgets[t], out=c_news[t])  # 2 c_t
        c.addcmul_(c_hat, eff_ins[t])
        tc = torch.sigmoid(c, out=tcs[t])
        torch.add(minus_one, tc, alpha=2.0, out=tc)  # tanh(c_t)
        torch.mul(out_gates[t], tc, out=h_outs[t])

    return step


def backward_steps(layer: PassLayout, saved, d_h, d_pre, d_logits_const, k, grad_c_last):
    """The element-wise backward of step t as PyTorch operations on whole-batch views: ``fn(t)``, run in reverse
    order of t once ``d_h[:, t]`` holds all of dL/dh_t; writes ``d_pre[:, t]``. ``d_logits_const``: the distances'
    share of dL/d(master logits) [K, T, B, 2, L] or None; ``k`` [2, L, L] maps dL/d[i~, f~] to dL/d[p_i, p_f]."""
    dirs, steps, batch, gates, hidden, levels, chunk = layer.shape
    seg, dtype = layer.segments, d_h.dtype
    acts, masters, probs, cells, tanh_c, eff, omega = saved
    _, m0, o0, c0, _ = gate_rows(hidden, levels)  # first rows of the output, cell and input blocks
    if d_logits_const is not None:
        d_logits_const = per_step(d_logits_const, seg, fn=pair_first)
    d_hs = per_step(d_h, seg)
    d_outs, d_cands = per_step(d_pre[..., m0:o0], seg), per_step(d_pre[..., o0:c0], seg)
    d_in_forgets = per_step(d_pre[..., c0:].unflatten(-1, (2, levels, chunk)), seg, fn=pair_first)
    d_master_logits = per_step(d_pre[..., :m0].unflatten(-1, (2, levels)), seg, fn=pair_first)
    out_gates, tcs = per_step(acts[..., m0:o0], seg), per_step(tanh_c, seg)
    c_hats = per_step(cells[..., 0, :], seg)
    cells_r = per_step(cells.unflatten(-1, (levels, chunk)), seg, fn=pair_first)  # [c^_t, c_{t-1}]
    effs_r = per_step(eff.unflatten(-1, (levels, chunk)), seg, fn=pair_first)
    one_minus_if_r = per_step(acts[..., c0:].unflatten(-1, (2, levels, chunk)), seg, fn=pair_first)
    # the cell buffer holds 2 c and 2 c^, so products with it are twice dL/d eff: halve w and the chunk sums
    omegas_r = per_step((omega * 0.5)[:, :, :, None, :, None], seg, fn=lambda b: b.transpose(2, 3))
    flipped_r = per_step(masters.flip(-2), seg, fn=pair_first)  # [f~, i~]
    ps_r = per_step(probs, seg, fn=pair_first)
    # per step, d_eff = dL/d[eff_in, eff_forget] and d_eff (1 - [i, f]) side by side, summed over each chunk in
    # one matrix-vector product (far cheaper than reductions over a last dimension of size C)
    scratch, halves = d_h.new_empty(4 * dirs * batch * hidden), d_h.new_full((chunk,), 0.5)
    sums_buf, d_c_chat = d_h.new_empty(4 * dirs * batch * levels), d_h.new_empty(dirs, 2, batch, hidden)
    per_rows = {}
    for rows, start, end in seg:
        pair = scratch[: 4 * dirs * rows * hidden].view(2, dirs, 2, rows, levels, chunk)
        prod = d_c_chat[:, :, :rows]  # [dL/dc^, dL/dc_{t-1}]
        per_rows[rows] = (*pair.unbind(0), pair.view(-1, chunk), sums_buf[: 4 * dirs * rows * levels],
                          sums_buf[: 4 * dirs * rows * levels].view(2, dirs, 2, rows, levels),
                          prod.unflatten(-1, (levels, chunk)), *prod.unbind(1))

    rows_at = layer.rows_at
    carry = grad_c_last  # dL/dc_t of the rows running at t + 1 (after the last step: of every row)

    def step(t: int) -> None:
        nonlocal carry
        n = rows_at[t]
        dh = d_hs[t]
        o, tc = out_gates[t], tcs[t]
        d_tc = dh * o
        u = d_tc * tc
        torch.addcmul(u, u, o, value=-1.0, out=d_outs[t])  # dh tanh(c) o (1 - o)
        if carry is not None:
            if carry.size(1) == n:
                d_tc += carry
            else:
                d_tc[:, : carry.size(1)] += carry
        dc = d_tc.addcmul_(u, tc, value=-1.0).view(dirs, 1, n, levels, chunk)  # + dh o (1 - tanh(c)^2)
        d_eff, d_eff_bar, pair, sums_flat, sums, prod, d_chat, carry = per_rows[n]  # views of scratch buffers
        torch.mul(dc, cells_r[t], out=d_eff)  # 2 dL/d[eff_in, eff_forget], [K, 2, n, L, C]
        torch.mul(dc, effs_r[t], out=prod)  # dL/dc^, dL/dc_{t-1}
        c_hat2 = c_hats[t]
        torch.addcmul(d_chat, d_chat * c_hat2, c_hat2, value=-0.25, out=d_cands[t])  # tanh'
        s_bar = one_minus_if_r[t]
        torch.mul(d_eff, s_bar, out=d_eff_bar)
        r = d_eff_bar * omegas_r[t]
        torch.addcmul(r, r, s_bar, value=-1.0, out=d_in_forgets[t])  # d_eff w s (1 - s)
        torch.mv(pair, halves, out=sums_flat)  # [sum over C of d_eff, of d_eff (1 - [i, f])]
        # eff = [i~, f~] - w (1 - [i, f]) with w = i~ f~
        dm = torch.addcmul(sums[0], flipped_r[t], sums[1].sum(1, keepdim=True), value=-1.0)  # dL/d[i~, f~]
        d_logits = torch._softmax_backward_data(torch.matmul(dm, k), ps_r[t], 3, dtype)
        if d_logits_const is None:
            d_master_logits[t].copy_(d_logits)
        else:
            torch.add(d_logits, d_logits_const[t], out=d_master_logits[t])

    return step


class TorchSteps:
    """The time loop of a pass as PyTorch operations (see :class:`.steps_compiled.CompiledSteps` for the interface)."""

    name = "torch"

    @staticmethod
    def why_not(x: torch.Tensor) -> str | None:
        return None

    @staticmethod
    def keeps_masters(save: bool) -> bool:
        return True  # every step's master gates: the distances are their means

    @staticmethod
    def projection(weight_ih, bias, scale):
        w_ih_t = (weight_ih * scale).transpose(1, 2)

        def project(inputs, out):
            return torch.baddbmm(bias, inputs, w_ih_t, out=out)

        return project

    @staticmethod
    def run_forward(layer, acts, h, masters, fresh, weight_hh, scale, h_init):
        seg, stop = layer.segments, layer.stop
        w_hh_t = (weight_hh * scale).transpose(1, 2)  # [K, H, G]
        if h_init is not None:  # step 0's recurrent term (the loop skips it: zero from a zero state)
            acts[:, 0].baddbmm_(h_init, w_hh_t)
        elementwise = forward_steps(layer, acts, h, masters)
        a_all, h_prevs = per_step(acts, seg), per_step(h, seg, offset=-1)
        for t in range(stop):
            if t:
                a_all[t].baddbmm_(h_prevs[t], w_hh_t)
            elementwise(t)
        means = masters.mean(-1)  # [K, T, B, 2]: mean i~, mean f~
        return 1.0 - means[..., 1], means[..., 0]

    @staticmethod
    def run_backward(layer, weight_hh, saved, d_h, d_pre, d_logits_const, k, grad_c_last):
        seg, stop, rows_at = layer.segments, layer.stop, layer.rows_at
        elementwise = backward_steps(layer, saved, d_h, d_pre, d_logits_const, k, grad_c_last)
        d_hs, d_pres = per_step(d_h, seg), per_step(d_pre, seg)
        for t in reversed(range(stop)):
            if t + 1 < stop:  # the recurrent part of dL/dh_t
                n, n_next = rows_at[t], rows_at[t + 1]
                (d_hs[t] if n_next == n else d_hs[t][:, :n_next]).baddbmm_(d_pres[t + 1], weight_hh)
            elementwise(t)

    @staticmethod
    def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)
