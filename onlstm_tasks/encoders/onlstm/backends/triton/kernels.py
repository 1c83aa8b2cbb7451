"""The ON-LSTM layer's time loop as Triton kernels that split every step over many programs, forward and backward
(imported only where the ``triton`` back end runs: :mod:`.launcher` launches them).

The grid is ``(directions, level blocks, batch tiles)``. A program owns ``LB`` whole levels of a direction, that is
the ``LB * C`` neurons of those levels (all four of their gate rows), for a tile of ``BB`` batch rows (all the rows
of a batch up to 64: one matrix product per step with M = B). Per step it streams only its own slice of ``W_hh``
(its neurons' gate rows, and in the forward its levels' master rows), so a step's work is spread over
``directions x levels / LB x tiles`` programs instead of one per direction and 16 rows.

The programs exchange, through global memory (L2), what a step needs from all of them:

- forward, two half-steps per step: (A) each program adds ``h_{t-1} W_hh`` to its levels' master logits; (B) each
  program reads every level's logits (a few values a row), computes the softmax and cumsum of the master gates
  (redundantly: ``[BB, L]`` values), and updates its neurons' gates, ``c_t`` and ``h_t``;
- backward, one step each: every program reads the per-level sums of the master gates' gradients of step ``t + 1``
  (each program wrote its own levels' sums), computes that step's master logits' gradients (redundantly), then
  ``dL/dh_t`` of its neurons (``dL/dpre_{t+1} W_hh``, only its neurons' columns of ``W_hh``), their gates'
  gradients, the carried ``dL/dc`` and its levels' sums for the step before.

Between two exchanges every program must have finished: with ``PERSISTENT`` (a GPU where the whole grid is
resident at once), one launch runs every step and the programs meet at a grid-wide barrier (an atomic counter in
global memory) after each half-step; otherwise (Triton's interpreter, which runs programs one after another, or a
grid larger than the GPU) the launcher runs one launch per half-step (``u_begin, u_end``) and the launches order
the exchange. The kernel code is the same in both.

Row b's steps run over its own length: left to right from position 0, or (direction 1) right to left from position
``length - 1``; past its end a row writes nothing (the outputs are zero there). The recurrent products use
``PRECISION`` (``tf32`` or ``ieee``) with float32 accumulation; per-level values reach their neurons, and
per-neuron sums their levels, by selections over the program's ``LB`` levels (exact).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def _tanh(x):
    return 2.0 * _sigmoid(2.0 * x) - 1.0


@triton.jit
def _softmax(logits):
    top = tl.max(logits, 1)
    e = tl.exp(logits - top[:, None])
    return e / tl.sum(e, 1)[:, None]


@triton.jit
def _masters(logit_i, logit_f, lv_ok, SYMMETRIC: tl.constexpr):
    """Softmax probabilities and master gates ``(p_i, p_f, i~, f~)`` from the master logits ``[BB, LP]``."""
    p_i = _softmax(tl.where(lv_ok[None, :], logit_i, float("-inf")))
    p_f = _softmax(tl.where(lv_ok[None, :], logit_f, float("-inf")))
    master_f = tl.cumsum(p_f, 1)
    master_i = 1.0 - tl.cumsum(p_i, 1)
    if SYMMETRIC:
        master_i += p_i  # the reverse cumulative sum
    return p_i, p_f, master_i, master_f


@triton.jit
def _load_logits(acts_row, ok, lv, L: tl.constexpr):
    logit_i = tl.load(acts_row[:, None] + lv[None, :], mask=ok, other=0.0, cache_modifier=".cg")
    logit_f = tl.load(acts_row[:, None] + L + lv[None, :], mask=ok, other=0.0, cache_modifier=".cg")
    return logit_i, logit_f


@triton.jit
def _own_masters(logit_i, logit_f, lv, lv_ok, p, lane_level, LB: tl.constexpr, SYMMETRIC: tl.constexpr):
    """``(i~, f~)`` of this program's neurons ``[BB, BN]``, each its level's value, from every level's master logits
    ``[BB, LP]``: per level of the program, a sum of the softmax's terms up to it (no cumsum over all levels)."""
    e_i = tl.exp(tl.where(lv_ok[None, :], logit_i, float("-inf")) - tl.max(tl.where(lv_ok[None, :], logit_i,
                                                                                      float("-inf")), 1)[:, None])
    e_f = tl.exp(tl.where(lv_ok[None, :], logit_f, float("-inf")) - tl.max(tl.where(lv_ok[None, :], logit_f,
                                                                                      float("-inf")), 1)[:, None])
    total_i = tl.sum(e_i, 1)
    total_f = tl.sum(e_f, 1)
    m_i = tl.zeros([logit_i.shape[0], lane_level.shape[0]], dtype=tl.float32)
    m_f = tl.zeros([logit_i.shape[0], lane_level.shape[0]], dtype=tl.float32)
    for j in tl.static_range(LB):
        level = p * LB + j
        if SYMMETRIC:  # the reverse cumulative sum: the terms from this level on
            column_i = tl.sum(tl.where(lv[None, :] >= level, e_i, 0.0), 1) / total_i
        else:  # 1 - the cumulative sum
            column_i = 1.0 - tl.sum(tl.where(lv[None, :] <= level, e_i, 0.0), 1) / total_i
        column_f = tl.sum(tl.where(lv[None, :] <= level, e_f, 0.0), 1) / total_f
        m_i = tl.where(lane_level[None, :] == j, column_i[:, None], m_i)
        m_f = tl.where(lane_level[None, :] == j, column_f[:, None], m_f)
    return m_i, m_f


