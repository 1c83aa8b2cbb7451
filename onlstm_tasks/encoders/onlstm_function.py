"""One ON-LSTM layer (one direction, or both side by side) as a single autograd node with a hand-written backward.

The forward computes the input projection of every step in one matmul, then runs the time loop writing each
step's activations in place into preallocated buffers. The backward walks the steps in reverse carrying only
``dL/dc`` and ``dL/dh``, writes each step's ``dL/d(pre-activation)`` into one [K, T, B, G] tensor and ends with three
big matmuls (``dW_hh``, ``dW_ih``, ``dx``). Without gradients the loop runs on scratch buffers and saves nothing.
Every step is a handful of whole-batch tensor operations, so the Python loop costs little next to them.

Gate rows (see :class:`ONLSTMCell`), ``L`` levels of ``C`` neurons each, ``H = L * C``:

    [ master input (L) | master forget (L) | output (H) | cell (H) | input (H) | forget (H) ]

Per step, with ``p_i, p_f`` the softmaxes of the master logits, ``i~ = 1 - cumsum(p_i)`` (paper) or
``1 - cumsum(p_i) + p_i`` (symmetric: the reverse cumulative sum), ``f~ = cumsum(p_f)`` and ``w = i~ f~`` (per
level, broadcast over the level's C neurons):

    eff_in = i~ - w (1 - i),   eff_forget = f~ - w (1 - f),   c_t = eff_forget c_{t-1} + eff_in c^,   h_t = o tanh(c_t)

which is the paper's ``w (f c + i c^) + (f~ - w) c + (i~ - w) c^`` regrouped. Three rewrites each save a pass over
memory per step: the cell-candidate rows of the weights are doubled and the input/forget rows negated, so that one
``sigmoid`` over all four gate blocks yields ``o``, ``sigmoid(2 g)`` and ``1 - i``, ``1 - f`` directly; and the cell
state is kept doubled (``2 c``, ``2 c^``), so that ``tanh(c) = 2 sigmoid(2 c) - 1`` (several times faster than
``tanh`` on CPU) needs no extra multiply.

Two back ends run a step's element-wise work (after its recurrent product, which is always a PyTorch ``baddbmm``):
PyTorch operations on whole-batch views (``_torch_steps``, ``_torch_backward_steps``), or one call of the
compiled step (``_onlstm_step.c`` through :mod:`.fused_step`) for float32 on the CPU when it was built. They read
and write the same buffers in the same conventions; the compiled one makes inference 15-20% faster and training
10-20% faster at NER shapes (scripts/benchmark_encoders.py prints both).

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

from typing import NamedTuple

import torch
from torch.autograd.function import once_differentiable

from . import fused_step

SHRINK = 0.75


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
    """
    if not batch_sizes or batch_sizes[0] == 0:  # nothing to run (an empty batch or sequence)
        dirs, steps, batch, _ = x.shape
        zeros = x.new_zeros(dirs, steps, batch)
        return x.new_zeros(dirs, steps, batch, weight_hh.size(-1)), zeros, zeros.clone()
    if torch.is_grad_enabled() and any(t.requires_grad for t in (x, weight_ih, bias, weight_hh)):
        return ONLSTMLayerFunction.apply(x, weight_ih, bias, weight_hh, batch_sizes, symmetric)
    with torch.no_grad():
        return _Layer(x, weight_ih, bias, weight_hh, batch_sizes, symmetric, save=False).outputs


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
            layer = _Layer(x, weight_ih, bias, weight_hh, [batch] * steps, symmetric, save=False,
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
        layer = _Layer(x, weight_ih, bias, weight_hh, batch_sizes, symmetric, save=True)
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
        layer = _Layer(x, weight_ih, bias, weight_hh, [batch] * steps, symmetric, save=True, h_init=h0, c_init=c0)
        c_last = layer.final_cell()
        return (*_keep_for_backward(ctx, layer, weight_ih, weight_hh, h0), c_last)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_h, grad_forget, grad_input, grad_c_last):
        return *_parameter_grads(ctx, grad_h, grad_forget, grad_input, grad_c_last), None, None, None


