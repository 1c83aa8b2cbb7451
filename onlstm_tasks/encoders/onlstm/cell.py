"""The parameters of one ON-LSTM direction, with two ways to run them: a whole layer through the fast time loop
(:meth:`ONLSTMCell.run`, the operator of :mod:`.layer_op`), or one batched step at a time as a
:class:`~onlstm_tasks.encoders.cell_stack.RecurrentCell` (:meth:`ONLSTMCell.step`, :mod:`.equations`)."""

from __future__ import annotations

import torch
from torch import nn

from ..cell_stack import RecurrentCell, State
from .equations import MASTER_INPUT_VARIANTS, onlstm_update
from .layer_op import run_layer


class ONLSTMCell(RecurrentCell):
    """One direction of one ON-LSTM layer.

    Parameters (the layout of the authors' ``ON_LSTM.py``, see :mod:`.equations`; ``L = hidden_size / chunk_size``
    levels, ``G = 4H + 2L``): ``weight_ih`` [G, input_size], ``bias_ih`` [G], ``weight_hh`` [G, H], ``bias_hh`` [G].

    As a :class:`~onlstm_tasks.encoders.cell_stack.RecurrentCell` (:meth:`project`, :meth:`initial_state`,
    :meth:`step`) it runs in a :class:`~onlstm_tasks.encoders.cell_stack.CellStackEncoder` like the LSTM variants:
    slower than :class:`~onlstm_tasks.encoders.onlstm.ONLSTM`'s time loop, the same hidden states.
    """

    def __init__(self, input_size: int, hidden_size: int, chunk_size: int, master_input: str = "paper") -> None:
        super().__init__()
        if chunk_size <= 0 or hidden_size <= 0 or hidden_size % chunk_size:
            raise ValueError(
                f"hidden_size must be a positive multiple of chunk_size, got hidden_size={hidden_size}, "
                f"chunk_size={chunk_size}"
            )
        if master_input not in MASTER_INPUT_VARIANTS:
            raise ValueError(f"master_input must be one of {MASTER_INPUT_VARIANTS}, got {master_input!r}")
        self.input_size, self.hidden_size, self.chunk_size = input_size, hidden_size, chunk_size
        self.levels = hidden_size // chunk_size
        self.master_input = master_input
        gates = 4 * hidden_size + 2 * self.levels
        self.weight_ih = nn.Parameter(torch.empty(gates, input_size))
        self.bias_ih = nn.Parameter(torch.empty(gates))
        self.weight_hh = nn.Parameter(torch.empty(gates, hidden_size))
        self.bias_hh = nn.Parameter(torch.empty(gates))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = self.hidden_size**-0.5  # as nn.LSTM
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def run(
        self, x: torch.Tensor, mask: torch.Tensor | None, weight_hh: torch.Tensor, backend: str = "auto"
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Runs left to right over x [B, T, D] from a zero state.

        ``mask`` [B, T] bool, left-aligned (None when every row is full): a row's steps end at its length.
        Returns hidden states [B, T, H] and forget/input distances [B, T], all zero at padded steps.
        Differentiable in ``x``, the parameters and ``weight_hh`` (passed in so DropConnect can replace it).
        ``backend``: the time loop's, as :class:`~.encoder.ONLSTM`'s.
        """
        lengths = x.new_full((x.size(0),), x.size(1), dtype=torch.long) if mask is None else mask.sum(1)
        h, d_forget, d_input, _ = run_layer(x, lengths, self.weight_ih[None], (self.bias_ih + self.bias_hh)[None],
                                            weight_hh[None], self.master_input == "symmetric", backend)
        return h, d_forget[0], d_input[0]

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """The input's share of every step's pre-activations, both biases included: x [B, T, D] -> [B, T, G]."""
        return torch.addmm(self.bias_ih + self.bias_hh, x.reshape(-1, x.size(-1)), self.weight_ih.t()).view(
            *x.shape[:-1], -1)

    def initial_state(self, batch: int, like: torch.Tensor) -> State:
        """``(h, c)``, zeros [batch, hidden_size] each."""
        h = like.new_zeros(batch, self.hidden_size)
        return h, h.clone()

    def step(self, x_t: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        """One step of the equations (:func:`~.equations.onlstm_update`) for a batch: ``x_t`` [B, G] from
        :meth:`project`, ``state`` ``(h, c)``. Returns ``(h_t, (h_t, c_t))``."""
        h, c = state
        h_t, c_t, _, _ = onlstm_update(torch.addmm(x_t, h, self.weight_hh.t()), c, self.chunk_size, self.master_input)
        return h_t, (h_t, c_t)


