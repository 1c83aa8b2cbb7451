"""Nested LSTM (Moniz & Krueger, 2017, "Nested LSTMs", ACML, PMLR 77:530-544; arXiv:1801.10308) as a
:class:`SequenceEncoder`.

An LSTM whose memory update ``c_t = f_t * c_{t-1} + i_t * g_t`` is replaced by an inner LSTM that reads the two
terms of that sum: the gated input as its input and the gated old memory as its "previous hidden state". The
inner LSTM has its own memory cell, which persists across time; its output becomes the outer memory. One step
(paper Sec. 3.1, nesting depth 2; ``W`` input weights, ``U`` recurrent weights, ``b`` biases, ``~`` marks the inner
LSTM, ``s`` the logistic sigmoid, ``*`` elementwise)::

    outer gates      i_t = s(W_i x_t + U_i h_{t-1} + b_i)        f_t = s(W_f x_t + U_f h_{t-1} + b_f)
                     o_t = s(W_o x_t + U_o h_{t-1} + b_o)        g_t = tanh(W_c x_t + U_c h_{t-1} + b_c)
    inner inputs     x~_t = i_t * g_t                            h~_{t-1} = f_t * c_{t-1}
    inner gates      i~_t = s(W~_i x~_t + U~_i h~_{t-1} + b~_i)  f~_t = s(W~_f x~_t + U~_f h~_{t-1} + b~_f)
                     o~_t = s(W~_o x~_t + U~_o h~_{t-1} + b~_o)  g~_t = tanh(W~_c x~_t + U~_c h~_{t-1} + b~_c)
    inner memory     c~_t = f~_t * c~_{t-1} + i~_t * g~_t
    inner output     h~_t = o~_t * tanh(c~_t)
    outer memory     c_t = h~_t
    outer output     h_t = o_t * tanh(c_t)

Activations: the paper writes the LSTM with generic ``sigma_i, sigma_f, sigma_o`` (gates) and ``sigma_c, sigma_h``
(candidate and output squashing) for both levels. We use the standard LSTM choice at both levels: the logistic
sigmoid for every gate and ``tanh`` for ``sigma_c``, ``sigma_h`` and the inner ``sigma~_c``, ``sigma~_h``. This is
also what the public TensorFlow implementation hannw/nlstm does at depth 2. (We did not find a different
prescription for the inner level, such as an identity ``sigma~_c``, and chose ``tanh``; note that the inner output
is then bounded, so ``|c_t| < 1``.) Because of these squashings no setting of the inner weights turns this into a plain
LSTM exactly; the tests check the exact relation that does hold (inner LSTM with saturated gates and identity
candidate weights gives ``c_t = tanh(tanh(f_t * c_{t-1} + i_t * g_t))``).

Parameters: the outer ``weight_ih`` [4H, D], ``weight_hh`` [4H, H], ``bias`` [4H] and the inner
``inner_weight_ih`` [4H, H] (reads ``x~``), ``inner_weight_hh`` [4H, H] (reads ``h~``), ``inner_bias`` [4H], all
with gate rows ``[i | f | g | o]`` as ``nn.LSTM``. The state is ``(h, c, c~)``, all zero at the start. The cell
runs on :class:`~onlstm_tasks.encoders.cell_stack.CellStackEncoder` (masking, directions, layers, locked dropout).
"""

from __future__ import annotations

import torch
from torch import nn

from .cell_stack import CellStackEncoder, State
from .lstm_variants import GatedCell


class NestedLSTMCell(GatedCell):
    """One Nested LSTM step (module docstring): outer gates ``[i | f | g | o]`` plus an inner LSTM of the same size."""

    gates = 4

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__(input_size, hidden_size)
        rows = self.gates * hidden_size
        self.inner_weight_ih = nn.Parameter(torch.empty(rows, hidden_size))
        self.inner_weight_hh = nn.Parameter(torch.empty(rows, hidden_size))
        self.inner_bias = nn.Parameter(torch.empty(rows))
        self.reset_parameters()  # now covers the inner parameters too

    def initial_state(self, batch: int, like: torch.Tensor) -> State:
        zeros = like.new_zeros(batch, self.hidden_size)
        return zeros, zeros.clone(), zeros.clone()  # h, c (outer memory), c~ (inner memory)

    def step(self, x_t: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        h, c, c_inner = state
        i, f, g, o = self.pre_activations(x_t, h)
        x_inner = torch.sigmoid(i) * torch.tanh(g)  # x~_t = i_t * g_t
        h_inner = torch.sigmoid(f) * c  # h~_{t-1} = f_t * c_{t-1}
        inner = torch.addmm(torch.addmm(self.inner_bias, x_inner, self.inner_weight_ih.t()),
                            h_inner, self.inner_weight_hh.t())
        i_, f_, g_, o_ = inner.chunk(4, dim=-1)
        c_inner = torch.sigmoid(f_) * c_inner + torch.sigmoid(i_) * torch.tanh(g_)
        c = torch.sigmoid(o_) * torch.tanh(c_inner)  # c_t = h~_t
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, (h, c, c_inner)


class NestedLSTM(CellStackEncoder):
    """Nested LSTM (Moniz & Krueger, 2017) as a :class:`SequenceEncoder` (module docstring); arguments as
    :class:`~onlstm_tasks.encoders.PeepholeLSTM`."""

    def __init__(self, input_size: int, hidden_size: int = 256, num_layers: int = 1, bidirectional: bool = False,
                 dropout: float = 0.0) -> None:
        super().__init__(input_size, hidden_size, NestedLSTMCell, num_layers, bidirectional, dropout)
