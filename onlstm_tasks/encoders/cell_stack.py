"""Cell -> masked layer -> bidirectional -> stack: one runner for recurrent cells written step by step.

The LSTM relatives (peephole, CIFG, no forget gate, nested LSTM, sLSTM, mLSTM) are each a :class:`RecurrentCell`:
the equations of one time step for a batch, and nothing else. :class:`CellStackEncoder` turns any of them into a
:class:`~onlstm_tasks.encoders.base.SequenceEncoder` with the project's guarantees:

* padded steps never update the state (``torch.where`` on every state tensor) and outputs are zero there;
* the backward direction reads each row reversed within its true length (so it starts at the last real token);
* locked (variational) dropout between layers; zero initial state; every layer's states in ``layers``.

A cell's input projection for all time steps is done once per layer (:meth:`RecurrentCell.project`), so the time
loop holds only the recurrent part. Variants are constructed from plain config values, so swapping one in YAML is
a ``class_path`` change.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from .base import EncoderOutput, SequenceEncoder, check_stack_sizes, reverse_padded
from .dropout import check_probability, locked_dropout

State = tuple[torch.Tensor, ...]


class RecurrentCell(nn.Module):
    """One time step of a recurrent layer, batched. Subclasses set ``input_size``/``hidden_size`` and implement
    :meth:`initial_state` and :meth:`step`; :meth:`project` may precompute input-only terms for all steps."""

    input_size: int
    hidden_size: int

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """Input-only work for every step at once: x [B, T, D] -> [B, T, *] (default: x itself)."""
        return x

    def initial_state(self, batch: int, like: torch.Tensor) -> State:
        """The zero state (a tuple of tensors with batch first) for ``batch`` rows, dtype/device of ``like``."""
        raise NotImplementedError

    def step(self, x_t: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        """``x_t``: step t of :meth:`project`'s output, [B, *]. Returns ``(h_t [B, hidden_size], new state)``."""
        raise NotImplementedError


CellFactory = Callable[[int, int], RecurrentCell]


def init_uniform(cell: nn.Module, hidden_size: int) -> None:
    """Every parameter of ``cell`` uniform in ``[-1/sqrt(H), 1/sqrt(H)]``, as ``nn.LSTM`` initialises."""
    bound = hidden_size**-0.5
    for p in cell.parameters():
        nn.init.uniform_(p, -bound, bound)


def run_cell(cell: RecurrentCell, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Runs ``cell`` left to right over x [B, T, D] from the zero state; rows end at their length (``mask``
    [B, T] bool, left-aligned): their state stops changing there. Returns h [B, T, H], zero at padded steps."""
    keep = mask.unsqueeze(-1)  # [B, T, 1]
    projected = cell.project(x.masked_fill(~keep, 0.0))  # padded steps run on zeros, whatever x holds there
    state = cell.initial_state(x.size(0), x)
    outputs = []
    for t in range(x.size(1)):
        h, new_state = cell.step(projected[:, t], state)
        k = keep[:, t]
        state = tuple(torch.where(k.view(-1, *([1] * (new.dim() - 1))), new, old)
                      for new, old in zip(new_state, state))
        outputs.append(h)
    return torch.where(keep, torch.stack(outputs, dim=1), 0.0)


class CellStackEncoder(SequenceEncoder):
    """A stack of ``num_layers`` recurrent layers built from ``cell`` (optionally bidirectional).

    Args:
        input_size: features of each input vector.
        hidden_size: each direction's state size.
        cell: ``cell(input_size, hidden_size) -> RecurrentCell``; one per layer and direction.
        num_layers, bidirectional, dropout: as for :class:`~onlstm_tasks.encoders.ONLSTM` (``dropout``: locked
            dropout between layers).

    Subclasses fix ``cell`` and expose the variant's own options as plain arguments.
    """

    def __init__(self, input_size: int, hidden_size: int, cell: CellFactory, num_layers: int = 1,
                 bidirectional: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        check_stack_sizes(input_size, hidden_size, num_layers)
        check_probability("dropout", dropout)
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bidirectional, self.dropout = bidirectional, dropout
        self.num_directions = 2 if bidirectional else 1
        self.output_size = hidden_size * self.num_directions
        self.cells = nn.ModuleList(
            cell(input_size if layer == 0 else self.output_size, hidden_size)
            for layer in range(num_layers) for _ in range(self.num_directions)
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> EncoderOutput:
        mask = self.check_inputs(x, mask)
        lengths = mask.sum(dim=1)
        layers, layer_input = [], x
        for layer in range(self.num_layers):
            if layer > 0:
                layer_input = locked_dropout(layer_input, self.dropout, self.training)
            cells = self.cells[layer * self.num_directions : (layer + 1) * self.num_directions]
            outputs = [self.run_layer(cells[0], layer_input, mask)]
            if self.bidirectional:
                backward = self.run_layer(cells[1], reverse_padded(layer_input, lengths), mask)
                outputs.append(reverse_padded(backward, lengths))
            layer_input = torch.cat(outputs, dim=-1) if self.bidirectional else outputs[0]
            layers.append(layer_input)
        return EncoderOutput(hidden=layers[-1], layers=tuple(layers))

    def run_layer(self, cell: RecurrentCell, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """One direction of one layer, left to right (:func:`run_cell`); a variant with a faster form for whole
        sequences (the mLSTM's parallel form) overrides this and keeps everything else."""
        return run_cell(cell, x, mask)
