"""The ON-LSTM layer's whole time loop as one Triton kernel launch, forward and backward (imported only where the
``triton`` back end runs: :mod:`.backend_triton` launches them).

One program per (direction, tile of ``BB`` batch rows) runs every step of the pass (flashrnn's and
flash-linear-attention's ``fused_recurrent`` layout). Each step:

1. the master logits: ``h_{t-1} W_hh`` for the ``2 L`` master rows (``tl.dot``, streamed over ``BK``-blocks of the
   hidden units), plus the input projection computed before the loop; softmax and cumsum over the levels give
   ``i~`` and ``f~``, written to a small scratch so that each neuron can read its level's value;
2. for each block of ``BN`` neurons: the four gates' recurrent products, the gates, the cell update of
   :func:`~.equations.ordered_cell_update` in the form ``c_t = c_{t-1} (w f + f~ - w) + c^ (w i + i~ - w)``, and
   ``h_t = o tanh(c_t)``.

``h_{t-1}`` is read from a two-slot buffer in global memory (L2-resident), since a program cannot index its own
registers by block; ``tl.debug_barrier()`` orders each step's writes before the next step's reads within the
program. No barrier across programs, so the kernel runs in the interpreter too. Row b's steps run over its own
length: left to right from position 0, or (direction 1) right to left from position ``length - 1``; past its end
a row writes nothing (the outputs are zero there). Products accumulate in float32.

The backward kernel runs the reverse loop the same way: per step, ``dL/dh_t`` (the output's gradient plus
``dL/dpre_{t+1} W_hh``), the gates recomputed from the saved pre-activations, the gates' gradients, the carried
``dL/dc``, the per-level sums of the master gates' gradients (through a scratch, for any chunk size) and the
softmax/cumsum backward. The gradients of the weights, the bias and the inputs are large products after the loop
(:mod:`.backend_triton`).
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
def _masters(acts_row, valid, lv, lv_ok, L: tl.constexpr, SYMMETRIC: tl.constexpr, acc_i, acc_f):
    """Softmax probabilities and master gates from the master logits (``acc_*``: their recurrent share, or 0)."""
    ok = valid[:, None] & lv_ok[None, :]
    logit_i = acc_i + tl.load(acts_row[:, None] + lv[None, :], mask=ok, other=0.0)
    logit_f = acc_f + tl.load(acts_row[:, None] + L + lv[None, :], mask=ok, other=0.0)
    p_i = _softmax(tl.where(lv_ok[None, :], logit_i, float("-inf")))
    p_f = _softmax(tl.where(lv_ok[None, :], logit_f, float("-inf")))
    master_f = tl.cumsum(p_f, 1)
    master_i = 1.0 - tl.cumsum(p_i, 1)
    if SYMMETRIC:
        master_i += p_i  # the reverse cumulative sum
    return logit_i, logit_f, p_i, p_f, master_i, master_f


@triton.jit
def _tile(lengths_ptr, B, BB: tl.constexpr, L: tl.constexpr, LP: tl.constexpr):
    """This program's direction and rows (their lengths), and the levels padded to LP."""
    rows = tl.program_id(1) * BB + tl.arange(0, BB)
    row_ok = rows < B
    lengths = tl.load(lengths_ptr + rows, mask=row_ok, other=0)
    lv = tl.arange(0, LP)
    return tl.program_id(0), rows, row_ok, lengths, lv, lv < L


@triton.jit
def _step(d, s, rows, row_ok, lengths):
    """Which rows run step s, and the position each reads: s left to right, ``length - 1 - s`` right to left."""
    valid = row_ok & (s < lengths)
    return valid, tl.where(valid, tl.where(d == 0, s, lengths - 1 - s), 0)


