"""The interaction functions: the four of Jie & Lu (EMNLP 2019, Dependency-Guided LSTM-CRF) plus a gate and a GCN.

Each is ``g(h_i, h_p(i))`` over states of size ``input_size``; see :class:`~onlstm_tasks.interaction.base.Interaction`.

* :class:`SelfInteraction`: ``h_i`` (the tree is ignored: a plain stack of encoders); size H;
* :class:`ConcatInteraction`: ``[h_i; h_p(i)]``; size 2H;
* :class:`AdditionInteraction`: ``h_i + h_p(i)``; size H;
* :class:`MLPInteraction`: ``ReLU(W1 h_i + W2 h_p(i))``; size ``output_size`` (default H);
* :class:`GatedInteraction`: ``z * h_i + (1 - z) * h_p(i)`` with ``z = sigmoid(W [h_i; h_p(i)] + b)``; size H;
* :class:`GCNInteraction`: ``num_layers`` times ``ReLU(Â h W + b)``, ``Â`` the degree-normalised tree graph of
  :func:`~onlstm_tasks.interaction.base.tree_adjacency` (parent, children, self); size ``output_size`` (default H).
"""

from __future__ import annotations

import torch
from torch import nn

from .base import Interaction, tree_adjacency


def _check_size(name: str, value: int) -> int:
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


class SelfInteraction(Interaction):
    """Self connection: ``g = h_i``. The baseline: with it a dependency-guided encoder is a plain stack."""

    def __init__(self, input_size: int) -> None:
        super().__init__()
        self.input_size = self.output_size = _check_size("input_size", input_size)

    def combine(self, h, parent, heads, mask):
        return h


class ConcatInteraction(Interaction):
    """Concatenation: ``g = [h_i; h_p(i)]`` (output twice the input size)."""

    def __init__(self, input_size: int) -> None:
        super().__init__()
        self.input_size = _check_size("input_size", input_size)
        self.output_size = 2 * input_size

    def combine(self, h, parent, heads, mask):
        return torch.cat([h, parent], dim=-1)


class AdditionInteraction(Interaction):
    """Addition: ``g = h_i + h_p(i)``."""

    def __init__(self, input_size: int) -> None:
        super().__init__()
        self.input_size = self.output_size = _check_size("input_size", input_size)

    def combine(self, h, parent, heads, mask):
        return h + parent


class MLPInteraction(Interaction):
    """MLP: ``g = ReLU(W1 h_i + W2 h_p(i))`` (one bias), of size ``output_size`` (default: the input size)."""

    def __init__(self, input_size: int, output_size: int | None = None) -> None:
        super().__init__()
        self.input_size = _check_size("input_size", input_size)
        self.output_size = _check_size("output_size", output_size or input_size)
        self.child = nn.Linear(input_size, self.output_size)
        self.parent = nn.Linear(input_size, self.output_size, bias=False)

    def combine(self, h, parent, heads, mask):
        return torch.relu(self.child(h) + self.parent(parent))


class GatedInteraction(Interaction):
    """Gated mixing: ``z = sigmoid(W [h_i; h_p(i)] + b)`` per feature, ``g = z * h_i + (1 - z) * h_p(i)``."""

    def __init__(self, input_size: int) -> None:
        super().__init__()
        self.input_size = self.output_size = _check_size("input_size", input_size)
        self.gate = nn.Linear(2 * input_size, input_size)

    def combine(self, h, parent, heads, mask):
        z = torch.sigmoid(self.gate(torch.cat([h, parent], dim=-1)))
        return z * h + (1 - z) * parent


class GCNInteraction(Interaction):
    """Graph convolution over the tree's undirected graph (parent, children and self, degree-normalised):
    ``num_layers`` times ``h <- ReLU(Â h W + b)``, each of size ``output_size`` (default: the input size).

    It reads the tree (``heads``) rather than ``h_parent``; without a tree ``Â`` is the identity.
    """

    def __init__(self, input_size: int, output_size: int | None = None, num_layers: int = 1) -> None:
        super().__init__()
        self.input_size = _check_size("input_size", input_size)
        self.output_size = _check_size("output_size", output_size or input_size)
        self.num_layers = _check_size("num_layers", num_layers)
        self.layers = nn.ModuleList(
            nn.Linear(input_size if k == 0 else self.output_size, self.output_size) for k in range(num_layers)
        )

    def combine(self, h, parent, heads, mask):
        adjacency = tree_adjacency(heads, mask).to(h.dtype)  # [B, T, T]
        for layer in self.layers:
            h = torch.relu(torch.bmm(adjacency, nn.functional.linear(h, layer.weight)) + layer.bias)
        return h