def _keep_for_backward(ctx, layer: _Layer, weight_ih, weight_hh, h0):
    """Saves what the backward of a layer Function reads and returns the layer's outputs."""
    outputs = layer.outputs
    ctx.save_for_backward(layer.x, weight_ih, weight_hh, outputs[0], h0, *layer.saved)
    layer.outputs = layer.x = layer.saved = layer.cells = None  # saved above, with checks against later in-place
    # changes (outputs kept on ctx directly would also make a reference cycle through their grad_fn)
    ctx.layer = layer
    ctx.set_materialize_grads(False)
    return outputs


def _parameter_grads(ctx, grad_h, grad_forget, grad_input, grad_c_last=None):
    """The gradients of a layer Function's ``(x, weight_ih, bias, weight_hh)`` (None where not needed)."""
    x, weight_ih, weight_hh, h, h0, *saved = ctx.saved_tensors  # x: zero at padded steps
    d_pre = ctx.layer.backward(weight_hh, h, saved, grad_h, grad_forget, grad_input, grad_c_last)  # [K, T, B, G]
    dirs, gates = d_pre.size(0), d_pre.size(-1)
    flat = d_pre.view(dirs, -1, gates)
    need = ctx.needs_input_grad
    d_x = torch.bmm(flat, weight_ih).view(x.shape) if need[0] else None
    d_weight_ih = torch.bmm(flat.transpose(1, 2), x.reshape(dirs, -1, x.size(-1))) if need[1] else None
    d_bias = flat.sum(1) if need[2] else None
    d_weight_hh = None
    if need[3]:  # step t reads h_{t-1}; from a zero state h_{-1} contributes nothing
        d_weight_hh = torch.bmm(d_pre[:, 1:].reshape(dirs, -1, gates).transpose(1, 2),
                                h[:, :-1].reshape(dirs, -1, h.size(-1)))
        if h0 is not None:
            d_weight_hh.baddbmm_(d_pre[:, 0].transpose(1, 2), h0)
    return d_x, d_weight_ih, d_bias, d_weight_hh


def _segments(batch_sizes: list[int]) -> list[tuple[int, int, int]]:
    """Runs of steps ``(rows, start, stop)`` computed on the first ``rows`` rows (see the module docstring)."""
    segments: list[list[int]] = []
    for t, n in enumerate(batch_sizes):
        if n == 0:
            break
        if segments and n > SHRINK * segments[-1][0]:
            segments[-1][2] = t + 1
        else:
            segments.append([n, t, t + 1])
    return [(rows, start, stop) for rows, start, stop in segments]


def _per_step(buf: torch.Tensor, segments, offset: int = 0, fn=None) -> list[torch.Tensor | None]:
    """For every step t the view ``buf[:, t + offset, :rows]`` of a [K, T, B, ...] buffer (``fn`` applied to each
    run's [K, steps, rows, ...] block first; None before the first step). Made in bulk: slicing in the loop
    costs more."""
    views: list[torch.Tensor | None] = []
    for rows, start, stop in segments:
        first = start + offset
        if first < 0:
            views.extend([None] * -first)
            first = 0
        block = buf[:, first : stop + offset, :rows]
        views.extend((block if fn is None else fn(block)).unbind(1))
    return views


def _scratch(buf: torch.Tensor, segments) -> list[torch.Tensor]:
    """The same scratch buffer ``buf[:, :rows]`` (``buf`` [K, B, ...]) for every step."""
    views: list[torch.Tensor] = []
    for rows, start, stop in segments:
        views.extend([buf[:, :rows]] * (stop - start))
    return views


def _alternating(buf: torch.Tensor, segments, offset: int = 0) -> list[torch.Tensor]:
    """``buf[(t + offset) % 2, :, :rows]`` for every step t: two scratch slots, one written while the other is read."""
    views: list[torch.Tensor] = []
    for rows, start, stop in segments:
        slots = buf[:, :, :rows].unbind(0)
        views.extend(slots[(t + offset) % 2] for t in range(start, stop))
    return views


