"""The fused back end of an ON-LSTM layer pass: each step's element-wise work as one function compiled by
``torch.compile`` (Inductor writes Triton kernels on a GPU, C++ on a CPU).

It fills the same buffers, in the same conventions (gate layout, doubled cell state, negated input/forget rows; see
:mod:`.equations`), as the PyTorch back end (:mod:`.steps_torch`), which issues about a dozen kernels per step in
the forward and twice that in the backward. Here a step is its recurrent product (``baddbmm``: cuBLAS on a GPU)
and one compiled call of :func:`_forward_cell` or :func:`_backward_cell`.

What keeps the compiled functions from recompiling step after step: they take fresh tensors (the recurrent
product's output, the previous step's results) or whole saved buffers with the step as a tensor, never
per-step views (whose storage offsets and bases ``torch.compile`` would guard on), and they return fresh tensors
that the pass stacks into its buffers once per run of steps (the backward's once per pass). Their sizes are
dynamic, so one compilation serves every batch, row count and layer size, apart from the compiler's own
specialisations (a size of 1, as in a unidirectional layer's one direction); they also specialise on the master
input variant, on whether the distances have a gradient, and on dtype and device.

Nothing reads a value back to the host: the loops are driven by the batch's run lengths, known before they start.
"""

from __future__ import annotations

import functools

import torch

from .runs import PassLayout


def _forward_cell(a: torch.Tensor, c_prev: torch.Tensor, levels: int, chunk: int, symmetric: bool):
    """One step's element-wise forward (that of :func:`.steps_torch.forward_steps`) from the pre-activations ``a``
    [K, n, G] (the recurrent product added) and the doubled cell state ``c_prev`` [K, n, H], ``levels`` levels of
``chunk`` neurons (ints: sizes derived by division would cost the compiler's shape reasoning). Returns ``a`` with its
    four H-blocks replaced by their sigmoids (as the backward reads them), h, the doubled c and c^, tanh(c)
    [K, n, H], p and [i~, f~] [K, n, 2, L], w = i~ f~ [K, n, L] and [eff_in, eff_forget] [K, n, 2, H]."""
    hidden = levels * chunk
    m0 = 2 * levels
    logits = a[..., :m0]
    p = torch.softmax(logits.unflatten(-1, (2, levels)), -1)
    cum = p.cumsum(-1)
    m_in = 1.0 - cum[..., 0, :]
    if symmetric:
        m_in = m_in + p[..., 0, :]  # the reverse cumulative sum of p_i
    m = torch.stack((m_in, cum[..., 1, :]), -2)  # [i~, f~]
    gates = torch.sigmoid(a[..., m0:])  # o, sigmoid(2 g), 1 - i, 1 - f
    out_gate, sig_2g = gates[..., :hidden], gates[..., hidden:2 * hidden]
    one_minus_if = gates[..., 2 * hidden:].unflatten(-1, (2, levels, chunk))
    c_hat = 4.0 * sig_2g - 2.0  # 2 tanh(g)
    w = m[..., 0, :] * m[..., 1, :]
    eff = m.unsqueeze(-1) - one_minus_if * w[..., None, :, None]  # [eff_in, eff_forget], [K, n, 2, L, C]
    c = c_prev * eff[..., 1, :, :].flatten(-2) + c_hat * eff[..., 0, :, :].flatten(-2)  # 2 c_t
    tanh_c = 2.0 * torch.sigmoid(c) - 1.0
    return torch.cat((logits, gates), -1), out_gate * tanh_c, c, c_hat, tanh_c, p, m, w, eff.flatten(-2)


def _backward_cell(dh, carry, t, acts, tanh_c, cells, eff, omega, masters, probs, k, const, levels, chunk):
    """One step's element-wise backward (that of :func:`.steps_torch.backward_steps`) for step ``t`` (a 0-d
    long tensor on the buffers' device: an int would be specialised on), every row. ``dh`` [K, B, H]: all of
    dL/dh_t; ``carry`` [K, B, H]: dL/dc_t from step
    t + 1 (zero for rows that end at t); the saved buffers whole (:attr:`.layer_pass.LayerPass.saved`), ``k``
    [2, L, L]; ``const`` [K, T, B, 2, L] or None: the distances' share of dL/d(master logits). Returns
    dL/d(pre-activations) [K, B, G] and dL/dc_{t-1} [K, B, H]."""
    hidden = levels * chunk

    def at(buf: torch.Tensor) -> torch.Tensor:  # step t, every row
        return buf.index_select(1, t.view(1)).squeeze(1)

    a_t = at(acts)
    m0 = 2 * levels
    out_gate = a_t[..., m0:m0 + hidden]
    one_minus_if = a_t[..., m0 + 2 * hidden:].unflatten(-1, (2, levels, chunk)).transpose(1, 2)  # [K, 2, n, L, C]
    cell_pair = at(cells).unflatten(-1, (levels, chunk)).transpose(1, 2)  # [c^_t, c_{t-1}], doubled
    eff_t = at(eff).unflatten(-1, (levels, chunk)).transpose(1, 2)  # [eff_in, eff_forget]
    tc = at(tanh_c)
    d_tc = dh * out_gate
    u = d_tc * tc
    d_out = u - u * out_gate  # dh tanh(c) o (1 - o)
    dc = (d_tc + carry - u * tc).unflatten(-1, (levels, chunk)).unsqueeze(1)  # dL/dc_t, [K, 1, n, L, C]
    d_eff = dc * cell_pair  # 2 dL/d[eff_in, eff_forget] (the buffers hold 2 c, 2 c^)
    prod = dc * eff_t  # [dL/dc^ (of 2 c^), dL/dc_{t-1}]
    d_chat = prod[:, 0].flatten(-2)
    c_hat = cell_pair[:, 0].flatten(-2)
    d_cand = d_chat - 0.25 * d_chat * c_hat * c_hat  # tanh'
    d_eff_bar = d_eff * one_minus_if
    r = d_eff_bar * (0.5 * at(omega)).unsqueeze(1).unsqueeze(-1)
    d_in_forget = (r - r * one_minus_if).transpose(1, 2).flatten(-3)  # d_eff w s (1 - s), [K, n, 2H]
    sums, sums_bar = 0.5 * d_eff.sum(-1), 0.5 * d_eff_bar.sum(-1)  # [K, 2, n, L]
    flipped = at(masters).flip(-2).transpose(1, 2)  # [f~, i~]
    dm = sums - flipped * sums_bar.sum(1, keepdim=True)  # dL/d[i~, f~] (eff = [i~, f~] - w (1 - [i, f]), w = i~ f~)
    g = torch.matmul(dm, k)  # dL/d[p_i, p_f]
    p = at(probs).transpose(1, 2)
    d_logits = p * (g - (g * p).sum(-1, keepdim=True))  # the softmax backward
    if const is not None:
        d_logits = d_logits + at(const).transpose(1, 2)
    d_pre = torch.cat((d_logits.transpose(1, 2).flatten(-2), d_out, d_cand, d_in_forget), -1)
    return d_pre, prod[:, 1].flatten(-2)


