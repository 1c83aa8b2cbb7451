"""sLSTM (Beck et al., 2024, "xLSTM: Extended Long Short-Term Memory"): exponential gating, a normaliser state and
head-wise memory mixing, as a :class:`~onlstm_tasks.encoders.base.SequenceEncoder`.

One step, for a batch (``W`` input weights, ``R`` block-diagonal recurrent weights, ``b`` bias)::

    z~, i~, f~, o~ = W x_t + R h_{t-1} + b        (pre-activations; gate rows [i | f | z | o], as nn.LSTM's [i|f|g|o])
    z = tanh(z~)   o = sigmoid(o~)
    log i = i~                                      (exponential input gate, i = exp(i~))
    log f = log sigmoid(f~)   or   f~               (forget_gate="sigmoid" (default) or "exp")
    m_t = max(log f + m_{t-1}, log i)               (stabiliser)
    i' = exp(log i - m_t)   f' = exp(log f + m_{t-1} - m_t)
    c_t = f' c_{t-1} + i' z   n_t = f' n_{t-1} + i'
    h_t = o * c_t / n_t

The stabilised ``(c_t, n_t)`` are the paper's unstabilised ones times ``exp(-m_t)``, so ``c_t / n_t`` (and so
``h_t``) is exactly the unstabilised ``f c + i z`` over ``f n + i``; every ``exp`` argument is <= 0.

Choices the paper leaves open:

* forget gate: the paper allows ``sigmoid`` or ``exp``; ``sigmoid`` is the default, as in the authors' code.
* initial state ``h_0 = c_0 = n_0 = 0`` and ``m_0 = -inf``: then ``m_1 = log i_1``, ``i'_1 = 1``, ``f'_1 = 0``,
  so ``n_1 = 1`` and the first step never divides by zero or underflows (with ``m_0 = 0`` a very negative ``i~_1``
  would make ``i'_1`` underflow to 0 and ``n_1 = 0``). It is the authors' first-step rule ``m_1 = i~_1`` written
  as a state, and ``m_t`` becomes the row maximum of the mLSTM's parallel form (:mod:`.mlstm`).
* head-wise memory mixing: ``R`` is block-diagonal over ``num_heads`` heads of ``hidden_size / num_heads`` units,
  so each head's gates see only that head's ``h_{t-1}``; the input weights ``W`` are dense.
* initialisation: uniform(+-1/sqrt(hidden_size)) as nn.LSTM, except the forget bias, spread over
  ``linspace(3, 6)`` so the forget gate starts near 0.95-0.998 (long memory); with ``forget_gate="exp"`` the bias
  is ``log sigmoid`` of that, so both choices start with the same forget gate.

The cell is a :class:`~onlstm_tasks.encoders.cell_stack.RecurrentCell`; :class:`SLSTM` runs it on
:class:`~onlstm_tasks.encoders.cell_stack.CellStackEncoder` (masking, directions, layers, locked dropout). The
xLSTM *block* around the cell (group norm, gated MLP, residuals) is not part of this encoder.
"""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from .cell_stack import CellStackEncoder, RecurrentCell, State, init_uniform

FORGET_GATES = ("sigmoid", "exp")


def log_forget_gate(pre: torch.Tensor, kind: str) -> torch.Tensor:
    """``log f`` from the forget pre-activation: ``log sigmoid(f~)`` or ``f~`` (``f = exp(f~)``)."""
    return F.logsigmoid(pre) if kind == "sigmoid" else pre


