"""Library recurrent layers (``nn.LSTM``, ``nn.GRU``) behind the :class:`SequenceEncoder` contract.

Arguments are named as for :class:`ONLSTM` where they apply, so swapping encoders is a ``class_path`` change.
Layers are run one at a time (so every layer's states can be returned) on packed sequences, so padding never
reaches a real position in either direction. A unidirectional encoder on a full batch runs on the plain tensor and
carries its state (:class:`StatefulEncoder`): LSTM one ``(h, c)`` per layer, GRU one ``(h,)``, each [B, H].
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .base import RecurrentOutput, StatefulEncoder, check_layer_states, check_stack_sizes
from .dropout import check_probability, locked_dropout
from .dropconnect import drop_connect

LayerStates = tuple[tuple[torch.Tensor, ...], ...]


class _TorchRNN(StatefulEncoder):
    rnn_type: type[nn.RNNBase]
    state_parts: tuple[str, ...]  # the tensors of one layer's state, as nn.LSTM / nn.GRU hold them in ``hx``

    def __init__(
        self,
        input_size: int,
        hidden_size: int = 256,
        num_layers: int = 1,
        bidirectional: bool = False,
        dropout: float = 0.0,
        dropconnect: float = 0.0,
    ) -> None:
        super().__init__()
        check_stack_sizes(input_size, hidden_size, num_layers)
        check_probability("dropout", dropout)
        check_probability("dropconnect", dropconnect)
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bidirectional, self.dropout, self.dropconnect = bidirectional, dropout, dropconnect
        self.num_directions = 2 if bidirectional else 1
        self.output_size = hidden_size * self.num_directions
        self.rnns = nn.ModuleList(
            self.rnn_type(input_size if layer == 0 else self.output_size, hidden_size, batch_first=True,
                          bidirectional=bidirectional)
            for layer in range(num_layers)
        )

    def _run(self, rnn: nn.RNNBase, inputs, hx=None):
        """Runs one layer on a packed sequence or a plain [B, T, D] tensor: ``(output, final state)`` as the
        module returns them; in training with DropConnect, on freshly dropped recurrent weights."""
        if not (self.training and self.dropconnect > 0):
            return rnn(inputs, hx)
        names, weights = zip(*((n, p) for n, p in rnn.named_parameters() if n.startswith("weight_hh")))
        return functional_call(rnn, dict(zip(names, drop_connect(weights, self.dropconnect, True))), (inputs, hx))

    def _run_packed(self, rnn: nn.RNNBase, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """One layer on a padded batch (either direction), from a zero state: outputs [B, T, H * dirs]."""
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        return pad_packed_sequence(self._run(rnn, packed)[0], batch_first=True, total_length=x.size(1))[0]

    def _run_carry(
        self, rnn: nn.RNNBase, x: torch.Tensor, state: tuple[torch.Tensor, ...] | None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        """One left-to-right layer on a full batch (nothing to pack) from ``state`` (None: zeros, else a constant:
        detached), returning outputs [B, T, H] and the final state, one [B, H] tensor per ``state_parts``."""
        hx = None
        if state is not None:
            parts = tuple(t.detach()[None] for t in state)  # [1, B, H]: one layer, one direction
            hx = parts if len(parts) > 1 else parts[0]
        out, final = self._run(rnn, x, hx)
        return out, tuple(t[0] for t in (final if isinstance(final, tuple) else (final,)))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                state: LayerStates | None = None) -> RecurrentOutput:
        mask = self.check_inputs(x, mask)
        carry = self.carries_state(bool(mask.all()), state)
        if state is not None:
            check_layer_states(state, self.state_parts, [self.hidden_size] * self.num_layers, x)
        lengths = None if carry else mask.sum(dim=1).cpu()
        layers, finals = [], []
        layer_input = x
        for layer, rnn in enumerate(self.rnns):
            if layer > 0:
                layer_input = locked_dropout(layer_input, self.dropout, self.training)
            if carry:
                out, final = self._run_carry(rnn, layer_input, None if state is None else state[layer])
                finals.append(final)
            else:
                out = self._run_packed(rnn, layer_input, lengths)
            layers.append(out)
            layer_input = out
        return RecurrentOutput(hidden=layers[-1], layers=tuple(layers), state=tuple(finals) if carry else None)


class LSTM(_TorchRNN):
    """``nn.LSTM`` as a :class:`SequenceEncoder` (no distances)."""

    rnn_type = nn.LSTM
    state_parts = ("h", "c")


class GRU(_TorchRNN):
    """``nn.GRU`` as a :class:`SequenceEncoder` (no distances)."""

    rnn_type = nn.GRU
    state_parts = ("h",)