@functools.cache
def compiled(name: str):
    """``_forward_cell`` or ``_backward_cell``, compiled on first call (once per process and variant). Not
    ``fullgraph``: past ``torch._dynamo``'s recompile limit a call runs the same function eagerly instead of
    failing."""
    return torch.compile({"forward": _forward_cell, "backward": _backward_cell}[name], dynamic=True)


def _stack_into(buf: torch.Tensor, results: list[torch.Tensor], segments, offset: int = 0) -> None:
    """Writes the per-step results (``[K, n, ...]`` each, n the rows of the step's run) into ``buf`` [K, T, B, ...]
    at steps ``t + offset``, one copy per run of steps."""
    for rows, start, stop in segments:
        buf[:, start + offset:stop + offset, :rows] = torch.stack(results[start:stop], 1)


def forward_pass(layer: PassLayout, acts, h, masters, w_hh_t, h_init) -> None:
    """The forward time loop: step t's recurrent product, then its compiled element-wise work; fills ``h``,
    ``masters`` and (``layer.save``) the saved buffers, or the cell slot the pass reads ``c_last`` from."""
    seg, stop, rows_at = layer.segments, layer.stop, layer.rows_at
    levels, chunk = layer.shape[-2:]
    cell = compiled("forward")
    c_prev = (layer.saved[3][:, 0, :, 1] if layer.save else layer.cells[0, :, :, 1]).clone()
    h_prev = h_init
    outs: list[tuple[torch.Tensor, ...]] = []
    for t in range(stop):
        n = rows_at[t]
        a = acts[:, t, :n]
        a = a.clone() if h_prev is None else torch.baddbmm(a, h_prev[:, :n], w_hh_t)
        if c_prev.size(1) != n:
            c_prev = c_prev[:, :n].clone()
        result = cell(a, c_prev, levels, chunk, layer.symmetric)
        h_prev, c_prev = result[1], result[2]
        outs.append(result if layer.save else result[1:3] + (result[6],))
    if not stop:
        return
    columns = list(zip(*outs))
    if layer.save:
        acts_out, h_out, c_out, c_hat, tanh_c, p, m, w, eff = columns
        _, _, probs, cells, tanh_buf, eff_buf, omega = layer.saved
        for buf, results in ((acts, acts_out), (probs, p), (cells[..., 0, :], c_hat), (tanh_buf, tanh_c),
                             (eff_buf, eff), (omega, w)):
            _stack_into(buf, results, seg)
        _stack_into(cells[..., 1, :], c_out, seg, offset=1)
    else:
        h_out, c_out, m = columns
        layer.cells[stop % 2, :, :rows_at[-1], 1] = c_out[-1]  # where the pass reads the last cell state
    _stack_into(h, h_out, seg)
    _stack_into(masters, m, seg)


def backward_pass(layer: PassLayout, saved, d_h, d_pre, d_logits_const, k, grad_c_last, weight_hh) -> None:
    """The backward time loop, last step first: the recurrent part of dL/dh_t (``baddbmm``), then the compiled
    element-wise backward; fills ``d_pre`` [K, T, B, G].

    Every step runs on all B rows: a row that is not running at step t has no gradient there (dL/dh and dL/dc
    zero, the distances' share masked), so its dL/d(pre-activations) comes out exactly zero, as the pass wants it;
    on a GPU the few extra rows cost less than slicing would."""
    stop = layer.stop
    levels, chunk = layer.shape[-2:]
    cell = compiled("backward")
    acts, masters, probs, cells, tanh_c, eff, omega = saved
    carry = d_h.new_zeros(d_h[:, 0].shape) if grad_c_last is None else grad_c_last.clone()  # dL/dc_t from later
    d_next = None
    results: list[torch.Tensor | None] = [None] * stop
    # each step's index, a fresh tensor on the device (filled there: no copy from the host)
    index = [torch.full((), t, dtype=torch.long, device=d_h.device) for t in range(stop)]
    for t in reversed(range(stop)):
        dh = d_h[:, t].clone() if d_next is None else torch.baddbmm(d_h[:, t], d_next, weight_hh)
        d_next, carry = cell(dh, carry, index[t], acts, tanh_c, cells, eff, omega, masters, probs, k,
                             d_logits_const, levels, chunk)
        results[t] = d_next
    if stop:
        d_pre[:, :stop] = torch.stack(results, 1)