def stabilised_gates(log_i: torch.Tensor, log_f: torch.Tensor,
                     m_prev: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Exponential gates in log space: returns ``(i', f', m_t)`` with ``m_t = max(log f + m_{t-1}, log i)``,
    ``i' = exp(log i - m_t)``, ``f' = exp(log f + m_{t-1} - m_t)`` (all exp arguments <= 0)."""
    decayed = log_f + m_prev
    m = torch.maximum(decayed, log_i)
    return torch.exp(log_i - m), torch.exp(decayed - m), m


def check_heads(hidden_size: int, num_heads: int, forget_gate: str) -> int:
    """Validates the xLSTM options and returns the head size."""
    if num_heads < 1 or hidden_size % num_heads:
        raise ValueError(f"hidden_size must be a positive multiple of num_heads, got {hidden_size}, {num_heads}")
    if forget_gate not in FORGET_GATES:
        raise ValueError(f"forget_gate must be one of {FORGET_GATES}, got {forget_gate!r}")
    return hidden_size // num_heads


def forget_bias(size: int, kind: str) -> torch.Tensor:
    """Forget-gate bias giving ``f`` between sigmoid(3) and sigmoid(6) at zero input, for either gate kind."""
    b = torch.linspace(3.0, 6.0, size)
    return b if kind == "sigmoid" else F.logsigmoid(b)


class SLSTMCell(RecurrentCell):
    """One sLSTM step (module docstring). ``weight_ih`` [4H, D] and ``bias`` [4H] in gate rows ``[i | f | z | o]``;
    ``weight_hh`` [4, heads, head_size, head_size]: gate g's recurrent block for head n maps that head's
    ``h_{t-1}`` (columns ``n * head_size:(n + 1) * head_size``) to the same columns of the gate. State (h, c, n, m)."""

    def __init__(self, input_size: int, hidden_size: int, num_heads: int = 4, forget_gate: str = "sigmoid") -> None:
        super().__init__()
        self.head_size = check_heads(hidden_size, num_heads, forget_gate)
        self.input_size, self.hidden_size = input_size, hidden_size
        self.num_heads, self.forget_gate = num_heads, forget_gate
        self.weight_ih = nn.Parameter(torch.empty(4 * hidden_size, input_size))
        self.weight_hh = nn.Parameter(torch.empty(4, num_heads, self.head_size, self.head_size))
        self.bias = nn.Parameter(torch.empty(4 * hidden_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init_uniform(self, self.hidden_size)
        with torch.no_grad():
            self.bias[self.hidden_size : 2 * self.hidden_size] = forget_bias(self.hidden_size, self.forget_gate)

    def project(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight_ih, self.bias)  # [B, T, 4H]

    def initial_state(self, batch: int, like: torch.Tensor) -> State:
        zeros = like.new_zeros(batch, self.hidden_size)
        return zeros, zeros.clone(), zeros.clone(), torch.full_like(zeros, -math.inf)

    def recurrent(self, h: torch.Tensor) -> torch.Tensor:
        """``R h`` with block-diagonal R: h [B, H] -> [B, 4H] in gate rows ``[i | f | z | o]``."""
        heads = h.view(h.size(0), self.num_heads, self.head_size)  # [B, heads, hs]
        out = torch.einsum("bnj,gnij->bgni", heads, self.weight_hh)  # [B, 4, heads, hs]
        return out.reshape(h.size(0), 4 * self.hidden_size)

    def pre_activations(self, x_t: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``(i~, f~, z~, o~)``, each [B, H], from a projected input ``x_t`` [B, 4H] and ``h_{t-1}`` [B, H]."""
        return (x_t + self.recurrent(h)).chunk(4, dim=-1)

    def step(self, x_t: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        h, c, n, m = state
        i, f, z, o = self.pre_activations(x_t, h)
        i_gate, f_gate, m_new = stabilised_gates(i, log_forget_gate(f, self.forget_gate), m)
        c_new = f_gate * c + i_gate * torch.tanh(z)
        n_new = f_gate * n + i_gate
        h_new = torch.sigmoid(o) * c_new / n_new
        return h_new, (h_new, c_new, n_new, m_new)


class SLSTM(CellStackEncoder):
    """sLSTM (Beck et al., 2024) as a :class:`SequenceEncoder` (module docstring).

    Args:
        input_size, hidden_size, num_layers, bidirectional, dropout: as for the other cell-stack encoders.
        num_heads: heads of the block-diagonal recurrent weights (``hidden_size`` must be a multiple).
        forget_gate: ``"sigmoid"`` (default) or ``"exp"``.
    """

    def __init__(self, input_size: int, hidden_size: int = 256, num_layers: int = 1, bidirectional: bool = False,
                 dropout: float = 0.0, num_heads: int = 4, forget_gate: str = "sigmoid") -> None:
        check_heads(hidden_size, num_heads, forget_gate)
        cell = partial(SLSTMCell, num_heads=num_heads, forget_gate=forget_gate)
        super().__init__(input_size, hidden_size, cell, num_layers, bidirectional, dropout)
        self.num_heads, self.forget_gate = num_heads, forget_gate
