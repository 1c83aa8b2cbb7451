"""A plainly written ON-LSTM: the test oracle for every faster implementation.

Written straight from the paper (Shen et al., ICLR 2019, eqs. 9-14) with no batching tricks: one sentence at a
time, one step at a time, every gate named. Slow on purpose; never used for training.

Gate layout of the pre-activations (shared with :class:`onlstm_tasks.encoders.onlstm.ONLSTM` and with the
authors' ``ON_LSTM.py``), for ``L = hidden_size / chunk_size`` levels:

    [ master input (L) | master forget (L) | output (H) | cell (H) | input (H) | forget (H) ]
"""

from __future__ import annotations

import torch

from .gates import cumax, master_input_gate
from .onlstm_cell import ONLSTMCell


def ordered_cell_update(
    c_prev: torch.Tensor,
    c_hat: torch.Tensor,
    forget: torch.Tensor,
    input: torch.Tensor,
    master_forget: torch.Tensor,
    master_input: torch.Tensor,
) -> torch.Tensor:
    """The paper's soft update (eq. 14), every argument already broadcast to the cell's shape:

    omega = f~ * i~
    c_t   = omega * (f * c_{t-1} + i * c^) + (f~ - omega) * c_{t-1} + (i~ - omega) * c^
    """
    omega = master_forget * master_input
    return (
        omega * (forget * c_prev + input * c_hat)
        + (master_forget - omega) * c_prev
        + (master_input - omega) * c_hat
    )


def reference_step(
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
    """One ON-LSTM step for one input vector.

    x: [D], h and c: [H]. Returns (h_t [H], c_t [H], forget distance (scalar), input distance (scalar)).
    """
    h_t, c_t, f_master, i_master = reference_gate_step(
        x, h, c, weight_ih, bias_ih, weight_hh, bias_hh, chunk_size, master_input
    )
    return h_t, c_t, 1.0 - f_master.mean(), i_master.mean()


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
    """:func:`reference_step` returning the master gates themselves instead of their distances.

    Returns (h_t [H], c_t [H], master forget f~ [L] (non-decreasing), master input i~ [L] (non-increasing)).
    """
    hidden_size = h.numel()
    levels = hidden_size // chunk_size
    pre = weight_ih @ x + bias_ih + weight_hh @ h + bias_hh
    mi_logits = pre[:levels]
    mf_logits = pre[levels : 2 * levels]
    o_pre, c_pre, i_pre, f_pre = pre[2 * levels :].split(hidden_size)

    f_master = cumax(mf_logits)  # [L], non-decreasing
    i_master = master_input_gate(mi_logits, master_input)  # [L], non-increasing

    out_gate = torch.sigmoid(o_pre)
    c_hat = torch.tanh(c_pre)
    in_gate = torch.sigmoid(i_pre)
    forget_gate = torch.sigmoid(f_pre)

    # each level's master gate value covers chunk_size neurons
    f_master_full = f_master.repeat_interleave(chunk_size)
    i_master_full = i_master.repeat_interleave(chunk_size)
    c_t = ordered_cell_update(c, c_hat, forget_gate, in_gate, f_master_full, i_master_full)
    h_t = out_gate * torch.tanh(c_t)
    return h_t, c_t, f_master, i_master


class ReferenceONLSTMCell(ONLSTMCell):
    """An ON-LSTM cell (same parameters as :class:`ONLSTMCell`) that steps one unbatched vector at a time."""

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
