"""Two unidirectional stacks, one reading left to right and one right to left, that never see each other.

A bidirectional :class:`~onlstm_tasks.encoders.ONLSTM` (or ``nn.LSTM``) feeds layer ``l + 1`` of each direction
with both directions' states of layer ``l``: right for a tagger, wrong for a language model, where the forward
stack would then see the words it must predict. ELMo-style bidirectional language models therefore keep two
separate stacks, and a tagger initialised from such a model needs the same shape: this encoder.
"""

from __future__ import annotations

import torch

from onlstm_tasks.trees.source import HasDistances

from .base import EncoderFactory, EncoderOutput, ONLSTMOutput, SequenceEncoder, reverse_padded


class IndependentDirections(SequenceEncoder):
    """``forward`` (left to right) and ``backward`` (right to left over each row's true length), both built by
    ``encoder`` from ``input_size`` (so each gets its own initialisation), outputs concatenated per layer.

    In YAML: ``class_path: onlstm_tasks.encoders.IndependentDirections`` with ``init_args: {encoder:
    {class_path: onlstm_tasks.encoders.ONLSTM, init_args: {...}}}``. The inner encoder must be unidirectional.
    Distances (when the inner encoders return them) are stacked as direction 0 (forward) and 1 (backward), both
    indexed by token position, as for a bidirectional ON-LSTM.
    """

    def __init__(self, input_size: int, encoder: EncoderFactory) -> None:
        super().__init__()
        self.forward_encoder = encoder(input_size)
        self.backward_encoder = encoder(input_size)
        for part in (self.forward_encoder, self.backward_encoder):
            if getattr(part, "num_directions", 1) != 1 or getattr(part, "bidirectional", False):
                raise ValueError(f"IndependentDirections needs a unidirectional encoder, got a bidirectional "
                                 f"{type(part).__name__}")
        self.input_size = input_size
        self.output_size = 2 * self.forward_encoder.output_size
        self.num_directions = 2
        self.bidirectional = True

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> EncoderOutput:
        mask = self.check_inputs(x, mask)
        lengths = mask.sum(dim=1)
        ahead = self.forward_encoder(x, mask)
        behind = self.backward_encoder(reverse_padded(x, lengths), mask)
        back = lambda t: reverse_padded(t, lengths)  # noqa: E731 - back to token order
        layers = tuple(torch.cat((f, back(b)), dim=-1) for f, b in zip(ahead.layers, behind.layers))
        if not isinstance(ahead, HasDistances):
            return EncoderOutput(hidden=layers[-1], layers=layers)
        return ONLSTMOutput(
            hidden=layers[-1],
            layers=layers,
            distances=_stack_directions(ahead.distances, behind.distances, lengths),
            input_distances=_stack_directions(ahead.input_distances, behind.input_distances, lengths),
        )


def _stack_directions(ahead: torch.Tensor, behind: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """[layers, 1, B, T] each (the backward one in reversed order) -> [layers, 2, B, T] in token order."""
    layers, _, batch, steps = behind.shape
    # reverse_padded reverses axis 1 of [B, T, ...]: put the batch and time axes first
    flipped = reverse_padded(behind[:, 0].permute(1, 2, 0), lengths).permute(2, 0, 1)
    return torch.stack((ahead[:, 0], flipped), dim=1)