def _start_cell(slot: torch.Tensor, c_init: torch.Tensor | None) -> None:
    """Writes ``2 c_{-1}`` (the buffers hold doubled cell states) into ``slot`` [K, B, H]: zeros, or ``2 c_init``."""
    if c_init is None:
        slot.zero_()
    else:
        slot.copy_(c_init).mul_(2.0)


def _pair_first(block: torch.Tensor) -> torch.Tensor:
    """[K, steps, n, 2, ...] -> [K, steps, 2, n, ...] (a view): the input/forget pair before the rows."""
    return block.transpose(2, 3)


def _torch_steps(layer: _Layer, acts, h, masters):
    """The element-wise work of step t as PyTorch operations on whole-batch views: ``fn(t)``, run after step t's
    recurrent product has been added into ``acts``. Writes what the compiled step writes (see ``_onlstm_step.c``)."""
    dirs, steps, batch, gates, hidden, levels, chunk = layer.shape
    seg, new = layer.segments, acts.new_empty
    m0, o0, c0 = 2 * levels, 2 * levels + hidden, 2 * levels + 2 * hidden
    if layer.save:
        acts, masters, probs, cells, tanh_c, eff, omega = layer.saved
        views = _per_step
        c_hats, c_prevs = _per_step(cells[..., 0, :], seg), _per_step(cells[..., 1, :], seg)
        c_news = _per_step(cells[..., 1, :], seg, offset=1)
    else:  # scratch reused at every step
        cells, probs = layer.cells, new(dirs, batch, 2, levels)
        tanh_c, eff, omega = new(dirs, batch, hidden), new(dirs, batch, 2, hidden), new(dirs, batch, levels)
        views = _scratch
        c_hats, c_prevs = _alternating(cells[..., 0, :], seg), _alternating(cells[..., 1, :], seg)
        c_news = _alternating(cells[..., 1, :], seg, offset=1)
    h_outs = _per_step(h, seg)
    master_logits = _per_step(acts[..., :m0].unflatten(-1, (2, levels)), seg)
    gate_acts, out_gates = _per_step(acts[..., m0:], seg), _per_step(acts[..., m0:o0], seg)
    sig_2g = _per_step(acts[..., o0:c0], seg)
    one_minus_if = _per_step(acts[..., c0:].unflatten(-1, (2, levels, chunk)), seg)  # [1 - i, 1 - f]
    ms, ms4, ps = _per_step(masters, seg), _per_step(masters.unsqueeze(-1), seg), views(probs, seg)
    mis, mfs = _per_step(masters[..., 0, :], seg), _per_step(masters[..., 1, :], seg)
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


def _fused_steps(layer: _Layer, acts, h, masters):
    """The element-wise work of step t as one call of the compiled step (see :mod:`.fused_step`); ``fn(t)`` as
    :func:`_torch_steps`, writing the same buffers."""
    dirs, steps, batch, gates, hidden, levels, chunk = layer.shape
    if layer.save:
        acts, masters, probs, cells, tanh_c, eff, omega = layer.saved
        c_slots = [(cells[..., 1, :], cells[:, 1:, :, 1])]
        saved = dict(prob=probs.flatten(-2), c_hat=cells[..., 0, :], omega=omega, eff=eff.flatten(-2),
                     tanh_c=tanh_c)
    else:  # two slots [K, B, H], one written while the other is read
        slots = layer.cells[..., 1, :].unbind(0)
        c_slots, saved = [(slots[0], slots[1]), (slots[1], slots[0])], None
    steps_fn = fused_step.FusedSteps(hidden=hidden, levels=levels, symmetric=layer.symmetric, act=acts, h=h,
                                     master=masters.flatten(-2), c_slots=c_slots, saved=saved)
    rows_at = layer.rows_at
    return lambda t: steps_fn(t, rows_at[t])


