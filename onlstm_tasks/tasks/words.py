"""``EncodesWords``: the one entry task models share for probing their encoder on raw token lists.

A task model (NER, ABSA, later a language model) mixes it in and names its parts: :meth:`word_embedder` and
:meth:`sentence_encoder` (the encoder that reads a whole sentence, and nothing else). Tools such as
:mod:`onlstm_tasks.trees.probe` then need only :meth:`encode_words` (distances) and :meth:`embed_words` (the
encoder's input, e.g. to recompute per-level master gates). A model whose input is not the
``word_vocab``/``char_vocab`` token batch overrides :meth:`embed_words`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from lightning.fabric.utilities.apply_func import move_data_to_device

from onlstm_tasks.data.features import WordNormalizer, words_to_batch
from onlstm_tasks.embedders.base import TokenEmbedder
from onlstm_tasks.encoders.base import EncoderOutput, SequenceEncoder


class EncodesWords:
    """Mixin for LightningModules with ``hparams.word_vocab``/``hparams.char_vocab``.

    Run :meth:`encode_words` in eval mode under ``torch.no_grad()`` for probing; in training mode it applies the
    model's dropout like any forward pass.
    """

    def word_embedder(self) -> TokenEmbedder:
        raise NotImplementedError

    def sentence_encoder(self) -> SequenceEncoder:
        raise NotImplementedError

    def embed_words(
        self, sentences: Sequence[Sequence[str]], normalizer: WordNormalizer | None = None, max_word_length: int = 30
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The sentence encoder's input for raw token lists: ``(x [B, T, D], mask [B, T])`` on the model's device.

        ``normalizer``/``max_word_length``: the training data module's (``lowercase``, ``normalize_digits``,
        ``max_word_length``; see :func:`onlstm_tasks.data.common.word_options_from_checkpoint`).
        """
        tokens = words_to_batch(sentences, self.hparams.word_vocab, self.hparams.char_vocab, normalizer,
                                max_word_length)
        tokens = move_data_to_device(tokens, self.device)
        return self.word_embedder()(tokens), tokens.mask

    def encode_words(
        self, sentences: Sequence[Sequence[str]], normalizer: WordNormalizer | None = None, max_word_length: int = 30
    ) -> EncoderOutput:
        """The sentence encoder's output (hidden states, per-layer states, distances) for raw token lists."""
        x, mask = self.embed_words(sentences, normalizer, max_word_length)
        return self.sentence_encoder()(x, mask)
