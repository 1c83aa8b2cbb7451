"""Starting a task model's encoder and word embeddings from a :class:`~onlstm_tasks.tasks.language_model.LanguageModel`
checkpoint (``pretrained_lm`` of the NER and aspect-sentiment models).

* Encoder: the language model's encoder weights are copied when the task encoder has the same parameters (same
  class, sizes and layers; a bidirectional language model's encoder is an
  :class:`~onlstm_tasks.encoders.IndependentDirections`). A unidirectional language model can also start the
  forward stack of an ``IndependentDirections`` task encoder (the backward stack keeps its initialisation).
* Word embeddings: the task's :class:`~onlstm_tasks.embedders.word.WordEmbedding` rows of words the language model
  knows (looked up with the language model's word normalisation) are copied; the others keep their
  initialisation (random, or pretrained vectors). The coverage is logged and returned.

Applied once, at the start of ``fit`` (the model's ``setup``), before Lightning restores a checkpoint: so resuming
a run, or testing a trained model, never needs the language model's file.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import nn

from onlstm_tasks.data.core.checkpoint_file import read_checkpoint_file
from onlstm_tasks.data.core.common import word_options
from onlstm_tasks.data.core.features import WordNormalizer
from onlstm_tasks.data.core.vocab import PAD
from onlstm_tasks.embedders.word import WordEmbedding
from onlstm_tasks.encoders.independent_directions import IndependentDirections

log = logging.getLogger(__name__)

ENCODER_PREFIX = "net.encoder."
EMBEDDING_KEY = "net.embedder.embedding.weight"


@dataclass(frozen=True)
class LanguageModelWeights:
    """What a task model takes from a language-model checkpoint."""

    path: str
    encoder: dict[str, torch.Tensor]  # the encoder's state dict (keys without ``net.encoder.``)
    embedding: torch.Tensor  # [V, D] word vectors, rows in ``vocab`` order
    vocab: list[str]
    normalizer: WordNormalizer  # how the language model's data module normalised words
    bidirectional: bool

    def part(self, direction: str | None) -> dict[str, torch.Tensor]:
        """The whole encoder's weights (``None``), or one stack's of a bidirectional model (``forward``/``backward``)."""
        if direction is None:
            return self.encoder
        if not self.bidirectional:
            return self.encoder  # one stack only: every target starts from it
        prefix = f"{direction}_encoder."
        return {k[len(prefix):]: v for k, v in self.encoder.items() if k.startswith(prefix)}


def read_language_model(path: str) -> LanguageModelWeights:
    """The encoder weights, word vectors, vocabulary and word normalisation of a LanguageModel checkpoint."""
    checkpoint = read_checkpoint_file(path)
    state = checkpoint.get("state_dict") or {}
    hparams = checkpoint.get("hyper_parameters") or {}
    if EMBEDDING_KEY not in state or "word_vocab" not in hparams:
        raise ValueError(f"{path}: not a LanguageModel checkpoint (no {EMBEDDING_KEY} or word_vocab)")
    options = word_options(checkpoint.get("datamodule_hyper_parameters"))
    encoder = {k[len(ENCODER_PREFIX):]: v for k, v in state.items() if k.startswith(ENCODER_PREFIX)}
    return LanguageModelWeights(path, encoder, state[EMBEDDING_KEY], list(hparams["word_vocab"]),
                                options[0] if options else WordNormalizer(), bool(hparams.get("bidirectional")))


def init_from_language_model(path: str, embedder: nn.Module, targets: list[tuple[nn.Module, str | None]],
                             word_vocab: list[str]) -> float:
    """Copies a language-model checkpoint's encoder weights into each target encoder (``(module, direction)``:
    direction ``None`` for the whole encoder, ``forward``/``backward`` for one stack of a bidirectional language
    model) and its word vectors into the word embedding of ``embedder`` (rows following ``word_vocab``). Logs what
    was copied and returns the word coverage. Raises ValueError naming ``path`` when shapes do not fit."""
    weights = read_language_model(path)
    parts = [_load_encoder(path, module, weights.part(direction)) for module, direction in targets]
    found, total = _load_words(path, embedder, word_vocab, weights.vocab, weights.embedding, weights.normalizer)
    coverage = found / total if total else 0.0
    log.info("initialised from language model %s: encoder(s) %s; word vectors for %d of %d vocabulary words "
             "(%.1f%%), the others keep their initialisation", path, "; ".join(parts), found, total, 100 * coverage)
    return coverage


def _load_encoder(path: str, encoder: nn.Module, lm_state: dict[str, torch.Tensor]) -> str:
    if _fits(encoder, lm_state):
        encoder.load_state_dict(lm_state)
        return "all"
    if isinstance(encoder, IndependentDirections) and _fits(encoder.forward_encoder, lm_state):
        encoder.forward_encoder.load_state_dict(lm_state)
        return "forward stack; the backward stack keeps its initialisation"
    own = encoder.state_dict()
    missing, unexpected = sorted(set(own) - set(lm_state)), sorted(set(lm_state) - set(own))
    shapes = [f"{k}: {tuple(own[k].shape)} vs {tuple(lm_state[k].shape)}" for k in sorted(set(own) & set(lm_state))
              if own[k].shape != lm_state[k].shape]
    raise ValueError(
        f"{path}: the language model's encoder does not fit this model's {type(encoder).__name__} "
        f"(missing {missing[:4]}, unexpected {unexpected[:4]}, shapes differ {shapes[:4]}); configure the task "
        f"encoder as the language model's (same class, sizes and layers; a bidirectional language model's is "
        f"IndependentDirections over it)")


def _fits(module: nn.Module, state: dict[str, torch.Tensor]) -> bool:
    own = module.state_dict()
    return set(own) == set(state) and all(own[k].shape == state[k].shape for k in own)


def _load_words(path: str, embedder: nn.Module, word_vocab: list[str], lm_vocab: list[str], lm_vectors: torch.Tensor,
                normalizer: WordNormalizer) -> tuple[int, int]:
    tables = [m for m in embedder.modules() if isinstance(m, WordEmbedding)]
    total = len(word_vocab) - 2  # <pad>, <unk> excluded
    if not tables:
        log.warning("%s: the model's embedder has no WordEmbedding: only the encoder is initialised", path)
        return 0, total
    if len(tables) > 1:
        raise ValueError(f"{path}: the embedder has {len(tables)} word embeddings; cannot tell which to initialise")
    table = tables[0]
    weight = table.embedding.weight
    if weight.size(1) != lm_vectors.size(1):
        raise ValueError(f"{path}: the language model's word vectors have {lm_vectors.size(1)} dimensions, the "
                         f"model's word embedding {weight.size(1)}; set the word embedding's dim to match")
    if weight.size(0) != len(word_vocab):
        raise ValueError(f"{path}: the word embedding has {weight.size(0)} rows for {len(word_vocab)} words")
    table.load_pretrained()  # pretrained vectors first (if any): the language model's rows win
    index = {w: i for i, w in enumerate(lm_vocab)}
    rows, sources = [], []
    for row, word in enumerate(word_vocab):
        if word == PAD:
            continue
        source = index.get(word, index.get(normalizer(word)))
        if source is not None:
            rows.append(row)
            sources.append(source)
    with torch.no_grad():
        weight[torch.tensor(rows, dtype=torch.long)] = lm_vectors[torch.tensor(sources, dtype=torch.long)].to(weight)
    return sum(1 for r in rows if r >= 2), total
