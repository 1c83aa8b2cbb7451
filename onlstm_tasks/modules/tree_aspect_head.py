"""A tree-aware aspect head: the pooling head with an interaction layer (a GCN by default) over a dependency tree
and positions weighted by their tree distance to the aspect (in the spirit of ASGCN, Zhang et al., EMNLP 2019)."""

from __future__ import annotations

from typing import Literal

import torch

from onlstm_tasks.encoders.base import EncoderFactory, EncoderOutput, encode
from onlstm_tasks.interaction import GCNInteraction, InteractionFactory
from onlstm_tasks.modules.aspect_heads import AspectPoolingHead
from onlstm_tasks.trees.heads import hop_distances
from onlstm_tasks.trees.source import TreeSource



class TreeAwareAspectHead(AspectPoolingHead):
    """Encoder -> position weights -> interaction over the tree -> pooling over the aspect's positions.

    1. ``states = encoder(x)`` (any encoder; a :class:`~onlstm_tasks.encoders.base.TreeEncoder` also gets the gold
       heads);
    2. the tree (``tree_source``: ``none``, ``induced`` from the encoder's own distances, or ``gold``; a
       :class:`~onlstm_tasks.trees.source.TreeSource`, a mapping of its fields (YAML ``tree_source: {kind:
       induced, distance_layer: -1}``) or the kind alone (``tree_source: induced``). The flat ``induced_heads``,
       ``distance_layer``, ``direction_combination`` and ``soft_temperature`` arguments are deprecated (configs
       and checkpoints written before the TreeSource was passed whole; ``None`` is absent);
    3. with ``position_weighting``, every state is scaled by ``1 - hops_i / n``, ``hops_i`` the number of arcs
       between token ``i`` and the nearest aspect token and ``n`` the sentence length (aspect tokens keep weight 1;
       tokens the aspect cannot reach get 0). A soft tree is read as its most probable heads here, and without a
       tree (``none``) the hops are the linear distance along the sentence;
    4. ``interaction`` (default :class:`~onlstm_tasks.interaction.GCNInteraction`: parent, children and self),
       built from the encoder's output size; any interaction function fits;
    5. mean or max pooling over the aspect's positions; ``output_size`` is the interaction's.
    """

    def __init__(
        self,
        input_size: int,
        encoder: EncoderFactory | None = None,
        interaction: InteractionFactory | None = None,
        pooling: Literal["mean", "max"] = "mean",
        tree_source: TreeSource | str = "none",
        induced_heads: str | None = None,
        distance_layer: int | None = None,
        direction_combination: str | None = None,
        soft_temperature: float | None = None,
        position_weighting: bool = True,
    ) -> None:
        super().__init__(input_size, encoder, pooling)
        self.tree_source = TreeSource.coerce(tree_source, type(self).__name__, induced_heads=induced_heads,
                                             distance_layer=distance_layer,
                                             direction_combination=direction_combination,
                                             soft_temperature=soft_temperature)
        self.interaction = (interaction or GCNInteraction)(self.encoder.output_size)
        self.position_weighting = position_weighting
        self.output_size = self.interaction.output_size

    def features(self, x: torch.Tensor, mask: torch.Tensor, aspect_mask: torch.Tensor,
                 heads: torch.Tensor | None = None) -> tuple[torch.Tensor, EncoderOutput]:
        encoded = encode(self.encoder, x, mask, heads)
        tree = self.tree_source.tree(mask, gold=heads, encoded=encoded, encoder=self.encoder)
        states = encoded.hidden
        if self.position_weighting:
            states = states * self.position_weights(tree, mask, aspect_mask).unsqueeze(-1).to(states.dtype)
        return self.pool(self.interaction.over_tree(states, tree, mask), aspect_mask), encoded

    @staticmethod
    def position_weights(tree: torch.Tensor | None, mask: torch.Tensor, aspect_mask: torch.Tensor) -> torch.Tensor:
        """``1 - hops / n`` per token ([B, T], zero at padding), hops counted as in the class docstring."""
        T = mask.size(1)
        pos = torch.arange(T, device=mask.device)
        if tree is None:  # linear distance to the nearest aspect token
            gaps = (pos[None, :, None] - pos[None, None, :]).abs().expand(mask.size(0), T, T)
            hops = gaps.masked_fill(~aspect_mask[:, None, :], T).min(dim=2).values
        else:
            if tree.dim() == 3:  # soft head weights -> the most probable head of each real token
                tree = torch.where(mask, tree.argmax(dim=2), pos)
            hops = hop_distances(tree, mask, aspect_mask)
        n = mask.sum(dim=1, keepdim=True)
        return (1.0 - hops / n).clamp_min(0.0) * mask