@triton.jit(do_not_specialize=["B", "T", "CS"])
def onlstm_forward_kernel(
    acts_ptr,  # [K, B, T, G]: in, the input projection (biases included); out, the full pre-activations
    whh_ptr,  # [K, G, H]
    lengths_ptr,  # [B]
    hbuf_ptr,  # [2, K, B, H]: h_{t-1} and h_t; slot 0 holds the initial state
    cells_ptr,  # [K, B, CS, H]: c_t at index (t + 1) % CS, c_{-1} at 0; CS = T + 1 (saved) or 2
    masters_ptr,  # [K, B, 2, LP] scratch: i~, f~ of the current step
    h_out_ptr,  # [B, T, K * H], zeros
    forget_ptr,  # [K, B, T], zeros: forget distances 1 - mean(f~)
    input_ptr,  # [K, B, T], zeros: input distances mean(i~)
    B, T, CS,
    H: tl.constexpr, L: tl.constexpr, C: tl.constexpr, K: tl.constexpr, SYMMETRIC: tl.constexpr,
    BB: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr, LP: tl.constexpr, PRECISION: tl.constexpr,
):
    G = 4 * H + 2 * L  # constexpr: H and L are
    d, rows, row_ok, lengths, lv, lv_ok = _tile(lengths_ptr, B, BB, L, LP)
    w_base = whh_ptr + d * G * H
    for s in range(0, T):
        valid, pos = _step(d, s, rows, row_ok, lengths)
        acts_row = acts_ptr + ((d * B + rows) * T + pos) * G  # [BB] pointers
        h_prev = hbuf_ptr + (((s % 2) * K + d) * B + rows) * H
        h_next = hbuf_ptr + ((((s + 1) % 2) * K + d) * B + rows) * H
        cell_rows = cells_ptr + (d * B + rows) * CS * H
        master_rows = masters_ptr + (d * B + rows) * 2 * LP

        # 1. master gates
        acc_i = tl.zeros([BB, LP], dtype=tl.float32)
        acc_f = tl.zeros([BB, LP], dtype=tl.float32)
        for k0 in range(0, H, BK):
            kk = k0 + tl.arange(0, BK)
            k_ok = kk < H
            hk = tl.load(h_prev[:, None] + kk[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0)
            w_ok = k_ok[:, None] & lv_ok[None, :]
            w_i = tl.load(w_base + lv[None, :] * H + kk[:, None], mask=w_ok, other=0.0)
            w_f = tl.load(w_base + (L + lv[None, :]) * H + kk[:, None], mask=w_ok, other=0.0)
            acc_i += tl.dot(hk, w_i, input_precision=PRECISION)
            acc_f += tl.dot(hk, w_f, input_precision=PRECISION)
        logit_i, logit_f, p_i, p_f, master_i, master_f = _masters(acts_row, valid, lv, lv_ok, L, SYMMETRIC,
                                                                  acc_i, acc_f)
        ok = valid[:, None] & lv_ok[None, :]
        tl.store(acts_row[:, None] + lv[None, :], logit_i, mask=ok)
        tl.store(acts_row[:, None] + L + lv[None, :], logit_f, mask=ok)
        tl.store(master_rows[:, None] + lv[None, :], master_i, mask=row_ok[:, None])
        tl.store(master_rows[:, None] + LP + lv[None, :], master_f, mask=row_ok[:, None])
        mean_f = tl.sum(tl.where(lv_ok[None, :], master_f, 0.0), 1) / L
        mean_i = tl.sum(tl.where(lv_ok[None, :], master_i, 0.0), 1) / L
        tl.store(forget_ptr + (d * B + rows) * T + pos, 1.0 - mean_f, mask=valid)
        tl.store(input_ptr + (d * B + rows) * T + pos, mean_i, mask=valid)
        tl.debug_barrier()

        # 2. the neurons, a block at a time
        for n0 in range(0, H, BN):
            nn = n0 + tl.arange(0, BN)
            n_ok = nn < H
            acc_o = tl.zeros([BB, BN], dtype=tl.float32)
            acc_c = tl.zeros([BB, BN], dtype=tl.float32)
            acc_in = tl.zeros([BB, BN], dtype=tl.float32)
            acc_fg = tl.zeros([BB, BN], dtype=tl.float32)
            for k0 in range(0, H, BK):
                kk = k0 + tl.arange(0, BK)
                k_ok = kk < H
                hk = tl.load(h_prev[:, None] + kk[None, :], mask=row_ok[:, None] & k_ok[None, :], other=0.0)
                w_ok = k_ok[:, None] & n_ok[None, :]
                w_n = w_base + (2 * L + nn[None, :]) * H + kk[:, None]
                acc_o += tl.dot(hk, tl.load(w_n, mask=w_ok, other=0.0), input_precision=PRECISION)
                acc_c += tl.dot(hk, tl.load(w_n + H * H, mask=w_ok, other=0.0), input_precision=PRECISION)
                acc_in += tl.dot(hk, tl.load(w_n + 2 * H * H, mask=w_ok, other=0.0), input_precision=PRECISION)
                acc_fg += tl.dot(hk, tl.load(w_n + 3 * H * H, mask=w_ok, other=0.0), input_precision=PRECISION)
            ok_n = valid[:, None] & n_ok[None, :]
            gate = acts_row[:, None] + 2 * L + nn[None, :]
            o_pre = acc_o + tl.load(gate, mask=ok_n, other=0.0)
            c_pre = acc_c + tl.load(gate + H, mask=ok_n, other=0.0)
            i_pre = acc_in + tl.load(gate + 2 * H, mask=ok_n, other=0.0)
            f_pre = acc_fg + tl.load(gate + 3 * H, mask=ok_n, other=0.0)
            tl.store(gate, o_pre, mask=ok_n)
            tl.store(gate + H, c_pre, mask=ok_n)
            tl.store(gate + 2 * H, i_pre, mask=ok_n)
            tl.store(gate + 3 * H, f_pre, mask=ok_n)
            level = nn // C
            m_i = tl.load(master_rows[:, None] + level[None, :], mask=ok_n, other=0.0)
            m_f = tl.load(master_rows[:, None] + LP + level[None, :], mask=ok_n, other=0.0)
            c_prev = tl.load(cell_rows[:, None] + (s % CS) * H + nn[None, :], mask=ok_n, other=0.0)
            w = m_i * m_f
            c_new = c_prev * (w * _sigmoid(f_pre) + m_f - w) + _tanh(c_pre) * (w * _sigmoid(i_pre) + m_i - w)
            h_new = _sigmoid(o_pre) * _tanh(c_new)
            tl.store(cell_rows[:, None] + ((s + 1) % CS) * H + nn[None, :], c_new, mask=ok_n)
            tl.store(h_next[:, None] + nn[None, :], h_new, mask=ok_n)
            tl.store(h_out_ptr + (rows[:, None] * T + pos[:, None]) * (K * H) + d * H + nn[None, :], h_new, mask=ok_n)
        tl.debug_barrier()


@triton.jit(do_not_specialize=["B", "T"])
def onlstm_backward_kernel(
    acts_ptr,  # [K, B, T, G]: the saved pre-activations
    whh_ptr,  # [K, G, H]
    lengths_ptr,  # [B]
    cells_ptr,  # [K, B, T + 1, H]: the saved cell states (c_{-1} at 0)
    masters_ptr,  # [K, B, 2, LP] scratch
    grad_h_ptr,  # [B, T, K * H]
    grad_dist_ptr,  # [2, K, B, T]: of the forget, input distances
    carry_ptr,  # [2, K, B, H]: dL/dc carried between steps; slot 0 holds dL/dc after the last step
    level_ptr,  # [K, B, 2, H] scratch: per neuron, dL/d[i~, f~] before the sum over its level
    d_acts_ptr,  # [K, B, T, G], zeros: dL/d(pre-activations)
    B, T,
    H: tl.constexpr, L: tl.constexpr, C: tl.constexpr, K: tl.constexpr, SYMMETRIC: tl.constexpr,
    BB: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr, LP: tl.constexpr, CP: tl.constexpr,
    PRECISION: tl.constexpr,
):
    G = 4 * H + 2 * L  # constexpr: H and L are
    d, rows, row_ok, lengths, lv, lv_ok = _tile(lengths_ptr, B, BB, L, LP)
    cj = tl.arange(0, CP)
    w_base = whh_ptr + d * G * H
    for r in range(0, T):
        s = T - 1 - r
        valid, pos = _step(d, s, rows, row_ok, lengths)
        later, pos_later = _step(d, s + 1, rows, row_ok, lengths)  # step s + 1, whose gradients are complete
        acts_row = acts_ptr + ((d * B + rows) * T + pos) * G
        d_row = d_acts_ptr + ((d * B + rows) * T + pos) * G
        d_later = d_acts_ptr + ((d * B + rows) * T + pos_later) * G
        cell_rows = cells_ptr + (d * B + rows) * (T + 1) * H
        master_rows = masters_ptr + (d * B + rows) * 2 * LP
        carry_in = carry_ptr + (((r % 2) * K + d) * B + rows) * H
        carry_out = carry_ptr + ((((r + 1) % 2) * K + d) * B + rows) * H
        level_rows = level_ptr + (d * B + rows) * 2 * H

        # 0. the master gates again, from the saved logits
        zero = tl.zeros([BB, LP], dtype=tl.float32)
        logit_i, logit_f, p_i, p_f, master_i, master_f = _masters(acts_row, valid, lv, lv_ok, L, SYMMETRIC,
                                                                  zero, zero)
        tl.store(master_rows[:, None] + lv[None, :], master_i, mask=row_ok[:, None])
        tl.store(master_rows[:, None] + LP + lv[None, :], master_f, mask=row_ok[:, None])
        tl.debug_barrier()

        # 1. the neurons, a block at a time
        for n0 in range(0, H, BN):
            nn = n0 + tl.arange(0, BN)
            n_ok = nn < H
            acc = tl.zeros([BB, BN], dtype=tl.float32)  # dL/dpre_{t+1} W_hh
            for g0 in range(0, G, BK):
                gg = g0 + tl.arange(0, BK)
                g_ok = gg < G
                d_next = tl.load(d_later[:, None] + gg[None, :], mask=later[:, None] & g_ok[None, :], other=0.0)
                w = tl.load(w_base + gg[:, None] * H + nn[None, :], mask=g_ok[:, None] & n_ok[None, :], other=0.0)
                acc += tl.dot(d_next, w, input_precision=PRECISION)
            ok = valid[:, None] & n_ok[None, :]
            d_h = acc + tl.load(grad_h_ptr + (rows[:, None] * T + pos[:, None]) * (K * H) + d * H + nn[None, :],
                                mask=ok, other=0.0)
            gate = acts_row[:, None] + 2 * L + nn[None, :]
            o = _sigmoid(tl.load(gate, mask=ok, other=0.0))
            c_hat = _tanh(tl.load(gate + H, mask=ok, other=0.0))
            i = _sigmoid(tl.load(gate + 2 * H, mask=ok, other=0.0))
            f = _sigmoid(tl.load(gate + 3 * H, mask=ok, other=0.0))
            level = nn // C
            m_i = tl.load(master_rows[:, None] + level[None, :], mask=ok, other=0.0)
            m_f = tl.load(master_rows[:, None] + LP + level[None, :], mask=ok, other=0.0)
            c_prev = tl.load(cell_rows[:, None] + s * H + nn[None, :], mask=ok, other=0.0)
            tanh_c = _tanh(tl.load(cell_rows[:, None] + (s + 1) * H + nn[None, :], mask=ok, other=0.0))
            carry = tl.load(carry_in[:, None] + nn[None, :], mask=row_ok[:, None] & n_ok[None, :], other=0.0)
            d_c = carry + d_h * o * (1.0 - tanh_c * tanh_c)
            w = m_i * m_f
            d_gate = d_row[:, None] + 2 * L + nn[None, :]
            tl.store(d_gate, d_h * tanh_c * o * (1.0 - o), mask=ok)
            tl.store(d_gate + H, d_c * (w * i + m_i - w) * (1.0 - c_hat * c_hat), mask=ok)
            tl.store(d_gate + 2 * H, d_c * c_hat * w * i * (1.0 - i), mask=ok)
            tl.store(d_gate + 3 * H, d_c * c_prev * w * f * (1.0 - f), mask=ok)
            d_w = d_c * (c_prev * (f - 1.0) + c_hat * (i - 1.0))
            tl.store(level_rows[:, None] + nn[None, :], d_c * c_hat + d_w * m_f, mask=ok)  # dL/di~, per neuron
            tl.store(level_rows[:, None] + H + nn[None, :], d_c * c_prev + d_w * m_i, mask=ok)  # dL/df~
            # dL/dc_{t-1}; a row past its end passes its carry through unchanged
            new_carry = tl.where(valid[:, None], d_c * (w * f + m_f - w), carry)
            tl.store(carry_out[:, None] + nn[None, :], new_carry, mask=row_ok[:, None] & n_ok[None, :])
        tl.debug_barrier()

        # 2. the master gates' gradients: sums over each level's neurons, then cumsum and softmax backward
        in_level = lv[None, :, None] * C + cj[None, None, :]
        ok3 = valid[:, None, None] & lv_ok[None, :, None] & (cj[None, None, :] < C)
        d_mi = tl.sum(tl.load(level_rows[:, None, None] + in_level, mask=ok3, other=0.0), 2)
        d_mf = tl.sum(tl.load(level_rows[:, None, None] + H + in_level, mask=ok3, other=0.0), 2)
        g_f = tl.load(grad_dist_ptr + ((0 * K + d) * B + rows) * T + pos, mask=valid, other=0.0)
        g_i = tl.load(grad_dist_ptr + ((1 * K + d) * B + rows) * T + pos, mask=valid, other=0.0)
        ok = valid[:, None] & lv_ok[None, :]
        d_mf = tl.where(ok, d_mf - g_f[:, None] / L, 0.0)
        d_mi = tl.where(ok, d_mi + g_i[:, None] / L, 0.0)
        d_pf = tl.sum(d_mf, 1)[:, None] - tl.cumsum(d_mf, 1) + d_mf  # f~ = cumsum(p_f)
        if SYMMETRIC:
            d_pi = tl.cumsum(d_mi, 1)  # i~ = reverse cumsum(p_i)
        else:
            d_pi = tl.cumsum(d_mi, 1) - tl.sum(d_mi, 1)[:, None] - d_mi  # i~ = 1 - cumsum(p_i)
        tl.store(d_row[:, None] + lv[None, :], p_i * (d_pi - tl.sum(p_i * d_pi, 1)[:, None]), mask=ok)
        tl.store(d_row[:, None] + L + lv[None, :], p_f * (d_pf - tl.sum(p_f * d_pf, 1)[:, None]), mask=ok)
        tl.debug_barrier()
