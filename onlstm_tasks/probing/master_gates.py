"""Per-level master gates of one ON-LSTM layer and direction, for inspection and plots (never for training).

The fast forward pass keeps only the distances (``1 - mean(f~_t)``, ``mean(i~_t)``). :func:`master_gates`
recomputes the gate vectors themselves: it takes the layer's input from an eval-mode forward pass of the encoder
(``x`` for layer 0, the previous layer's states otherwise) and steps the plain reference cell
(:func:`~onlstm_tasks.encoders.onlstm.reference.reference_gate_step`) over each sentence, in the layer's reading direction.
Nothing is stored on the modules. Slow (a Python loop per sentence and step); meant for a handful of sentences.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from onlstm_tasks.encoders.base import reverse_padded
from onlstm_tasks.encoders.independent_directions import IndependentDirections
from onlstm_tasks.encoders.onlstm import ONLSTM
from onlstm_tasks.encoders.onlstm.reference import reference_gate_step


@dataclass
class MasterGates:
    """Master gates of one layer and direction, indexed by token position (zero at padding).

    forget: f~ = cumax(.), [B, T, L], non-decreasing over the L levels (level 0 = lowest).
    input:  i~, [B, T, L], non-increasing over the levels.
    """

    forget: torch.Tensor
    input: torch.Tensor

    def distances(self) -> torch.Tensor:
        """``1 - mean(f~_t)`` [B, T], the encoder's forget distances (not masked: 1 at padding)."""
        return 1.0 - self.forget.mean(dim=-1)

    def input_distances(self) -> torch.Tensor:
        """``mean(i~_t)`` [B, T], the encoder's input distances."""
        return self.input.mean(dim=-1)


def master_gates(
    encoder: ONLSTM, x: torch.Tensor, mask: torch.Tensor | None = None, layer: int = -1, direction: int = 0
) -> MasterGates:
    """f~ and i~ of ``encoder``'s layer ``layer`` (negative counts from the top) and ``direction`` (0 = forward,
    1 = backward) for the inputs ``x`` [B, T, D] and ``mask`` [B, T], as the encoder computes them in eval mode.

    The encoder must be in eval mode (dropout and DropConnect would make the gates random); call under
    ``torch.no_grad()`` unless gradients are wanted.
    """
    if isinstance(encoder, IndependentDirections):  # two ON-LSTM stacks: the backward one reads reversed inputs
        if direction not in (0, 1):
            raise ValueError(f"direction must be 0 (forward) or 1 (backward), got {direction}")
        if direction == 0:
            return master_gates(encoder.forward_encoder, x, mask, layer, 0)
        mask = encoder.check_inputs(x, mask)
        lengths = mask.sum(dim=1)
        gates = master_gates(encoder.backward_encoder, reverse_padded(x, lengths), mask, layer, 0)
        return MasterGates(forget=reverse_padded(gates.forget, lengths), input=reverse_padded(gates.input, lengths))
    if not isinstance(encoder, ONLSTM):
        raise TypeError(f"master gates exist only in ON-LSTM encoders, got {type(encoder).__name__}")
    if encoder.training:
        raise ValueError("call master_gates on an encoder in eval mode (encoder.eval()): dropout would make the "
                         "gates random")
    mask = encoder.check_inputs(x, mask)
    if not -encoder.num_layers <= layer < encoder.num_layers:
        raise ValueError(f"layer must be in [-{encoder.num_layers}, {encoder.num_layers}), got {layer}")
    if direction not in range(encoder.num_directions):
        raise ValueError(f"direction must be 0 (forward){' or 1 (backward)' if encoder.bidirectional else ''} for "
                         f"this {'bi' if encoder.bidirectional else 'uni'}directional encoder, got {direction}")
    layer %= encoder.num_layers
    layer_input = x if layer == 0 else encoder(x, mask).layers[layer - 1]
    cell = encoder.cell(layer, direction)
    batch, steps, _ = x.shape
    forget = x.new_zeros(batch, steps, cell.levels)
    inputs = x.new_zeros(batch, steps, cell.levels)
    for b, n in enumerate(mask.sum(dim=1).tolist()):
        seq = layer_input[b, :n]
        if direction == 1:
            seq = seq.flip(0)
        h = c = seq.new_zeros(cell.hidden_size)
        f_steps, i_steps = [], []
        for x_t in seq:
            h, c, f_master, i_master = reference_gate_step(x_t, h, c, cell.weight_ih, cell.bias_ih, cell.weight_hh,
                                                           cell.bias_hh, cell.chunk_size, cell.master_input)
            f_steps.append(f_master)
            i_steps.append(i_master)
        f_seq, i_seq = torch.stack(f_steps), torch.stack(i_steps)  # [n, L], in reading order
        if direction == 1:
            f_seq, i_seq = f_seq.flip(0), i_seq.flip(0)
        forget[b, :n], inputs[b, :n] = f_seq, i_seq
    return MasterGates(forget=forget, input=inputs)