@triton.jit
def _grid_sync(counter_ptr, target):
    """Wait until ``target`` arrivals are counted: every program arrives once per barrier (a scalar atomic is done
    once per program), releasing its writes before and acquiring the others' after."""
    tl.debug_barrier()
    tl.atomic_add(counter_ptr, 1, sem="release", scope="gpu")
    seen = tl.atomic_add(counter_ptr, 0, sem="acquire", scope="gpu")
    while seen < target:
        seen = tl.atomic_add(counter_ptr, 0, sem="acquire", scope="gpu")
    tl.debug_barrier()


@triton.jit
def _tile(lengths_ptr, B, BB: tl.constexpr):
    """This program's direction, level block, rows and their lengths."""
    rows = tl.program_id(2) * BB + tl.arange(0, BB)
    row_ok = rows < B
    lengths = tl.load(lengths_ptr + rows, mask=row_ok, other=0)
    return tl.program_id(0), tl.program_id(1), rows, row_ok, lengths


@triton.jit
def _neurons(p, L: tl.constexpr, C: tl.constexpr, LB: tl.constexpr, CP: tl.constexpr, BN: tl.constexpr):
    """The neurons of level block ``p`` (``BN = LB * CP`` lanes, ``CP`` per level, the last ``CP - C`` masked), the
    level of each among the block's ``LB``, and which lanes are neurons."""
    lane = tl.arange(0, BN)
    level = p * LB + lane // CP
    within = lane % CP
    return level * C + within, lane // CP, (within < C) & (level < L)


@triton.jit
def _step(d, s, rows, row_ok, lengths):
    """Which rows run step s (1, else 0), and the position each reads: s left to right, ``length - 1 - s`` right to
    left."""
    step = lengths * 0 + s  # as a vector: a scalar comparison is an integer in the interpreter
    # 0/1 integers, not booleans, and arithmetic, not a select: Triton 3.6 failed to move a boolean vector from
    # one layout to another here (TritonGPURemoveLayoutConversions); each use compares afresh
    live = (row_ok & (step >= 0) & (step < lengths)).to(tl.int32)
    return live, (step + d * (lengths - 1 - 2 * step)) * live


