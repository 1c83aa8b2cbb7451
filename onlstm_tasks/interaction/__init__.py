"""Interaction functions ``g(h_i, h_p(i))`` over a dependency tree (Jie & Lu, EMNLP 2019) and their tree helpers.

Every function is an :class:`Interaction` built from its input size (``Callable[[int], Interaction]`` factories
in configs: ``class_path: onlstm_tasks.interaction.MLPInteraction``). The tree may be hard heads ``[B, T]``, soft
head weights ``[B, T, T]`` or ``None``; :func:`parent_states` and :func:`tree_adjacency` read all three.

Plain torch, no Lightning. By the layer order (DESIGN.md) it may import only trees and errors below it; the
encoders and modules above it import it.
"""

from collections.abc import Callable

from onlstm_tasks.interaction.base import Interaction, head_matrix, parent_states, tree_adjacency
from onlstm_tasks.interaction.functions import (
    AdditionInteraction,
    ConcatInteraction,
    GatedInteraction,
    GCNInteraction,
    MLPInteraction,
    SelfInteraction,
)

InteractionFactory = Callable[[int], Interaction]

__all__ = [
    "AdditionInteraction",
    "ConcatInteraction",
    "GCNInteraction",
    "GatedInteraction",
    "Interaction",
    "InteractionFactory",
    "MLPInteraction",
    "SelfInteraction",
    "head_matrix",
    "parent_states",
    "tree_adjacency",
]
