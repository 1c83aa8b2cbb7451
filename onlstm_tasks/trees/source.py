"""Where a model's tree comes from: ``none``, ``induced`` (from the model's own ON-LSTM distances), ``gold`` or
``lm`` (from a frozen pretrained language model).

:class:`TreeSource` is the one place the choice is made, shared by the dependency-guided encoder and the
tree-aware aspect head. It returns a tree in one of the forms of :mod:`onlstm_tasks.interaction.base`:

* ``none``    -> ``None`` (no tree: every token is its own root, so ``h_p(i) = h_i``);
* ``gold``    -> the batch's gold heads, ``LongTensor [B, T]`` (0-based, root and padding point to themselves);
* ``induced`` -> from an encoder output's distances (:class:`HasDistances`): layer
  ``distance_layer`` of :meth:`~onlstm_tasks.encoders.base.ONLSTMOutput.combined_distances` (directions merged by
  ``direction_combination``; the master gate ``distance_gate``: ``forget``, the paper's, or ``input``), then
  hard heads ``[B, T]`` (:func:`heads_tensor`, no gradient) or soft head weights ``[B, T, T]``
  (:func:`soft_heads` at ``soft_temperature``, differentiable w.r.t. the distances);
* ``lm``      -> hard heads ``[B, T]`` induced from the distances of a frozen language model (the
  ``LanguageModel`` checkpoint ``lm_checkpoint``; its layer ``distance_layer``, directions merged by
  ``direction_combination``, master gate ``distance_gate``), or of a tree ensemble: ``ensemble`` names its readings
  (``m1:input:l3:forward,m2:input:l2:mean``, :mod:`onlstm_tasks.trees.ensemble`) over one or several checkpoints
  (``lm_checkpoint`` a list: ``m1`` the first). The task model (a layer above) runs those language models and passes
  their heads down where gold heads travel (the ``heads`` argument): here they are taken as given, like gold ones.
  This module never reads the checkpoints (``trees`` imports nothing above it).

Models take it whole as ``tree_source`` (:meth:`TreeSource.coerce`): a TreeSource, in YAML a mapping of its fields
(``tree_source: {kind: induced, distance_layer: -1}``) or the kind alone (``tree_source: induced``).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

import torch

from onlstm_tasks.errors import ConfigError
from onlstm_tasks.trees.induce import heads_tensor, soft_heads

TREE_SOURCES = ("none", "induced", "gold", "lm")
INDUCED_HEADS = ("hard", "soft")
DIRECTION_COMBINATIONS = ("mean", "forward", "backward", "max", "min")  # of encoders.base.combine_directions
DISTANCE_GATES = ("forget", "input")  # the master gate whose distances give the tree (HasDistances)


@runtime_checkable
class HasDistances(Protocol):
    """The capability of an encoder output that carries an ON-LSTM's syntactic distances
    (:class:`onlstm_tasks.encoders.base.ONLSTMOutput` and its subclasses), asked for with ``isinstance``:
    ``distances`` and ``input_distances`` [layers, directions, B, T], and ``combined_distances(how, which)``
    [layers, B, T]."""

    distances: torch.Tensor
    input_distances: torch.Tensor

    def combined_distances(self, how: str = "mean", which: str = "forget") -> torch.Tensor: ...


@dataclass(frozen=True)
class TreeSource:
    kind: str = "none"
    induced_heads: str = "hard"
    distance_layer: int = -1
    direction_combination: str = "mean"
    soft_temperature: float = 1.0
    # kind lm: the LanguageModel checkpoint whose trees the model reads, or a list of them (an ensemble's models)
    lm_checkpoint: str | list[str] | None = None
    distance_gate: str = "forget"  # induced / lm: the master gate whose distances give the tree
    # kind lm: a tree ensemble's readings, "[mMODEL:]GATE:lLAYER:COMBINATION,..." (MODEL and LAYER from 1), in place
    # of distance_layer / distance_gate / direction_combination
    ensemble: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.lm_checkpoint, (list, tuple)):  # a tuple, so the source stays hashable
            paths = tuple(str(p) for p in self.lm_checkpoint)
            object.__setattr__(self, "lm_checkpoint", paths[0] if len(paths) == 1 else paths or None)
        if self.kind not in TREE_SOURCES:
            raise ValueError(f"tree_source must be one of {TREE_SOURCES}, got {self.kind!r}")
        if self.kind == "lm" and not self.lm_checkpoint:
            raise ConfigError("tree_source kind 'lm' needs lm_checkpoint: the path of the LanguageModel checkpoint "
                             "whose trees the model reads, e.g. tree_source: {kind: lm, lm_checkpoint: "
                             "runs/lm_unlabelled_en/lightning_logs/version_0/checkpoints/best.ckpt}")
        if self.kind != "lm" and self.lm_checkpoint:
            raise ConfigError(f"lm_checkpoint applies to tree_source kind 'lm' only, got kind {self.kind!r}")
        if self.ensemble is not None and self.kind != "lm":
            raise ConfigError(f"ensemble applies to tree_source kind 'lm' only, got kind {self.kind!r}")
        if self.kind == "lm" and isinstance(self.lm_checkpoint, tuple) and not self.ensemble:
            raise ConfigError(f"tree_source kind 'lm' with {len(self.lm_checkpoint)} lm_checkpoint files needs an "
                              "ensemble naming their readings, e.g. ensemble: m1:input:l3:forward,m2:input:l2:mean")
        if self.kind == "lm" and self.induced_heads != "hard":
            raise ConfigError("tree_source kind 'lm' gives hard heads only (the language model is frozen: soft heads "
                             "would train nothing); set induced_heads: hard")
        if self.induced_heads not in INDUCED_HEADS:
            raise ValueError(f"induced_heads must be one of {INDUCED_HEADS}, got {self.induced_heads!r}")
        if self.direction_combination not in DIRECTION_COMBINATIONS:
            raise ValueError(f"direction_combination must be one of {DIRECTION_COMBINATIONS}, "
                             f"got {self.direction_combination!r}")
        if self.distance_gate not in DISTANCE_GATES:
            raise ValueError(f"distance_gate must be one of {DISTANCE_GATES}, got {self.distance_gate!r}")
        if self.soft_temperature <= 0:
            raise ValueError(f"soft_temperature must be positive, got {self.soft_temperature}")

    @property
    def lm_checkpoints(self) -> tuple[str, ...]:
        """kind lm: the language models' checkpoint paths (one or more; ``m1`` of an ensemble the first)."""
        if self.lm_checkpoint is None:
            return ()
        return self.lm_checkpoint if isinstance(self.lm_checkpoint, tuple) else (self.lm_checkpoint,)

    @classmethod
    def coerce(cls, value: TreeSource | str | Mapping[str, object], owner: str = "",
               **flat: object) -> TreeSource:
        """The :class:`TreeSource` a model's ``tree_source`` argument names: a TreeSource as it is, a mapping of its
        fields (YAML ``tree_source: {kind: induced, distance_layer: -1}``) or a kind alone (the short form
        ``tree_source: induced``, every other field at its default).

        ``flat``: the deprecated flattened fields (``induced_heads``, ``distance_layer``, ...) that models took
        beside a ``tree_source`` kind before the TreeSource was passed whole, and that checkpoints written then
        still hold; ``None`` values are absent ones. Given any, they fill the TreeSource (with a
        DeprecationWarning naming ``owner``); given with a TreeSource or mapping, they must agree with it.
        """
        if isinstance(value, Mapping):
            value = cls(**value)
        elif isinstance(value, str):
            value = cls(value)
        elif not isinstance(value, cls):
            raise ValueError(f"tree_source must be a TreeSource, a mapping of its fields or one of {TREE_SOURCES}, "
                             f"got {type(value).__name__}")
        given = {key: v for key, v in flat.items() if v is not None}
        if not given:
            return value
        names = sorted(given)
        warnings.warn(f"{owner or 'the model'}: the flat arguments {', '.join(names)} are deprecated; give them inside "
                      f"tree_source, e.g. tree_source: {{kind: {value.kind}, {names[0]}: ...}}",
                      DeprecationWarning, stacklevel=3)
        merged = replace(value, **given)
        if value != replace(cls(), kind=value.kind, lm_checkpoint=value.lm_checkpoint) and merged != value:
            raise ValueError(f"tree_source {value} and the flat arguments {given} disagree; give the settings inside "
                             "tree_source only")
        return merged

    def tree(self, mask: torch.Tensor, gold: torch.Tensor | None = None, encoded=None,
             encoder: object = None) -> torch.Tensor | None:
        """The tree for a batch (form per the module docstring).

        ``gold``: the batch's gold heads ``[B, T]`` (needed for ``gold``), or for ``lm`` the heads the task model
        induced from its frozen language model; ``encoded``: the output of ``encoder``
        whose distances induce the tree (needed for ``induced``; ``encoder`` only names it in errors).
        """
        if self.kind == "none":
            return None
        if self.kind == "gold":
            return self._gold(gold, mask)
        if self.kind == "lm":
            if gold is None:
                raise ValueError("tree_source='lm' needs the language model's heads, which the task model (NERTagger, "
                                 "AspectSentimentClassifier) computes for each batch and passes as heads; this "
                                 "module was called without them")
            return self._gold(gold, mask)
        name = type(encoder).__name__ if encoder is not None else "the encoder"
        if not isinstance(encoded, HasDistances):
            raise ValueError(f"tree_source='induced' needs an encoder that returns syntactic distances (an ON-LSTM), "
                             f"but {name} returns none; use tree_source 'gold' or 'none', or an ON-LSTM encoder")
        layers = encoded.combined_distances(self.direction_combination, self.distance_gate)  # [layers, B, T]
        if not -layers.size(0) <= self.distance_layer < layers.size(0):
            raise ValueError(f"distance_layer={self.distance_layer} is out of range: {name} returns distances of "
                             f"{layers.size(0)} layer(s)")
        distances = layers[self.distance_layer]
        if self.induced_heads == "hard":
            return heads_tensor(distances, mask)
        return soft_heads(distances, mask, self.soft_temperature)

    @staticmethod
    def _gold(gold: torch.Tensor | None, mask: torch.Tensor) -> torch.Tensor:
        if gold is None:
            raise ValueError("tree_source='gold' needs gold dependency heads, but the batch has none: the "
                             "split needs trees (NER: a CoNLL-X/U source with HEAD columns, format conllx, or "
                             "constituency parses, formats ontonotes and conll2012; aspect sentiment: data.parses "
                             "pointing at the *_depparsed.json parser output)")
        if gold.shape != mask.shape or gold.dtype != torch.long:
            raise ValueError(f"gold heads must be a long tensor of shape {tuple(mask.shape)}, got {gold.dtype} "
                             f"{tuple(gold.shape)}")
        lengths = mask.sum(dim=1, keepdim=True)
        if bool((mask & ((gold < 0) | (gold >= lengths))).any()):
            raise ValueError("gold heads must be 0-based positions of real tokens of the same sentence")
        self_idx = torch.arange(mask.size(1), device=gold.device).expand_as(gold)
        return torch.where(mask, gold, self_idx)  # padding points to itself whatever the collate wrote
