"""mLSTM (Beck et al., 2024, "xLSTM: Extended Long Short-Term Memory"): a matrix memory per head with exponential
gating and no hidden-to-hidden recurrence, as a :class:`~onlstm_tasks.encoders.base.SequenceEncoder`.

Every gate and q, k, v come from the input alone. Per head (``d = hidden_size / num_heads``), one step::

    q = W_q x + b_q   k = (W_k x + b_k) / sqrt(d)   v = W_v x + b_v        (vectors of size d)
    o = sigmoid(W_o x + b_o)                                              (size d)
    log i = i~ = w_i x + b_i    log f = log sigmoid(f~) or f~,  f~ = w_f x + b_f    (scalars per head)
    m_t = max(log f + m_{t-1}, log i)   i' = exp(log i - m_t)   f' = exp(log f + m_{t-1} - m_t)
    C_t = f' C_{t-1} + i' v k^T         n_t = f' n_{t-1} + i' k
    h_t = o * C_t q / max(|n_t^T q|, exp(-m_t))

The stabilised ``C_t, n_t`` are the paper's times ``exp(-m_t)``, so ``max(|n^T q|, exp(-m_t))`` is the paper's
``max(|n^T q|, 1)`` times the same factor and ``h_t`` is exactly the unstabilised one. (The authors add an
``eps`` to the denominator; it is not needed, ``exp(-m_t) > 0``, and is left out so both forms agree exactly.)
``k`` is scaled with its bias (the paper scales ``W_k x`` only; the difference is a reparametrisation of ``b_k``).

Parallel form (the paper's appendix), all steps at once, per head::

    F_t = sum_{s<=t} log f_s                  log D_tj = F_t - F_j + log i_j  (j <= t), -inf (j > t)
    m_t = max_j log D_tj                      D'_tj = exp(log D_tj - m_t)
    S = (q k^T) * D'                          h~_t = (S v)_t / max(|sum_j S_tj|, exp(-m_t))

With ``m_0 = -inf`` in the recurrent form (see :mod:`.slstm`), its ``m_t`` is exactly this row maximum, so the
two forms compute the same numbers; the recurrent one is kept as the oracle and for ``parallel=False``.
:class:`MLSTM` uses the parallel form by default (memory ``B * heads * T * T`` per layer, fine for sentences);
padded inputs are zeroed first, the backward direction reads each row reversed within its length
(:func:`~onlstm_tasks.encoders.base.reverse_padded`), causality keeps padding away from real positions, and
outputs are zero at padding. Gate biases start at 0 (input) and ``linspace(3, 6)`` over heads (forget; see
:func:`~onlstm_tasks.encoders.slstm.forget_bias`); the rest is uniform(+-1/sqrt(hidden_size)).
"""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from .cell_stack import CellStackEncoder, RecurrentCell, State, init_uniform
from .slstm import check_heads, forget_bias, log_forget_gate, stabilised_gates