def _torch_backward_steps(layer: _Layer, saved, d_h, d_pre, d_logits_const, k, grad_c_last):
    """The element-wise backward of step t as PyTorch operations on whole-batch views: ``fn(t)``, run in reverse
    order of t once ``d_h[:, t]`` holds all of dL/dh_t; writes ``d_pre[:, t]``. ``d_logits_const``: the distances'
    share of dL/d(master logits) [K, T, B, 2, L] or None; ``k`` [2, L, L] maps dL/d[i~, f~] to dL/d[p_i, p_f]."""
    dirs, steps, batch, gates, hidden, levels, chunk = layer.shape
    seg, dtype = layer.segments, d_h.dtype
    acts, masters, probs, cells, tanh_c, eff, omega = saved
    m0, o0, c0 = 2 * levels, 2 * levels + hidden, 2 * levels + 2 * hidden
    if d_logits_const is not None:
        d_logits_const = _per_step(d_logits_const, seg, fn=_pair_first)
    pair_first = _pair_first
    d_hs = _per_step(d_h, seg)
    d_outs, d_cands = _per_step(d_pre[..., m0:o0], seg), _per_step(d_pre[..., o0:c0], seg)
    d_in_forgets = _per_step(d_pre[..., c0:].unflatten(-1, (2, levels, chunk)), seg, fn=pair_first)
    d_master_logits = _per_step(d_pre[..., :m0].unflatten(-1, (2, levels)), seg, fn=pair_first)
    out_gates, tcs = _per_step(acts[..., m0:o0], seg), _per_step(tanh_c, seg)
    c_hats = _per_step(cells[..., 0, :], seg)
    cells_r = _per_step(cells.unflatten(-1, (levels, chunk)), seg, fn=pair_first)  # [c^_t, c_{t-1}]
    effs_r = _per_step(eff.unflatten(-1, (levels, chunk)), seg, fn=pair_first)
    one_minus_if_r = _per_step(acts[..., c0:].unflatten(-1, (2, levels, chunk)), seg, fn=pair_first)
    # the cell buffer holds 2 c and 2 c^, so products with it are twice dL/d eff: halve w and the chunk sums
    omegas_r = _per_step((omega * 0.5)[:, :, :, None, :, None], seg, fn=lambda b: b.transpose(2, 3))
    flipped_r = _per_step(masters.flip(-2), seg, fn=pair_first)  # [f~, i~]
    ps_r = _per_step(probs, seg, fn=pair_first)
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


def _fused_backward_steps(layer: _Layer, saved, d_h, d_pre, d_logits_const, k, grad_c_last):
    """:func:`_torch_backward_steps` as one call of the compiled step's backward per step."""
    dirs, steps, batch, gates, hidden, levels, chunk = layer.shape
    acts, masters, probs, cells, tanh_c, eff, omega = saved
    carry = d_h.new_empty(dirs, batch, hidden)  # dL/dc, updated in place from step to step
    if grad_c_last is not None:
        carry.copy_(grad_c_last)
    backward = fused_step.FusedBackwardSteps(
        hidden=hidden, levels=levels, symmetric=layer.symmetric, d_h=d_h, act=acts, tanh_c=tanh_c,
        cells=cells.flatten(-2), eff=eff.flatten(-2), omega=omega, master=masters.flatten(-2),
        prob=probs.flatten(-2), d_pre=d_pre, carry=carry,
        d_const=None if d_logits_const is None else d_logits_const.flatten(-2))
    rows_at, stop = layer.rows_at, layer.stop
    last_carry = batch if grad_c_last is not None else 0
    return lambda t: backward(t, rows_at[t], rows_at[t + 1] if t + 1 < stop else last_carry)


def _project(acts: torch.Tensor, x: torch.Tensor, w_t: torch.Tensor, bias: torch.Tensor, segments) -> None:
    """``acts = x @ w_t + bias`` ([K, T, B, G] from x [K, T, B, D]) at the (step, row) pairs the runs of steps
    compute; elsewhere ``acts`` keeps what it held. With ragged rows this skips most padded positions (a third of
    the product at NER's mixed lengths), as a packed sequence does."""
    dirs, gates = acts.size(0), acts.size(-1)
    if len(segments) == 1 and segments[0][0] == x.size(2):  # one run over every row: one product, in place
        rows, start, stop = segments[0]
        torch.baddbmm(bias, x[:, start:stop].reshape(dirs, -1, x.size(-1)), w_t,
                      out=acts[:, start:stop].view(dirs, -1, gates))
        return
    for rows, start, stop in segments:
        block = torch.baddbmm(bias, x[:, start:stop, :rows].reshape(dirs, -1, x.size(-1)), w_t)
        acts[:, start:stop, :rows] = block.view(dirs, stop - start, rows, gates)


