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

The distances of each sentence are cached (keyed by its words; cleared when weights are loaded), so the language
model runs once per distinct sentence, not once per epoch. The cache holds at most ``cache_sentences`` sentences
(200,000: a few tens of MB; the oldest go first), so predicting over an endless stream does not grow it without
bound.

Self-contained task checkpoints: the task model builds this module from the checkpoint file once (at the start of
training) and keeps in its hyper-parameters (``lm_trees``) what rebuilds it without the file: the language model's
plain init arguments, its vocabulary and its word options, as one JSON string (so that LightningCLI, re-reading a
checkpoint's hyper-parameters, neither turns the encoder's ``class_path`` into a class nor type-checks a vocabulary
of tens of thousands of words item by item). The weights travel in the task model's state dict.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from onlstm_tasks.errors import ConfigError
from onlstm_tasks.tasks.frozen_lm import FrozenLanguageModel, read_lm_config, saved_lm_config
from onlstm_tasks.tasks.tree_fields import distance_tree_fields
from onlstm_tasks.trees.induce import heads_tensor
from onlstm_tasks.trees.source import TreeSource

log = logging.getLogger(__name__)

__all__ = ["LanguageModelTrees", "attach_lm_trees", "lm_tree_source"]

def lm_tree_source(model: nn.Module) -> TreeSource | None:
    """The ``tree_source`` of kind ``lm`` among ``model``'s modules (None without one). Several must agree: one
    frozen language model and one reading of it serve the whole model."""
    sources = {getattr(m, "tree_source", None) for m in model.modules()}
    sources = {s for s in sources if isinstance(s, TreeSource) and s.kind == "lm"}
    if len(sources) > 1:
        raise ConfigError(f"the model has tree sources of kind lm that differ ({sorted(map(str, sources))}); give "
                          "them the same lm_checkpoint, distance_layer, direction_combination and distance_gate")
    return next(iter(sources), None)


class LanguageModelTrees(FrozenLanguageModel):
    """A frozen language model's embedding and encoder (:class:`~.frozen_lm.FrozenLanguageModel`), and the trees
    they induce (module docstring).

    Args:
        config: see :class:`~.frozen_lm.FrozenLanguageModel`.
        source: the tree source of kind ``lm`` (its ``distance_layer`` and ``direction_combination``).
    """

    cache_sentences = 200_000  # distances kept for at most this many distinct sentences (oldest dropped first)

    def __init__(self, config: dict[str, Any], source: TreeSource) -> None:
        super().__init__(config)
        self.source = source
        self._cache: dict[tuple[str, ...], torch.Tensor] = {}
        self._register_load_state_dict_pre_hook(lambda *args, **kwargs: self._cache.clear())

    @classmethod
    def from_checkpoint(cls, path: str, source: TreeSource) -> LanguageModelTrees:
        config, weights = read_lm_config(path)
        module = cls(config, source)
        module.load_language_model(weights)
        log.info("tree_source lm: trees of %s (layer %d, directions %s, master %s gate; %d-word vocabulary), frozen",
                 path, source.distance_layer, source.direction_combination, source.distance_gate,
                 len(config["word_vocab"]))
        return module

    @torch.no_grad()
    def distances(self, sentences: Sequence[Sequence[str]]) -> list[torch.Tensor]:
        """Per sentence the distances the trees are read from (``[n]``, CPU float), cached by its words."""
        keys = [tuple(words) for words in sentences]
        missing = list(dict.fromkeys(k for k in keys if k not in self._cache))
        if missing:
            encoded, mask = self.encode(missing)
            layers = encoded.combined_distances(self.source.direction_combination, self.source.distance_gate)
            if not -layers.size(0) <= self.source.distance_layer < layers.size(0):
                raise ConfigError(f"tree_source lm: distance_layer={self.source.distance_layer} is out of range: the "
                                  f"language model {self.config.get('checkpoint')} has {layers.size(0)} layer(s)")
            chosen = layers[self.source.distance_layer].float().cpu()
            for row, key in enumerate(missing):
                self._cache[key] = chosen[row, :len(key)].clone()
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
    """The frozen language model a task model's ``tree_source: lm`` reads (None without such a source): rebuilt from
    ``saved`` (the task model's ``lm_trees`` hyper-parameter, :meth:`LanguageModelTrees.config_json` as a checkpoint
    holds it: the weights then come with the task model's state dict) or, without it, read from the tree source's ``lm_checkpoint`` file."""
    source = lm_tree_source(model)
    if source is None:
        if saved:
            raise ConfigError("lm_trees is set but no tree_source of the model has kind lm")
        return None
    if saved:
        return LanguageModelTrees(saved_lm_config(saved, "lm_trees"), source)
    return LanguageModelTrees.from_checkpoint(source.lm_checkpoint, source)
