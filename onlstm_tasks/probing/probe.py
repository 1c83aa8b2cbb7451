"""Run a trained model's ON-LSTM over sentences and collect its syntactic distances (model-agnostic).

:class:`EncoderProbe` wraps any task model that implements :class:`~onlstm_tasks.tasks.words.EncodesWords`
(``encode_words`` and ``embed_words``; NERTagger, AspectSentimentClassifier with a whole-sentence head, ...)
together with the word normalisation of the data it was trained on. It runs the model in eval mode under
``torch.no_grad()``, in length-sorted batches, and returns per sentence a ``[layers, directions, n]`` tensor of
distances (direction 0 = forward, 1 = backward, both indexed by token position; see
:class:`~onlstm_tasks.encoders.base.EncoderOutput`). :func:`onlstm_tasks.encoders.base.combine_directions` merges the
directions (``combine_directions(d, "mean", dim=1)`` -> ``[layers, n]``); :mod:`onlstm_tasks.trees.induce` turns one
row into a tree.

To build one from a checkpoint file use :func:`onlstm_tasks.probing.loading.load_probe`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from onlstm_tasks.data.core.features import WordNormalizer
from onlstm_tasks.probing.master_gates import MasterGates, master_gates
from onlstm_tasks.encoders.independent_directions import IndependentDirections
from onlstm_tasks.encoders.onlstm import ONLSTM
from onlstm_tasks.trees.source import HasDistances


class EncoderProbe:
    """Distances (and master gates) of a task model's sentence encoder on raw token lists.

    Args:
        model: a module with ``encode_words(sentences, normalizer, max_word_length) -> EncoderOutput`` (and
            ``embed_words``/``sentence_encoder`` for :meth:`master_gates`).
        normalizer, max_word_length: the training data module's word options (default ``WordNormalizer()``, 30).
        name: how errors name the model (e.g. the checkpoint path).
    """

    def __init__(self, model: Any, normalizer: WordNormalizer | None = None, max_word_length: int = 30,
                 name: str | None = None) -> None:
        if not callable(getattr(model, "encode_words", None)):
            raise TypeError(f"{type(model).__name__} has no encode_words(sentences) method; models that can be "
                            f"probed mix in onlstm_tasks.tasks.words.EncodesWords")
        self.model = model
        self.normalizer = normalizer or WordNormalizer()
        self.max_word_length = max_word_length
        self.name = name or type(model).__name__

    @contextmanager
    def _eval(self) -> Iterator[None]:
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                yield
        finally:
            self.model.train(was_training)

    def distances(self, sentences: Sequence[Sequence[str]], batch_size: int = 64,
                  which: str = "forget") -> list[torch.Tensor]:
        """Per sentence a CPU float tensor ``[layers, directions, n]`` of master-forget distances (``which`` =
        ``"forget"``) or master-input distances (``"input"``), in the order of ``sentences``."""
        if which not in ("forget", "input"):
            raise ValueError(f"which must be 'forget' or 'input', got {which!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
        out: list[torch.Tensor | None] = [None] * len(sentences)
        with self._eval():
            for start in range(0, len(order), batch_size):
                chosen = order[start:start + batch_size]
                encoded = self.model.encode_words([list(sentences[i]) for i in chosen], self.normalizer,
                                                  self.max_word_length)
                if not isinstance(encoded, HasDistances):
                    encoder = type(self.model.sentence_encoder()).__name__ if hasattr(
                        self.model, "sentence_encoder") else "its encoder"
                    raise ValueError(f"{self.name}: the model's encoder ({encoder}) returns no distances; only "
                                     f"ON-LSTM encoders have master gates to induce trees from")
                d = (encoded.distances if which == "forget" else encoded.input_distances).float().cpu()
                for row, i in enumerate(chosen):
                    out[i] = d[:, :, row, :len(sentences[i])].clone()
        return out  # type: ignore[return-value]

    def master_gates(self, words: Sequence[str], layer: int = -1, direction: int = 0) -> MasterGates:
        """Per-level f~ and i~ of one layer and direction for one sentence: each ``[n, levels]`` (CPU)."""
        encoder = self.model.sentence_encoder()
        if not isinstance(encoder, (ONLSTM, IndependentDirections)):
            raise ValueError(f"{self.name}: per-level master gates are recomputed for ONLSTM encoders only, the "
                             f"model's is a {type(encoder).__name__}")
        with self._eval():
            x, mask = self.model.embed_words([list(words)], self.normalizer, self.max_word_length)
            gates = master_gates(encoder, x, mask, layer, direction)
        lead = len(getattr(self.model, "sentence_frame", ((), ()))[0])  # e.g. a language model's <eos>
        words = slice(lead, lead + len(words))
        return MasterGates(forget=gates.forget[0, words].float().cpu(), input=gates.input[0, words].float().cpu())

    def shape(self) -> tuple[int, int]:
        """``(layers, directions)`` of the encoder's distances (runs it on a one-word sentence)."""
        return tuple(self.distances([["a"]])[0].shape[:2])  # type: ignore[return-value]
