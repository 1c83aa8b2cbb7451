"""LSTM variants from the literature as :class:`SequenceEncoder` s: peephole, coupled input-forget gate, no forget gate.

Notation for one step (``W`` input weights, ``U`` recurrent weights, ``b`` bias, ``g`` the cell candidate):

* :class:`PeepholeLSTM` (Gers & Schmidhuber, 2000): input and forget gates also see ``c_{t-1}``, the output gate
  sees ``c_t``, through diagonal (elementwise) weights ``p``::

      i = s(W_i x + U_i h + p_i * c_{t-1} + b_i)    f = s(W_f x + U_f h + p_f * c_{t-1} + b_f)
      g = tanh(W_g x + U_g h + b_g)                 c_t = f * c_{t-1} + i * g
      o = s(W_o x + U_o h + p_o * c_t + b_o)        h_t = o * tanh(c_t)

  With ``p = 0`` it is exactly ``nn.LSTM`` (tests copy the weights across).
* :class:`CIFGLSTM` (coupled input and forget gate, Greff et al., 2017): ``i = 1 - f``, so no input-gate weights.
* :class:`NoForgetLSTM` (the original LSTM of Hochreiter & Schmidhuber, 1997): ``c_t = c_{t-1} + i * g``.

Gate rows of ``weight_ih``/``weight_hh``/``bias`` follow ``nn.LSTM`` (``[i | f | g | o]``) minus the gate a
variant lacks. All three run on :class:`~onlstm_tasks.encoders.cell_stack.CellStackEncoder` (masking, directions,
layers) and share the arguments of :class:`~onlstm_tasks.encoders.LSTM` except DropConnect.
"""

from __future__ import annotations

import torch
from torch import nn

from .cell_stack import CellStackEncoder, RecurrentCell, State, init_uniform


class GatedCell(RecurrentCell):
    """Shared parameters of the LSTM-style cells: ``gates`` blocks of ``hidden_size`` rows each."""

    gates: int

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        rows = self.gates * hidden_size
        self.weight_ih = nn.Parameter(torch.empty(rows, input_size))
        self.weight_hh = nn.Parameter(torch.empty(rows, hidden_size))
        self.bias = nn.Parameter(torch.empty(rows))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init_uniform(self, self.hidden_size)

    def project(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, self.weight_ih, self.bias)  # [B, T, gates * H]

    def initial_state(self, batch: int, like: torch.Tensor) -> State:
        zeros = like.new_zeros(batch, self.hidden_size)
        return zeros, zeros.clone()

    def pre_activations(self, x_t: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The ``gates`` pre-activation blocks, each [B, H]."""
        return torch.addmm(x_t, h, self.weight_hh.t()).chunk(self.gates, dim=-1)

    def step(self, x_t: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        h, c = state
        c_new, o = self.update(self.pre_activations(x_t, h), c)
        h_new = torch.sigmoid(o) * torch.tanh(c_new)
        return h_new, (h_new, c_new)

    def update(self, gates: tuple[torch.Tensor, ...], c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The variant's own equations: ``(c_t, the output gate's pre-activation)`` from the gate blocks and
        ``c_{t-1}``; :meth:`step` gives ``h_t = s(o) * tanh(c_t)``."""
        raise NotImplementedError


class PeepholeCell(GatedCell):
    """Gate rows ``[i | f | g | o]`` plus diagonal peephole weights ``peephole`` [3, H] for ``i``, ``f``, ``o``."""

    gates = 4

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__(input_size, hidden_size)
        self.peephole = nn.Parameter(torch.zeros(3, hidden_size))  # zero start: a plain LSTM until trained

    def update(self, gates: tuple[torch.Tensor, ...], c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        i, f, g, o = gates
        p_i, p_f, p_o = self.peephole
        c_new = torch.sigmoid(f + p_f * c) * c + torch.sigmoid(i + p_i * c) * torch.tanh(g)
        return c_new, o + p_o * c_new


class CIFGCell(GatedCell):
    """Gate rows ``[f | g | o]``; the input gate is ``1 - f``."""

    gates = 3

    def update(self, gates: tuple[torch.Tensor, ...], c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f, g, o = gates
        f = torch.sigmoid(f)
        return f * c + (1.0 - f) * torch.tanh(g), o


class NoForgetCell(GatedCell):
    """Gate rows ``[i | g | o]``; the cell only accumulates: ``c_t = c_{t-1} + i * g``."""

    gates = 3

    def update(self, gates: tuple[torch.Tensor, ...], c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        i, g, o = gates
        return c + torch.sigmoid(i) * torch.tanh(g), o


class _VariantEncoder(CellStackEncoder):
    cell_type: type[GatedCell]

    def __init__(self, input_size: int, hidden_size: int = 256, num_layers: int = 1, bidirectional: bool = False,
                 dropout: float = 0.0) -> None:
        super().__init__(input_size, hidden_size, self.cell_type, num_layers, bidirectional, dropout)


class PeepholeLSTM(_VariantEncoder):
    """Peephole LSTM (Gers & Schmidhuber, 2000) as a :class:`SequenceEncoder` (module docstring)."""

    cell_type = PeepholeCell


class CIFGLSTM(_VariantEncoder):
    """LSTM with coupled input and forget gates (``i = 1 - f``) as a :class:`SequenceEncoder`."""

    cell_type = CIFGCell


class NoForgetLSTM(_VariantEncoder):
    """The original LSTM without a forget gate (``c_t = c_{t-1} + i * g``) as a :class:`SequenceEncoder`."""

    cell_type = NoForgetCell
