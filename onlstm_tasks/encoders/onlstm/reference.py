"""A plainly written ON-LSTM: the test oracle for every faster implementation.

Written straight from the paper (Shen et al., ICLR 2019, eqs. 9-14) with no batching tricks: one sentence at a
time, one step at a time, every gate named (the equations and the gate layout are in :mod:`.equations`, which this
module applies as they are). Slow on purpose; never used for training. It imports only :mod:`.equations`: the
oracle does not depend on the code it checks (:func:`reference_encode` reads an encoder's parameters, by name).
"""

from __future__ import annotations

import torch
from torch import nn

from .equations import MASTER_INPUT_VARIANTS, onlstm_update


def reference_gate_step(
    x: torch.Tensor,
    h: torch.Tensor,
    c: torch.Tensor,
    weight_ih: torch.Tensor,
    bias_ih: torch.Tensor,
    weight_hh: torch.Tensor,
    bias_hh: torch.Tensor,
    chunk_size: int,
    master_input: str = "paper",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One ON-LSTM step for one input vector, returning the master gates themselves.

    x: [D], h and c: [H]. Returns (h_t [H], c_t [H], master forget f~ [L] (non-decreasing), master input i~ [L]
    (non-increasing)).
    """
    pre = weight_ih @ x + bias_ih + weight_hh @ h + bias_hh
    return onlstm_update(pre, c, chunk_size, master_input)


def reference_step(*step, **options) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`reference_gate_step` (the same arguments) returning the master gates' distances instead of the gates:
    (h_t [H], c_t [H], forget distance ``1 - mean(f~)`` (scalar), input distance ``mean(i~)`` (scalar))."""
    h_t, c_t, f_master, i_master = reference_gate_step(*step, **options)
    return h_t, c_t, 1.0 - f_master.mean(), i_master.mean()


class ReferenceONLSTMCell(nn.Module):
    """An ON-LSTM cell that steps one unbatched vector at a time: the parameters of
    :class:`~onlstm_tasks.encoders.onlstm.cell.ONLSTMCell` (same names, shapes and initialisation), so state dicts
    load into either."""

    def __init__(self, input_size: int, hidden_size: int, chunk_size: int, master_input: str = "paper") -> None:
        super().__init__()
        if chunk_size <= 0 or hidden_size % chunk_size or master_input not in MASTER_INPUT_VARIANTS:
            raise ValueError("hidden_size must be a multiple of chunk_size, master_input one of "
                             f"{MASTER_INPUT_VARIANTS}")
        self.chunk_size, self.master_input = chunk_size, master_input
        gates = 4 * hidden_size + 2 * (hidden_size // chunk_size)
        bound = hidden_size**-0.5
        self.weight_ih = nn.Parameter(torch.empty(gates, input_size).uniform_(-bound, bound))
        self.bias_ih = nn.Parameter(torch.empty(gates).uniform_(-bound, bound))
        self.weight_hh = nn.Parameter(torch.empty(gates, hidden_size).uniform_(-bound, bound))
        self.bias_hh = nn.Parameter(torch.empty(gates).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]):
        h, c = state
        return reference_step(
            x, h, c, self.weight_ih, self.bias_ih, self.weight_hh, self.bias_hh, self.chunk_size, self.master_input
        )

    def run(self, xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Runs over one sequence xs [T, D] from a zero state: (h [T, H], forget dist [T], input dist [T])."""
        return run_sequence(xs, self.weight_ih, self.bias_ih, self.weight_hh, self.bias_hh, self.chunk_size,
                            self.master_input)


def run_sequence(xs, weight_ih, bias_ih, weight_hh, bias_hh, chunk_size, master_input="paper"):
    """Runs :func:`reference_step` over one sequence xs [T, D] from a zero state."""
    hidden_size = weight_hh.size(1)
    h = xs.new_zeros(hidden_size)
    c = xs.new_zeros(hidden_size)
    hs, dfs, dis = [], [], []
    for x in xs:
        h, c, d_f, d_i = reference_step(x, h, c, weight_ih, bias_ih, weight_hh, bias_hh, chunk_size, master_input)
        hs.append(h)
        dfs.append(d_f)
        dis.append(d_i)
    return torch.stack(hs), torch.stack(dfs), torch.stack(dis)


def reference_encode(encoder, x: torch.Tensor, mask: torch.Tensor, recurrent_weights=None):
    """The oracle for a whole :class:`ONLSTM` stack: each sentence alone, each layer and direction in turn.

    Uses ``encoder``'s parameters (so gradients can be compared), ignores dropout (pass the already dropped
    recurrent weights, one per layer and direction in the order the encoder samples them, to compare a
    training-mode pass). Returns (hidden [B, T, H*dirs], distances [L, dirs, B, T], input distances).
    """
    batch, steps, _ = x.shape
    dirs = 2 if encoder.bidirectional else 1
    hidden = x.new_zeros(batch, steps, encoder.output_size)
    dist_f = x.new_zeros(encoder.num_layers, dirs, batch, steps)
    dist_i = x.new_zeros(encoder.num_layers, dirs, batch, steps)
    for b in range(batch):
        n = int(mask[b].sum())
        layer_input = x[b, :n]
        for layer in range(encoder.num_layers):
            outputs = []
            for d in range(dirs):
                cell = encoder.cell(layer, d)
                w_hh = cell.weight_hh if recurrent_weights is None else recurrent_weights[layer * dirs + d]
                seq = layer_input if d == 0 else layer_input.flip(0)
                h, d_f, d_i = run_sequence(seq, cell.weight_ih, cell.bias_ih, w_hh, cell.bias_hh,
                                           encoder.chunk_size, encoder.master_input)
                if d == 1:
                    h, d_f, d_i = h.flip(0), d_f.flip(0), d_i.flip(0)
                outputs.append(h)
                dist_f[layer, d, b, :n] = d_f
                dist_i[layer, d, b, :n] = d_i
            layer_input = torch.cat(outputs, dim=-1)
        hidden[b, :n] = layer_input
    return hidden, dist_f, dist_i
