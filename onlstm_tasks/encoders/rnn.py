"""Library recurrent layers (``nn.LSTM``, ``nn.GRU``) behind the :class:`SequenceEncoder` contract.

Arguments are named as for :class:`ONLSTM` where they apply, so swapping encoders is a ``class_path`` change.
Layers are run one at a time (so every layer's states can be returned) on packed sequences, so padding never
reaches a real position in either direction.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from .base import EncoderOutput, SequenceEncoder, check_stack_sizes
from .dropout import check_probability, drop_connect, locked_dropout


class _TorchRNN(SequenceEncoder):
    rnn_type: type[nn.RNNBase]

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

    def _run(self, rnn: nn.RNNBase, packed):
        """Runs one layer; in training with DropConnect, on freshly dropped recurrent weights."""
        if not (self.training and self.dropconnect > 0):
            return rnn(packed)[0]
        dropped = {name: drop_connect(p, self.dropconnect, True)
                   for name, p in rnn.named_parameters() if name.startswith("weight_hh")}
        return functional_call(rnn, dropped, (packed,))[0]

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> EncoderOutput:
        mask = self.check_inputs(x, mask)
        lengths = mask.sum(dim=1).cpu()
        layers = []
        layer_input = x
        for layer, rnn in enumerate(self.rnns):
            if layer > 0:
                layer_input = locked_dropout(layer_input, self.dropout, self.training)
            packed = pack_padded_sequence(layer_input, lengths, batch_first=True, enforce_sorted=False)
            out, _ = pad_packed_sequence(self._run(rnn, packed), batch_first=True, total_length=x.size(1))
            layers.append(out)
            layer_input = out
        return EncoderOutput(hidden=layers[-1], layers=tuple(layers))


class LSTM(_TorchRNN):
    """``nn.LSTM`` as a :class:`SequenceEncoder` (no distances)."""

    rnn_type = nn.LSTM


class GRU(_TorchRNN):
    """``nn.GRU`` as a :class:`SequenceEncoder` (no distances)."""

    rnn_type = nn.GRU
