"""Dependency-guided encoder (Jie & Lu, EMNLP 2019): encoder stages with interaction layers between them.

``h^(1) = Encoder_1(x)``, ``h^(l+1) = Encoder_(l+1)(g(h^(l), h^(l)_p))``: after every stage but the last, each
token's state is combined with its parent's by an interaction function ``g``
(:mod:`onlstm_tasks.interaction`) and the next stage reads the result.

The tree (``tree_source``, a :class:`~onlstm_tasks.trees.source.TreeSource`; in YAML ``tree_source: {kind: induced,
distance_layer: -1, ...}`` or just the kind, ``tree_source: induced``):

* ``none``: no tree (every token is its own parent, ``h_p(i) = h_i``); same parameters as the other sources;
* ``gold``: the batch's gold heads (``forward(x, mask, heads)``), the same tree for every interaction layer;
* ``induced``: the interaction after stage ``l`` uses the tree induced from stage ``l``'s own distances (its layer
  ``distance_layer``, directions merged by ``direction_combination``), hard (``induced_heads: hard``) or soft
  (``soft``, differentiable, so the task loss trains the distances). Stage 1 has no tree before it: it runs as a
  plain encoder and its distances give the first interaction's tree. Every stage but the last must return
  distances (an ON-LSTM); otherwise forward raises a ValueError naming the encoder class.
"""

from __future__ import annotations

import torch
from torch import nn

from onlstm_tasks.encoders.base import EncoderFactory, EncoderOutput, TreeEncoder, encode, encoder_output
from onlstm_tasks.encoders.defaults import TAGGER, default_encoder
from onlstm_tasks.interaction import InteractionFactory, MLPInteraction
from onlstm_tasks.trees.source import HasDistances, TreeSource



class DependencyGuidedEncoder(TreeEncoder):
    """Stacked encoder stages joined by interaction functions over a dependency tree (module docstring).

    Args:
        input_size: features of each input vector.
        encoder: builds one stage from its input size (called ``num_stages`` times; default bidirectional ON-LSTM,
            hidden 256, chunk size 8: :data:`~onlstm_tasks.encoders.defaults.TAGGER`).
        interaction: builds ``g`` from the size of the states below it (default :class:`MLPInteraction`).
        num_stages: encoder stages (``num_stages - 1`` interaction layers); 1 is a plain encoder.
        tree_source: a :class:`~onlstm_tasks.trees.source.TreeSource` (its kind ``none``, ``induced`` or ``gold``,
            and how an induced tree is read off a stage's distances), a mapping of its fields, or the kind alone.
        induced_heads, distance_layer, direction_combination, soft_temperature: deprecated (the TreeSource fields
            as separate arguments, as in configs and checkpoints written before it was passed whole); ``None`` is
            absent (:meth:`~onlstm_tasks.trees.source.TreeSource.coerce`).

    Output: ``hidden`` is the last stage's; ``layers`` are all stages' layers in order; ``distances`` and
    ``input_distances`` concatenate, along the layer axis, those of the stages that return them (``None`` if none
    does), so ``[-1]`` is the last stage's top layer; ``heads`` holds the tree each interaction layer used
    (``None`` for ``tree_source: none``).
    """

    def __init__(
        self,
        input_size: int,
        encoder: EncoderFactory | None = None,
        interaction: InteractionFactory | None = None,
        num_stages: int = 2,
        tree_source: TreeSource | str = "none",
        induced_heads: str | None = None,
        distance_layer: int | None = None,
        direction_combination: str | None = None,
        soft_temperature: float | None = None,
    ) -> None:
        super().__init__()
        if input_size <= 0:
            raise ValueError(f"input_size must be positive, got {input_size}")
        if num_stages < 1:
            raise ValueError(f"num_stages must be at least 1, got {num_stages}")
        self.tree_source = TreeSource.coerce(tree_source, type(self).__name__, induced_heads=induced_heads,
                                             distance_layer=distance_layer,
                                             direction_combination=direction_combination,
                                             soft_temperature=soft_temperature)
        make_encoder, make_interaction = encoder or default_encoder(**TAGGER), interaction or MLPInteraction
        stages, interactions = [make_encoder(input_size)], []
        for _ in range(num_stages - 1):
            interactions.append(make_interaction(stages[-1].output_size))
            stages.append(make_encoder(interactions[-1].output_size))
        for k, stage in enumerate(stages):
            expected = input_size if k == 0 else interactions[k - 1].output_size
            if stage.input_size != expected:
                raise ValueError(f"stage {k}: the encoder factory built input_size={stage.input_size} for "
                                 f"inputs of size {expected}")
        self.stages, self.interactions = nn.ModuleList(stages), nn.ModuleList(interactions)
        self.input_size, self.output_size, self.num_stages = input_size, stages[-1].output_size, num_stages

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                heads: torch.Tensor | None = None) -> EncoderOutput:
        mask = self.check_inputs(x, mask)
        outputs = [encode(self.stages[0], x, mask, heads)]
        trees = []
        for interaction, stage, below in zip(self.interactions, self.stages[1:], self.stages):
            tree = self.tree_source.tree(mask, gold=heads, encoded=outputs[-1], encoder=below)
            trees.append(tree)
            outputs.append(encode(stage, interaction.over_tree(outputs[-1].hidden, tree, mask), mask, heads))
        gives_distances = all(isinstance(out, HasDistances) for out in outputs)  # every stage is of one factory
        return encoder_output(
            outputs[-1].hidden, tuple(layer for out in outputs for layer in out.layers),
            distances=torch.cat([out.distances for out in outputs]) if gives_distances else None,
            input_distances=torch.cat([out.input_distances for out in outputs]) if gives_distances else None,
            heads=None if self.tree_source.kind == "none" else tuple(trees),
        )