@triton.jit(do_not_specialize=["B", "T", "CS", "u_begin", "u_end"])
def onlstm_forward_kernel(
    acts_ptr,  # [K, B, T, G]: in, the input projection (biases included); out, the full pre-activations
    whh_ptr,  # [K, G, H]
    lengths_ptr,  # [B]
    hbuf_ptr,  # [2, K, B, H]: h_{t-1} and h_t; slot 0 holds the initial state
    cells_ptr,  # [K, B, CS, H]: c_t at index (t + 1) % CS, c_{-1} at 0; CS = T + 1 (saved) or 2
    h_out_ptr,  # [B, T, K * H], zeros
    forget_ptr,  # [K, B, T], zeros: forget distances 1 - mean(f~)
    input_ptr,  # [K, B, T], zeros: input distances mean(i~)
    counter_ptr,  # [1] int32, zero: the grid barrier's arrivals (PERSISTENT only)
    B, T, CS, u_begin, u_end,  # half-steps u_begin..u_end - 1 of 2 T: step u // 2, half u % 2
    H: tl.constexpr, L: tl.constexpr, C: tl.constexpr, K: tl.constexpr, SYMMETRIC: tl.constexpr,
    BB: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr, LB: tl.constexpr, LAP: tl.constexpr,
    LP: tl.constexpr, CP: tl.constexpr, PRECISION: tl.constexpr, PERSISTENT: tl.constexpr,
):
    G = 4 * H + 2 * L  # constexpr: H and L are
    d, p, rows, row_ok, lengths = _tile(lengths_ptr, B, BB)
    nn, level_n, n_ok = _neurons(p, L, C, LB, CP, BN)
    lv = tl.arange(0, LP)
    lv_ok = lv < L
    lva = p * LB + tl.arange(0, LAP)  # this program's levels (half A)
    lva_ok = (tl.arange(0, LAP) < LB) & (lva < L)
    w_base = whh_ptr + d * G * H
    programs = tl.num_programs(0) * tl.num_programs(1) * tl.num_programs(2)
    for u in range(u_begin, u_end):
        s = u // 2
        valid, pos = _step(d, s, rows, row_ok, lengths)
        acts_row = acts_ptr + ((d * B + rows) * T + pos) * G  # [BB] pointers
        h_prev = hbuf_ptr + (((s % 2) * K + d) * B + rows) * H
        if u % 2 == 0:
            # A. this program's levels' master logits: h_{t-1} W_hh added to the input projection
            acc_i = tl.zeros([BB, LAP], dtype=tl.float32)
            acc_f = tl.zeros([BB, LAP], dtype=tl.float32)
            for k0 in range(0, H, BK):
                kk = k0 + tl.arange(0, BK)
                k_ok = kk < H
                hk = tl.load(h_prev[:, None] + kk[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0,
                             cache_modifier=".cg")
                w_ok = k_ok[:, None] & lva_ok[None, :]
                w_i = tl.load(w_base + lva[None, :] * H + kk[:, None], mask=w_ok, other=0.0)
                w_f = tl.load(w_base + (L + lva[None, :]) * H + kk[:, None], mask=w_ok, other=0.0)
                acc_i += tl.dot(hk, w_i, input_precision=PRECISION)
                acc_f += tl.dot(hk, w_f, input_precision=PRECISION)
            ok_a = (valid[:, None] > 0) & lva_ok[None, :]
            logit = acts_row[:, None] + lva[None, :]
            tl.store(logit, acc_i + tl.load(logit, mask=ok_a, other=0.0), mask=ok_a)
            tl.store(logit + L, acc_f + tl.load(logit + L, mask=ok_a, other=0.0), mask=ok_a)
        else:
            # B. every level's master gates (from the logits all programs wrote), then this program's neurons
            logit_i, logit_f = _load_logits(acts_row, (valid[:, None] > 0) & lv_ok[None, :], lv, L)
            if p == 0:
                p_i, p_f, master_i, master_f = _masters(logit_i, logit_f, lv_ok, SYMMETRIC)
                mean_f = tl.sum(tl.where(lv_ok[None, :], master_f, 0.0), 1) / L
                mean_i = tl.sum(tl.where(lv_ok[None, :], master_i, 0.0), 1) / L
                tl.store(forget_ptr + (d * B + rows) * T + pos, 1.0 - mean_f, mask=valid > 0)
                tl.store(input_ptr + (d * B + rows) * T + pos, mean_i, mask=valid > 0)
            m_i, m_f = _own_masters(logit_i, logit_f, lv, lv_ok, p, level_n, LB, SYMMETRIC)  # [BB, BN]
            acc_o = tl.zeros([BB, BN], dtype=tl.float32)
            acc_c = tl.zeros([BB, BN], dtype=tl.float32)
            acc_in = tl.zeros([BB, BN], dtype=tl.float32)
            acc_fg = tl.zeros([BB, BN], dtype=tl.float32)
            for k0 in range(0, H, BK):
                kk = k0 + tl.arange(0, BK)
                k_ok = kk < H
                hk = tl.load(h_prev[:, None] + kk[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0,
                             cache_modifier=".cg")
                w_ok = k_ok[:, None] & n_ok[None, :]
                w_n = w_base + (2 * L + nn[None, :]) * H + kk[:, None]
                acc_o += tl.dot(hk, tl.load(w_n, mask=w_ok, other=0.0), input_precision=PRECISION)
                acc_c += tl.dot(hk, tl.load(w_n + H * H, mask=w_ok, other=0.0), input_precision=PRECISION)
                acc_in += tl.dot(hk, tl.load(w_n + 2 * H * H, mask=w_ok, other=0.0), input_precision=PRECISION)
                acc_fg += tl.dot(hk, tl.load(w_n + 3 * H * H, mask=w_ok, other=0.0), input_precision=PRECISION)
            ok_n = (valid[:, None] > 0) & n_ok[None, :]
            gate = acts_row[:, None] + 2 * L + nn[None, :]
            o_pre = acc_o + tl.load(gate, mask=ok_n, other=0.0)
            c_pre = acc_c + tl.load(gate + H, mask=ok_n, other=0.0)
            i_pre = acc_in + tl.load(gate + 2 * H, mask=ok_n, other=0.0)
            f_pre = acc_fg + tl.load(gate + 3 * H, mask=ok_n, other=0.0)
            tl.store(gate, o_pre, mask=ok_n)
            tl.store(gate + H, c_pre, mask=ok_n)
            tl.store(gate + 2 * H, i_pre, mask=ok_n)
            tl.store(gate + 3 * H, f_pre, mask=ok_n)
            cell_rows = cells_ptr + (d * B + rows) * CS * H
            c_prev = tl.load(cell_rows[:, None] + (s % CS) * H + nn[None, :], mask=ok_n, other=0.0)
            w = m_i * m_f
            c_new = c_prev * (w * _sigmoid(f_pre) + m_f - w) + _tanh(c_pre) * (w * _sigmoid(i_pre) + m_i - w)
            h_new = _sigmoid(o_pre) * _tanh(c_new)
            tl.store(cell_rows[:, None] + ((s + 1) % CS) * H + nn[None, :], c_new, mask=ok_n)
            h_next = hbuf_ptr + ((((s + 1) % 2) * K + d) * B + rows) * H
            tl.store(h_next[:, None] + nn[None, :], h_new, mask=ok_n)
            tl.store(h_out_ptr + (rows[:, None] * T + pos[:, None]) * (K * H) + d * H + nn[None, :], h_new, mask=ok_n)
        if PERSISTENT:
            _grid_sync(counter_ptr, (u - u_begin + 1) * programs)


@triton.jit(do_not_specialize=["B", "T", "r_begin", "r_end"])
def onlstm_backward_kernel(
    acts_ptr,  # [K, B, T, G]: the saved pre-activations
    whh_ptr,  # [K, G, H]
    lengths_ptr,  # [B]
    cells_ptr,  # [K, B, T + 1, H]: the saved cell states (c_{-1} at 0)
    grad_h_ptr,  # [B, T, K * H]
    grad_dist_ptr,  # [2, K, B, T]: of the forget, input distances
    carry_ptr,  # [K, B, H]: dL/dc carried between steps, at first dL/dc after the last step
    level_ptr,  # [2, K, B, 2, LP] scratch: per level, the sums of dL/d[i~, f~] over its neurons, by step parity
    d_acts_ptr,  # [K, B, T, G], zeros: dL/d(pre-activations)
    counter_ptr,  # [1] int32, zero: the grid barrier's arrivals (PERSISTENT only)
    B, T, r_begin, r_end,  # reverse steps r_begin..r_end - 1 of T + 1: step T - 1 - r; r = T ends step 0's masters
    H: tl.constexpr, L: tl.constexpr, C: tl.constexpr, K: tl.constexpr, SYMMETRIC: tl.constexpr,
    BB: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr, LB: tl.constexpr, LAP: tl.constexpr,
    LP: tl.constexpr, CP: tl.constexpr, PRECISION: tl.constexpr, PERSISTENT: tl.constexpr,
):
    G = 4 * H + 2 * L  # constexpr: H and L are
    d, p, rows, row_ok, lengths = _tile(lengths_ptr, B, BB)
    nn, level_n, n_ok = _neurons(p, L, C, LB, CP, BN)
    lv = tl.arange(0, LP)
    lv_ok = lv < L
    w_base = whh_ptr + d * G * H
    # this program's neurons' columns of the master rows: [LP, BN]
    w_mask = lv_ok[:, None] & n_ok[None, :]
    wm_i = tl.load(w_base + lv[:, None] * H + nn[None, :], mask=w_mask, other=0.0)
    wm_f = tl.load(w_base + (L + lv[:, None]) * H + nn[None, :], mask=w_mask, other=0.0)
    programs = tl.num_programs(0) * tl.num_programs(1) * tl.num_programs(2)
    carry_at = carry_ptr + (d * B + rows[:, None]) * H + nn[None, :]
    carry_ok = row_ok[:, None] & n_ok[None, :]
    for r in range(r_begin, r_end):
        s = T - 1 - r
        valid, pos = _step(d, s, rows, row_ok, lengths)
        later, pos_later = _step(d, s + 1, rows, row_ok, lengths)  # step s + 1, whose gate gradients are complete

        # 1. the master logits' gradients of step s + 1, from the per-level sums of every program (redundantly)
        ok_l = (later[:, None] > 0) & lv_ok[None, :]
        level_in = level_ptr + ((((r + 1) % 2) * K + d) * B + rows) * 2 * LP
        d_mi = tl.load(level_in[:, None] + lv[None, :], mask=ok_l, other=0.0, cache_modifier=".cg")
        d_mf = tl.load(level_in[:, None] + LP + lv[None, :], mask=ok_l, other=0.0, cache_modifier=".cg")
        acts_later = acts_ptr + ((d * B + rows) * T + pos_later) * G
        logit_i, logit_f = _load_logits(acts_later, ok_l, lv, L)
        p_i, p_f, master_i, master_f = _masters(logit_i, logit_f, lv_ok, SYMMETRIC)
        g_f = tl.load(grad_dist_ptr + ((0 * K + d) * B + rows) * T + pos_later, mask=later > 0, other=0.0)
        g_i = tl.load(grad_dist_ptr + ((1 * K + d) * B + rows) * T + pos_later, mask=later > 0, other=0.0)
        d_mf = tl.where(ok_l, d_mf - g_f[:, None] / L, 0.0)
        d_mi = tl.where(ok_l, d_mi + g_i[:, None] / L, 0.0)
        d_pf = tl.sum(d_mf, 1)[:, None] - tl.cumsum(d_mf, 1) + d_mf  # f~ = cumsum(p_f)
        if SYMMETRIC:
            d_pi = tl.cumsum(d_mi, 1)  # i~ = reverse cumsum(p_i)
        else:
            d_pi = tl.cumsum(d_mi, 1) - tl.sum(d_mi, 1)[:, None] - d_mi  # i~ = 1 - cumsum(p_i)
        dl_i = tl.where(ok_l, p_i * (d_pi - tl.sum(p_i * d_pi, 1)[:, None]), 0.0)
        dl_f = tl.where(ok_l, p_f * (d_pf - tl.sum(p_f * d_pf, 1)[:, None]), 0.0)
        d_later = d_acts_ptr + ((d * B + rows) * T + pos_later) * G
        if p == 0:
            tl.store(d_later[:, None] + lv[None, :], dl_i, mask=ok_l)
            tl.store(d_later[:, None] + L + lv[None, :], dl_f, mask=ok_l)

        # 2. dL/dh_t of this program's neurons: dL/dpre_{t+1} W_hh over the gate rows (from every program) and the
        # master rows (just computed)
        acc = tl.dot(dl_i, wm_i, input_precision=PRECISION) + tl.dot(dl_f, wm_f, input_precision=PRECISION)
        for g0 in range(0, 4 * H, BK):
            gg = g0 + tl.arange(0, BK)
            g_ok = gg < 4 * H
            d_next = tl.load(d_later[:, None] + 2 * L + gg[None, :], mask=(later[:, None] > 0) & g_ok[None, :],
                             other=0.0, cache_modifier=".cg")
            w = tl.load(w_base + (2 * L + gg[:, None]) * H + nn[None, :], mask=g_ok[:, None] & n_ok[None, :],
                        other=0.0)
            acc += tl.dot(d_next, w, input_precision=PRECISION)
        ok = (valid[:, None] > 0) & n_ok[None, :]
        d_h = acc + tl.load(grad_h_ptr + (rows[:, None] * T + pos[:, None]) * (K * H) + d * H + nn[None, :],
                            mask=ok, other=0.0)

        # 3. the gates' gradients at step s, from the gates recomputed off the saved pre-activations
        acts_row = acts_ptr + ((d * B + rows) * T + pos) * G
        ok_s = (valid[:, None] > 0) & lv_ok[None, :]
        logit_i, logit_f = _load_logits(acts_row, ok_s, lv, L)
        m_i, m_f = _own_masters(logit_i, logit_f, lv, lv_ok, p, level_n, LB, SYMMETRIC)
        gate = acts_row[:, None] + 2 * L + nn[None, :]
        o = _sigmoid(tl.load(gate, mask=ok, other=0.0))
        c_hat = _tanh(tl.load(gate + H, mask=ok, other=0.0))
        i = _sigmoid(tl.load(gate + 2 * H, mask=ok, other=0.0))
        f = _sigmoid(tl.load(gate + 3 * H, mask=ok, other=0.0))
        cell_rows = cells_ptr + (d * B + rows) * (T + 1) * H
        c_prev = tl.load(cell_rows[:, None] + s * H + nn[None, :], mask=ok, other=0.0)
        tanh_c = _tanh(tl.load(cell_rows[:, None] + (s + 1) * H + nn[None, :], mask=ok, other=0.0))
        carry = tl.load(carry_at, mask=carry_ok, other=0.0)
        d_c = carry + d_h * o * (1.0 - tanh_c * tanh_c)
        w = m_i * m_f
        d_gate = d_acts_ptr + ((d * B + rows[:, None]) * T + pos[:, None]) * G + 2 * L + nn[None, :]
        tl.store(d_gate, d_h * tanh_c * o * (1.0 - o), mask=ok)
        tl.store(d_gate + H, d_c * (w * i + m_i - w) * (1.0 - c_hat * c_hat), mask=ok)
        tl.store(d_gate + 2 * H, d_c * c_hat * w * i * (1.0 - i), mask=ok)
        tl.store(d_gate + 3 * H, d_c * c_prev * w * f * (1.0 - f), mask=ok)
        d_w = d_c * (c_prev * (f - 1.0) + c_hat * (i - 1.0))
        # this program's levels' sums of dL/d[i~, f~] over their neurons, for step s's masters (next iteration)
        per_i = tl.where(ok, d_c * c_hat + d_w * m_f, 0.0)
        per_f = tl.where(ok, d_c * c_prev + d_w * m_i, 0.0)
        level_out = level_ptr + (((r % 2) * K + d) * B + rows) * 2 * LP
        for j in tl.static_range(LB):
            ok_j = (valid > 0) & (lengths * 0 + p * LB + j < L)  # a vector comparison (see _step)
            tl.store(level_out + p * LB + j, tl.sum(tl.where(level_n[None, :] == j, per_i, 0.0), 1), mask=ok_j)
            tl.store(level_out + LP + p * LB + j, tl.sum(tl.where(level_n[None, :] == j, per_f, 0.0), 1), mask=ok_j)
        # dL/dc_{t-1}; a row past its end passes its carry through unchanged
        tl.store(carry_at, tl.where((valid[:, None] > 0), d_c * (w * f + m_f - w), carry), mask=carry_ok)
        if PERSISTENT:
            _grid_sync(counter_ptr, (r - r_begin + 1) * programs)