class _Layer:
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
        seg = self.segments = _segments(batch_sizes)
        self.stop = stop = seg[-1][2]  # steps with a running row
        self.rows_at = [rows for rows, start, end in seg for _ in range(start, end)]
        m0, o0, c0 = 2 * levels, 2 * levels + hidden, 2 * levels + 2 * hidden
        new = x.new_empty
        self.valid = None
        if batch_sizes[-1] != batch:  # [T, B] bool: the row is running at that step
            self.valid = torch.arange(batch, device=x.device) < torch.tensor(batch_sizes, device=x.device)[:, None]
            x = x.masked_fill(~self.valid[..., None], 0.0)  # padded steps run on zeros, whatever x holds there
        self.x = x

        # doubled cell-candidate rows, negated input/forget rows (see the module docstring)
        scale = x.new_ones(gates, 1)
        scale[o0:c0] = 2.0
        scale[c0:] = -1.0
        w_hh_t = (weight_hh * scale).transpose(1, 2)  # [K, H, G]
        acts = new(dirs, steps, batch, gates)  # pre-activations from the input, then every step's activations
        _project(acts, x, (weight_ih * scale).transpose(1, 2), (bias * scale[:, 0]).unsqueeze(1), seg)
        h = new(dirs, steps, batch, hidden)
        masters = x.new_zeros(dirs, steps, batch, 2, levels)  # [i~, f~]
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
        elementwise = (_fused_steps if fused_step.usable(x) else _torch_steps)(self, acts, h, masters)

        a_all, h_prevs = _per_step(acts, seg), _per_step(h, seg, offset=-1)
        if h_init is not None:  # step 0's recurrent term (the loop skips it: zero from a zero state)
            a_all[0].baddbmm_(h_init, w_hh_t)
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
        self.outputs = h, d_forget, d_input

    def final_cell(self) -> torch.Tensor:
        """The cell state c [K, B, H] after the last step (a full batch's: rows that ended early have none), read
        from the buffers, which hold ``2 c``: the save buffer's slot after the last step, or the scratch slot the
        last step wrote (they alternate)."""
        cells, stop = self.cells, self.stop
        return (cells[:, stop, :, 1] if self.save else cells[stop % 2, :, :, 1]) * 0.5

    def backward(self, weight_hh, h, saved, grad_h, grad_forget, grad_input, grad_c_last=None):
        """dL/d(pre-activations) [K, T, B, G] from the gradients of the outputs (any of them None): h, the
        distances and, for a full batch, the cell state after the last step. The gradient into the initial state
        is dropped."""
        dirs, steps, batch, gates, hidden, levels, chunk = self.shape
        seg, stop, valid = self.segments, self.stop, self.valid
        probs = saved[2]
        dtype, device = h.dtype, h.device

        d_pre = h.new_empty(dirs, steps, batch, gates)
        for rows, start, end in seg:
            d_pre[:, start:end, rows:].zero_()  # rows a run never computed
        d_pre[:, stop:].zero_()
        # dL/dh_t from the output; the loop adds the recurrent part
        d_h = h.new_zeros(h.shape) if grad_h is None else h.new_empty(h.shape).copy_(grad_h)
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

        elementwise = (_fused_backward_steps if fused_step.usable(h) else _torch_backward_steps)(
            self, saved, d_h, d_pre, d_logits_const, k, grad_c_last)
        d_hs, d_pres = _per_step(d_h, seg), _per_step(d_pre, seg)
        rows_at = self.rows_at
        for t in reversed(range(stop)):
            if t + 1 < stop:  # the recurrent part of dL/dh_t
                n, n_next = rows_at[t], rows_at[t + 1]
                (d_hs[t] if n_next == n else d_hs[t][:, :n_next]).baddbmm_(d_pres[t + 1], weight_hh)
            elementwise(t)
        return d_pre
