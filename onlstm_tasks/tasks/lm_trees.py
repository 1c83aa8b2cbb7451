"""Trees from a frozen pretrained language model: what ``tree_source: {kind: lm, lm_checkpoint: ...}`` reads.

:class:`LanguageModelTrees` holds a :class:`~onlstm_tasks.tasks.language_model.LanguageModel`'s word embedding and
encoder (not its softmax), frozen: its parameters never require a gradient, it stays in eval mode whatever mode the
task model is put in (no dropout: a sentence always gets the same tree), and the task models leave it out of their
optimiser. For a batch of raw token lists it frames each sentence as the language model read sentences in training
(``LanguageModel.sentence_frame``: ``<eos>`` on both sides), looks the words up in the language model's vocabulary
with its data module's word normalisation (unknown words -> its ``<unk>``), runs the encoder under
``torch.no_grad()`` and reads layer ``distance_layer`` of the words' distances from master gate
``distance_gate``, directions merged by ``direction_combination`` (the tree source's fields): the same distances,
so the same trees, as ``onlstm-trees`` and :class:`~onlstm_tasks.probing.probe.EncoderProbe` induce from that
checkpoint for the same sentences.

A tree ensemble (the tree source's ``ensemble``, :mod:`onlstm_tasks.trees.ensemble`) holds one frozen language
model per ``lm_checkpoint`` and reads each of its readings (model, gate, layer, directions) off them; a sentence's
distances are then the mean of the readings' per-sentence rank-normalised distances, the same ones ``onlstm-trees
eval --ensemble`` scores.

The distances of each sentence are cached (keyed by its words; cleared when weights are loaded), so the language
model runs once per distinct sentence, not once per epoch. The cache holds at most ``cache_sentences`` sentences
(200,000: a few tens of MB; the oldest go first), so predicting over an endless stream does not grow it without
bound.

Self-contained task checkpoints: the task model builds this module from the checkpoint file once (at the start of
training) and keeps in its hyper-parameters (``lm_trees``) what rebuilds it without the file: the language model's
plain init arguments, its vocabulary and its word options (one object per language model: a list for an ensemble
of several), as one JSON string (so that LightningCLI, re-reading a
checkpoint's hyper-parameters, neither turns the encoder's ``class_path`` into a class nor type-checks a vocabulary
of tens of thousands of words item by item). The weights travel in the task model's state dict.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from onlstm_tasks.errors import ConfigError
from onlstm_tasks.tasks.frozen_lm import FrozenLanguageModel, read_lm_config, saved_lm_config
from onlstm_tasks.tasks.tree_fields import distance_tree_fields
from onlstm_tasks.trees.ensemble import Reading, ensemble_distances, parse_readings
from onlstm_tasks.trees.induce import heads_tensor
from onlstm_tasks.trees.source import HasDistances, TreeSource

log = logging.getLogger(__name__)

__all__ = ["LanguageModelTrees", "attach_lm_trees", "lm_tree_source"]

def lm_tree_source(model: nn.Module) -> TreeSource | None:
    """The ``tree_source`` of kind ``lm`` among ``model``'s modules (None without one). Several must agree: one
    set of frozen language models and one reading of them serve the whole model."""
    sources = {getattr(m, "tree_source", None) for m in model.modules()}
    sources = {s for s in sources if isinstance(s, TreeSource) and s.kind == "lm"}
    if len(sources) > 1:
        raise ConfigError(f"the model has tree sources of kind lm that differ ({sorted(map(str, sources))}); give "
                          "them the same lm_checkpoint, distance_layer, direction_combination, distance_gate and "
                          "ensemble")
    return next(iter(sources), None)


def source_readings(source: TreeSource, models: int) -> list[Reading] | None:
    """The ensemble's readings of ``source`` (None without an ensemble: the single reading of its fields), checked
    against the number of language models it names."""
    if not source.ensemble:
        return None
    try:
        readings = parse_readings(source.ensemble)
    except ValueError as err:
        raise ConfigError(f"tree_source ensemble: {err}") from None
    beyond = [str(r) for r in readings if r.model >= models]
    if beyond:
        raise ConfigError(f"tree_source ensemble reads {beyond[0]}, but lm_checkpoint names {models} language "
                          f"model(s) (m1 is the first)")
    return readings


class LanguageModelTrees(nn.Module):
    """Frozen language models' embeddings and encoders (:class:`~.frozen_lm.FrozenLanguageModel`, one per
    ``lm_checkpoint``), and the trees they induce (module docstring).

    Args:
        configs: per language model, what :func:`~.frozen_lm.read_lm_config` reads off its checkpoint (a single
            config is one language model).
        source: the tree source of kind ``lm`` (its reading: ``distance_layer``, ``distance_gate`` and
            ``direction_combination``, or ``ensemble``).
    """

    cache_sentences = 200_000  # distances kept for at most this many distinct sentences (oldest dropped first)

    def __init__(self, configs: dict[str, Any] | Sequence[dict[str, Any]], source: TreeSource) -> None:
        super().__init__()
        configs = [configs] if isinstance(configs, dict) else list(configs)
        self.models = nn.ModuleList(FrozenLanguageModel(config) for config in configs)
        self.source = source
        self.readings = source_readings(source, len(configs))
        self._cache: dict[tuple[str, ...], torch.Tensor] = {}
        self._register_load_state_dict_pre_hook(self._before_load)

    def _before_load(self, state_dict, prefix, *args) -> None:
        """Clears the cache; renames the keys of checkpoints written before ensembles (one language model, its
        ``embedder.*`` / ``encoder.*`` directly under this module) to those of model 0."""
        self._cache.clear()
        for key in [k for k in state_dict if k.startswith((prefix + "embedder.", prefix + "encoder."))]:
            state_dict[f"{prefix}models.0.{key[len(prefix):]}"] = state_dict.pop(key)

    @classmethod
    def from_checkpoint(cls, paths: str | Sequence[str], source: TreeSource) -> LanguageModelTrees:
        """Reads the language models of ``paths`` (one path or several, in ``m1, m2, ...`` order)."""
        paths = [paths] if isinstance(paths, str) else list(paths)
        read = [read_lm_config(str(path)) for path in paths]
        module = cls([config for config, _ in read], source)
        for model, (_, weights) in zip(module.models, read):
            model.load_language_model(weights)
        reading = source.ensemble or (f"layer {source.distance_layer}, directions {source.direction_combination}, "
                                      f"master {source.distance_gate} gate")
        log.info("tree_source lm: trees of %s (%s; %s-word vocabulary), frozen", ", ".join(map(str, paths)), reading,
                 "/".join(str(len(config["word_vocab"])) for config, _ in read))
        return module

    def train(self, mode: bool = True) -> LanguageModelTrees:
        """Always eval (no dropout): a sentence always gets the same tree."""
        return super().train(False)

    def config_json(self) -> str:
        """What rebuilds the language models without their files, as the JSON string a task model keeps in its
        ``lm_trees`` hyper-parameter: one config object (one language model) or a list of them."""
        configs = [model.config for model in self.models]
        return json.dumps(configs[0] if len(configs) == 1 else configs, ensure_ascii=False)

    def word_ids(self, sentences: Sequence[Sequence[str]], model: int = 0):
        """The framed sentences as language model ``model``'s word ids (:meth:`FrozenLanguageModel.word_ids`)."""
        return self.models[model].word_ids(sentences)

    def _read(self, model: int, sentences: list[tuple[str, ...]], layer: int, combination: str,
              gate: str) -> torch.Tensor:
        """Layer ``layer`` of language model ``model``'s distances ``[B, T]`` (CPU float) for ``sentences``."""
        encoded, _ = self.models[model].encode(sentences)
        if not isinstance(encoded, HasDistances):
            raise ConfigError(f"tree_source lm: the language model {self.models[model].config.get('checkpoint')} "
                              f"has a {type(self.models[model].encoder).__name__} encoder, which gives no syntactic "
                              f"distances; train the language model with an ONLSTM encoder")
        layers = encoded.combined_distances(combination, gate)
        if not -layers.size(0) <= layer < layers.size(0):
            raise ConfigError(f"tree_source lm: layer {layer} (0-based) is out of range: the language model "
                              f"{self.models[model].config.get('checkpoint')} has {layers.size(0)} layer(s)")
        return layers[layer].float().cpu()

    @torch.no_grad()
    def distances(self, sentences: Sequence[Sequence[str]]) -> list[torch.Tensor]:
        """Per sentence the distances the trees are read from (``[n]``, CPU float), cached by its words: the tree
        source's reading, or the ensemble of its readings (their mean rank-normalised distances)."""
        keys = [tuple(words) for words in sentences]
        missing = list(dict.fromkeys(k for k in keys if k not in self._cache))
        if missing:
            source = self.source
            if self.readings is None:
                chosen = self._read(0, missing, source.distance_layer, source.direction_combination,
                                    source.distance_gate)
                for row, key in enumerate(missing):
                    self._cache[key] = chosen[row, :len(key)].clone()
            else:
                read = [self._read(r.model, missing, r.layer, r.combination, r.gate) for r in self.readings]
                for row, key in enumerate(missing):
                    self._cache[key] = ensemble_distances([d[row, :len(key)] for d in read]).float()
        found = [self._cache[k] for k in keys]
        for _ in range(len(self._cache) - self.cache_sentences):  # dicts keep insertion order: oldest first
            del self._cache[next(iter(self._cache))]
        return found

    def padded_distances(self, sentences: Sequence[Sequence[str]], mask: torch.Tensor) -> torch.Tensor:
        """:meth:`distances` as a ``[B, T]`` tensor on ``mask``'s device (zeros at padding)."""
        out = torch.zeros(mask.shape, dtype=torch.float)
        for row, d in enumerate(self.distances(sentences)):
            out[row, :d.numel()] = d
        return out.to(mask.device)

    def heads(self, sentences: Sequence[Sequence[str]], mask: torch.Tensor) -> torch.Tensor:
        """Hard heads ``[B, T]`` (0-based; root and padding point to themselves) for a batch of sentences whose
        words fill ``mask`` (left-aligned)."""
        return heads_tensor(self.padded_distances(sentences, mask), mask)

    def tree_fields(self, sentences: Sequence[Sequence[str]], mask: torch.Tensor) -> list[dict]:
        """Prediction-record fields per sentence: ``tree`` (bracketed) and ``heads`` (1-based, 0 = root)."""
        return distance_tree_fields(self.padded_distances(sentences, mask), mask, sentences)


def attach_lm_trees(model: nn.Module, saved: str | None) -> LanguageModelTrees | None:
    """The frozen language models a task model's ``tree_source: lm`` reads (None without such a source): rebuilt
    from ``saved`` (the task model's ``lm_trees`` hyper-parameter, :meth:`LanguageModelTrees.config_json` as a
    checkpoint holds it: the weights then come with the task model's state dict) or, without it, read from the
    tree source's ``lm_checkpoint`` files."""
    source = lm_tree_source(model)
    if source is None:
        if saved:
            raise ConfigError("lm_trees is set but no tree_source of the model has kind lm")
        return None
    if saved:
        return LanguageModelTrees(saved_lm_config(saved, "lm_trees"), source)
    return LanguageModelTrees.from_checkpoint(source.lm_checkpoints, source)