class MLSTMCell(RecurrentCell):
    """One mLSTM layer direction (module docstring). ``weight_ih`` [4H + 2 heads, D] and ``bias`` in rows
    ``[q | k | v | o | i (one per head) | f (one per head)]``. State ``(C [B, heads, d, d], n [B, heads, d],
    m [B, heads])``; ``C[b, h]`` is indexed ``[value, key]``."""

    def __init__(self, input_size: int, hidden_size: int, num_heads: int = 4, forget_gate: str = "sigmoid") -> None:
        super().__init__()
        self.head_size = check_heads(hidden_size, num_heads, forget_gate)
        self.input_size, self.hidden_size = input_size, hidden_size
        self.num_heads, self.forget_gate = num_heads, forget_gate
        rows = 4 * hidden_size + 2 * num_heads
        self.weight_ih = nn.Parameter(torch.empty(rows, input_size))
        self.bias = nn.Parameter(torch.empty(rows))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init_uniform(self, self.hidden_size)
        with torch.no_grad():
            gates = self.bias[4 * self.hidden_size :]
            gates[: self.num_heads] = 0.0
            gates[self.num_heads :] = forget_bias(self.num_heads, self.forget_gate)

    def project(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight_ih, self.bias)  # [B, T, 4H + 2 heads]

    def split(self, p: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Projected input [..., 4H + 2 heads] -> ``q, k, v`` [..., heads, d] (k scaled by 1/sqrt(d)), output gate
        ``o`` [..., H] (after the sigmoid), ``log i`` and ``log f`` [..., heads]."""
        H, nh = self.hidden_size, self.num_heads
        q, k, v, o, i, f = p.split((H, H, H, H, nh, nh), dim=-1)
        heads = lambda t: t.unflatten(-1, (nh, self.head_size))  # noqa: E731
        k = k / math.sqrt(self.head_size)
        return heads(q), heads(k), heads(v), torch.sigmoid(o), i, log_forget_gate(f, self.forget_gate)

    def initial_state(self, batch: int, like: torch.Tensor) -> State:
        nh, d = self.num_heads, self.head_size
        return (like.new_zeros(batch, nh, d, d), like.new_zeros(batch, nh, d),
                like.new_full((batch, nh), -math.inf))

    def step(self, x_t: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        C, n, m = state
        q, k, v, o, log_i, log_f = self.split(x_t)  # q, k, v [B, heads, d]; log_i, log_f [B, heads]
        i_gate, f_gate, m_new = stabilised_gates(log_i, log_f, m)
        C_new = f_gate[..., None, None] * C + i_gate[..., None, None] * v[..., :, None] * k[..., None, :]
        n_new = f_gate[..., None] * n + i_gate[..., None] * k
        numerator = (C_new @ q[..., None]).squeeze(-1)  # [B, heads, d]
        denominator = torch.maximum((n_new * q).sum(-1).abs(), torch.exp(-m_new))  # [B, heads]
        h = o * (numerator / denominator[..., None]).flatten(-2)
        return h, (C_new, n_new, m_new)

    def parallel(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """All steps at once: x [B, T, D], mask [B, T] (left-aligned) -> h [B, T, H], zero at padding; equal to
        running :meth:`step` from :meth:`initial_state` (module docstring)."""
        keep = mask[..., None]
        q, k, v, o, log_i, log_f = self.split(self.project(torch.where(keep, x, 0.0)))
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, heads, T, d]
        log_i, log_f = log_i.transpose(1, 2), log_f.transpose(1, 2)  # [B, heads, T]
        T = x.size(1)
        cum = log_f.cumsum(-1)
        log_d = cum[..., :, None] - cum[..., None, :] + log_i[..., None, :]  # [B, heads, T(t), T(j)]
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        log_d = torch.where(causal, log_d, -math.inf)
        m = log_d.amax(-1, keepdim=True)  # [B, heads, T, 1]
        scores = (q @ k.transpose(-2, -1)) * torch.exp(log_d - m)  # [B, heads, T, T]
        denominator = torch.maximum(scores.sum(-1, keepdim=True).abs(), torch.exp(-m))
        h = ((scores @ v) / denominator).transpose(1, 2).flatten(-2)  # [B, T, H]
        return torch.where(keep, o * h, 0.0)


class MLSTM(CellStackEncoder):
    """mLSTM (Beck et al., 2024) as a :class:`SequenceEncoder` (module docstring).

    Args:
        input_size, hidden_size, num_layers, bidirectional, dropout: as for the other cell-stack encoders.
        num_heads: heads, each with its own ``d x d`` memory, ``d = hidden_size / num_heads``.
        forget_gate: ``"sigmoid"`` (default) or ``"exp"``.
        parallel: compute each layer with the parallel form (default) rather than step by step; same outputs.
    """

    cells: nn.ModuleList

    def __init__(self, input_size: int, hidden_size: int = 256, num_layers: int = 1, bidirectional: bool = False,
                 dropout: float = 0.0, num_heads: int = 4, forget_gate: str = "sigmoid", parallel: bool = True) -> None:
        check_heads(hidden_size, num_heads, forget_gate)
        cell = partial(MLSTMCell, num_heads=num_heads, forget_gate=forget_gate)
        super().__init__(input_size, hidden_size, cell, num_layers, bidirectional, dropout)
        self.num_heads, self.forget_gate, self.parallel = num_heads, forget_gate, parallel

    def run_layer(self, cell: MLSTMCell, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The parallel form over whole sequences (default), or the recurrent steps of :class:`CellStackEncoder`."""
        return cell.parallel(x, mask) if self.parallel else super().run_layer(cell, x, mask)
