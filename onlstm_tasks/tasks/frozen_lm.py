"""A frozen pretrained language model inside a task model: what ``tree_source: lm`` (:mod:`.lm_trees`) and LM
features (:mod:`.lm_features`) read.

:class:`FrozenLanguageModel` holds a :class:`~onlstm_tasks.tasks.language_model.LanguageModel`'s word embedding and
encoder (not its softmax), frozen: its parameters never require a gradient, it stays in eval mode whatever mode the
task model is put in (no dropout), and the task models leave it out of their optimiser (they optimise only
parameters that require a gradient). For a batch of raw token lists it frames each sentence as the language model
read sentences in training (``LanguageModel.sentence_frame``: ``<eos>`` on both sides), looks the words up in the
language model's vocabulary with its data module's word normalisation (unknown words -> its ``<unk>``) and runs the
encoder under ``torch.no_grad()``.

Self-contained task checkpoints: the task model builds it from the checkpoint file once (at the start of training)
and keeps in a hyper-parameter what rebuilds it without the file: the language model's plain init arguments, its
vocabulary and its word options, as one JSON string (:meth:`FrozenLanguageModel.config_json`; so that LightningCLI,
re-reading a checkpoint's hyper-parameters, neither turns the encoder's ``class_path`` into a class nor type-checks
a vocabulary of tens of thousands of words item by item). The weights travel in the task model's state dict.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from onlstm_tasks.data.core.batching import TokenBatch
from onlstm_tasks.data.core.checkpoint_file import read_checkpoint_file
from onlstm_tasks.data.core.common import word_options
from onlstm_tasks.data.core.features import TokenEncoder, WordNormalizer
from onlstm_tasks.data.core.vocab import Vocabulary
from onlstm_tasks.encoders.base import EncoderOutput
from onlstm_tasks.errors import CheckpointError, ConfigError
from onlstm_tasks.tasks.hub import build_task_model, plain_init_args
from onlstm_tasks.tasks.language_model import LanguageModel
from onlstm_tasks.tasks.words import trim_frame

__all__ = ["FrozenLanguageModel", "read_lm_config", "saved_lm_config"]

# init arguments of the language model that do not shape its embedding and encoder
_TRAINING_ONLY = ("optimizer", "lr_scheduler", "tree_layer", "tree_directions")
_KEPT_STATE = ("net.embedder.", "net.encoder.")


def read_lm_config(path: str) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """What rebuilds a LanguageModel checkpoint's embedding and encoder (plain values) and their weights."""
    checkpoint = read_checkpoint_file(path)  # CheckpointError naming the file when it is missing or broken
    hparams = dict(checkpoint.get("hyper_parameters") or {})
    state = checkpoint["state_dict"]
    if "word_vocab" not in hparams or "embedding_dim" not in hparams or "net.embedder.embedding.weight" not in state:
        raise CheckpointError(f"{path}: not a LanguageModel checkpoint (tree_source kind lm reads the trees of a "
                              "language model trained with onlstm-tasks fit and a configs/lm/ config)")
    init_args = {k: v for k, v in plain_init_args(hparams, path).items()
                 if k not in _TRAINING_ONLY and k not in ("word_vocab", "char_vocab")}
    options = word_options(checkpoint.get("datamodule_hyper_parameters"))
    normalizer, max_word_length = options or (WordNormalizer(), 30)
    config = {"checkpoint": str(path), "init_args": init_args, "word_vocab": list(hparams["word_vocab"]),
              "word_options": {"lowercase": normalizer.lowercase, "normalize_digits": normalizer.normalize_digits,
                               "lowercase_fallback": normalizer.lowercase_fallback}}
    weights = {k: v for k, v in state.items() if k.startswith(_KEPT_STATE)}
    return config, weights



def saved_lm_config(saved: str, name: str) -> dict[str, Any] | list[dict[str, Any]]:
    """The config (or, for several language models, the list of configs) a task model's hyper-parameter ``name``
    holds (:meth:`FrozenLanguageModel.config_json`)."""
    try:
        return json.loads(saved)
    except (TypeError, json.JSONDecodeError) as err:
        raise ConfigError(f"{name}: not the JSON a task model writes for its frozen language model ({err})") from None


class FrozenLanguageModel(nn.Module):
    """A frozen language model's embedding and encoder (module docstring).

    Args:
        config: what :func:`read_lm_config` reads off a LanguageModel checkpoint (``init_args``, ``word_vocab``,
            ``word_options``; ``checkpoint`` names the source file in messages). Built from it, the weights are
            the language model's initialisation until a state dict is loaded.
    """

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        self.config = config
        lm = build_task_model(LanguageModel, dict(config["init_args"]), {"word_vocab": list(config["word_vocab"])})
        self.embedder, self.encoder = lm.net.embedder, lm.net.encoder
        lead, trail = LanguageModel.sentence_frame
        self.lead, self.trail = tuple(lead), tuple(trail)
        self.words = TokenEncoder(Vocabulary(list(config["word_vocab"])[2:]), Vocabulary([]),
                                  WordNormalizer(**config["word_options"]))
        for parameter in self.parameters():
            parameter.requires_grad_(False)
        self.train(False)

    def load_language_model(self, weights: dict[str, torch.Tensor]) -> None:
        """Loads the language model's weights (``net.embedder.*``, ``net.encoder.*`` of its checkpoint)."""
        missing, unexpected = self.load_state_dict({k[len("net."):]: v for k, v in weights.items()}, strict=False)
        lost = [k for k in missing if k.startswith(("embedder.", "encoder."))] + list(unexpected)
        if lost:
            raise CheckpointError(f"{self.config.get('checkpoint')}: the language model's weights do not fit its own "
                                  f"configuration (e.g. {lost[0]})")

    def config_json(self) -> str:
        """:attr:`config` as the JSON string a task model keeps in a hyper-parameter."""
        return json.dumps(self.config, ensure_ascii=False)

    def train(self, mode: bool = True) -> FrozenLanguageModel:
        """Always eval (no dropout): what the language model gives must not change with the task model's mode."""
        return super().train(False)

    def word_ids(self, sentences: Sequence[Sequence[str]]) -> TokenBatch:
        """The framed sentences as the language model's word ids (a TokenBatch without characters)."""
        rows = [[self.words.word_id(w) for w in (*self.lead, *words, *self.trail)] for words in sentences]
        steps = max(map(len, rows))
        ids = torch.zeros(len(rows), steps, dtype=torch.long)
        mask = torch.zeros(len(rows), steps, dtype=torch.bool)
        for b, row in enumerate(rows):
            ids[b, :len(row)] = torch.tensor(row)
            mask[b, :len(row)] = True
        device = self.embedder.embedding.weight.device
        return TokenBatch(word_ids=ids.to(device), char_ids=ids.new_zeros(len(rows), steps, 1).to(device),
                          mask=mask.to(device), words=[list(words) for words in sentences])

    @torch.no_grad()
    def encode(self, sentences: Sequence[Sequence[str]]) -> tuple[EncoderOutput, torch.Tensor]:
        """The encoder's output at the words' positions (frame cut) and the words' mask ``[B, T]``."""
        tokens = self.word_ids(sentences)
        encoded = self.encoder(self.embedder(tokens), tokens.mask)
        lead, trail = len(self.lead), len(self.trail)
        return trim_frame(encoded, tokens.mask, lead, trail), tokens.mask[:, lead + trail:]
