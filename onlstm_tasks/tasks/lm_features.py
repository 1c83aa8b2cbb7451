"""LM features: a frozen pretrained language model's layers, mixed with learned scalar weights (ELMo's scalar mix,
Peters et al. 2018), concatenated to a task model's own token features.

``NERTagger(lm_features=PATH)`` (in YAML ``model.init_args.lm_features``) wraps the configured embedder (words,
vectors, characters) in :class:`WithLanguageModelFeatures`: the encoder then reads ``[own features; mix]``. The mix
of layers ``h_0`` (the language model's word vectors) to ``h_L`` (its encoder's layers, both directions
concatenated) is ``gamma * sum_l softmax(s)_l * h_l``, with ``s`` and ``gamma`` trained with the task and every layer
zero-padded to the widest (the language model's layers may differ in width: 128, 512, 512, 256 for the shipped
bidirectional one). The language model itself is frozen (:class:`~.frozen_lm.FrozenLanguageModel`): no gradient
reaches it, it stays in eval mode, and the task model does not optimise it. Its weights travel in the task model's
checkpoint and its configuration in the hyper-parameter ``lm_features_config``, so predicting needs no language
model file.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import nn

from onlstm_tasks.data.core.batching import TokenBatch
from onlstm_tasks.embedders.base import TokenEmbedder
from onlstm_tasks.tasks.frozen_lm import FrozenLanguageModel, read_lm_config, saved_lm_config

log = logging.getLogger(__name__)

__all__ = ["LanguageModelFeatures", "WithLanguageModelFeatures", "attach_lm_features"]


class LanguageModelFeatures(FrozenLanguageModel):
    """The scalar mix of a frozen language model's layers at the words of a batch: ``[B, T, output_size]``."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config)
        with torch.no_grad():
            probe = self.encoder(self.embedder(self.word_ids([["a"]])), None)
        self.widths = [self.embedder.output_size, *(layer.size(-1) for layer in probe.layers)]
        self.output_size = max(self.widths)
        self.mix_logits = nn.Parameter(torch.zeros(len(self.widths)))  # s: softmax(s) weighs the layers
        self.gamma = nn.Parameter(torch.ones(()))  # the mix's scale

    @classmethod
    def from_checkpoint(cls, path: str) -> LanguageModelFeatures:
        config, weights = read_lm_config(path)
        module = cls(config)
        module.load_language_model(weights)
        log.info("lm_features: the layers of %s (%s wide; %d-word vocabulary), frozen, mixed by learned weights",
                 path, "/".join(map(str, module.widths)), len(config["word_vocab"]))
        return module

    def layers(self, sentences: list[list[str]]) -> tuple[list[torch.Tensor], torch.Tensor]:
        """The language model's layers at the words (``[B, T, width]`` each, no gradient) and the words' mask."""
        with torch.no_grad():
            tokens = self.word_ids(sentences)
            vectors = self.embedder(tokens)
            encoded = self.encoder(vectors, tokens.mask)
            lead, trail = len(self.lead), len(self.trail)
            steps = tokens.mask.size(1) - lead - trail
            mask = tokens.mask[:, lead + trail:]
            keep = mask.unsqueeze(-1).to(vectors.dtype)
            return [layer.narrow(1, lead, steps) * keep for layer in (vectors, *encoded.layers)], mask

    def forward(self, sentences: list[list[str]], steps: int) -> torch.Tensor:
        """The mix for a batch of sentences, ``[B, steps, output_size]`` (zeros past each sentence's words)."""
        layers, _ = self.layers(sentences)
        weights = torch.softmax(self.mix_logits, 0)
        mixed = None
        for weight, layer in zip(weights, layers):
            term = nn.functional.pad(layer, (0, self.output_size - layer.size(-1))) * weight
            mixed = term if mixed is None else mixed + term
        mixed = self.gamma * mixed
        if mixed.size(1) < steps:  # the batch's padding is longer than its longest sentence's words
            mixed = nn.functional.pad(mixed, (0, 0, 0, steps - mixed.size(1)))
        return mixed[:, :steps]


class WithLanguageModelFeatures(TokenEmbedder):
    """A task model's own embedder with :class:`LanguageModelFeatures` concatenated to its output."""

    def __init__(self, own: TokenEmbedder, features: LanguageModelFeatures) -> None:
        super().__init__()
        self.own, self.features = own, features
        self.output_size = own.output_size + features.output_size

    def forward(self, batch: TokenBatch) -> torch.Tensor:
        own = self.own(batch)
        if batch.words is None:
            raise ValueError("lm_features needs the batch's words (TokenBatch.words), which this batch lacks")
        mixed = self.features(batch.words, own.size(1)).to(own.dtype)
        return torch.cat([own, mixed * batch.mask.unsqueeze(-1).to(own.dtype)], dim=-1)


def attach_lm_features(own: TokenEmbedder, path: str | None, saved: str | None
                       ) -> tuple[TokenEmbedder, LanguageModelFeatures | None]:
    """``own`` wrapped with LM features (and the features), or ``own`` unchanged without ``path`` or ``saved``: built
    from ``saved`` (the hyper-parameter ``lm_features_config``: the weights then come with the task model's state
    dict) or else read from the checkpoint ``path``."""
    if not path and not saved:
        return own, None
    features = LanguageModelFeatures(saved_lm_config(saved, "lm_features_config")) if saved else \
        LanguageModelFeatures.from_checkpoint(path)
    return WithLanguageModelFeatures(own, features), features
