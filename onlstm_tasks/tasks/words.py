"""``EncodesWords``: the one entry task models share for probing their encoder on raw token lists.

A task model (NER, ABSA, later a language model) mixes it in and names its parts: :meth:`word_embedder` and
:meth:`sentence_encoder` (the encoder that reads a whole sentence, and nothing else). Tools such as
:mod:`onlstm_tasks.probing.probe` then need only :meth:`encode_words` (distances) and :meth:`embed_words` (the
encoder's input, e.g. to recompute per-level master gates). A model whose input is not the
``word_vocab``/``char_vocab`` token batch overrides :meth:`word_tokens`; one whose sentence encoder reads a tree
it can build from the words alone (NER with ``tree_source: lm``) overrides :meth:`word_heads`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch
from lightning.fabric.utilities.apply_func import move_data_to_device

from onlstm_tasks.data.core.batching import TokenBatch
from onlstm_tasks.data.core.features import WordNormalizer, words_to_batch
from onlstm_tasks.embedders.base import TokenEmbedder
from onlstm_tasks.encoders.base import EncoderOutput, SequenceEncoder, TreeOutput, encode
from onlstm_tasks.trees.source import HasDistances


class EncodesWords:
    """Mixin for LightningModules with ``hparams.word_vocab``/``hparams.char_vocab``.

    Run :meth:`encode_words` in eval mode under ``torch.no_grad()`` for probing; in training mode it applies the
    model's dropout like any forward pass.

    ``sentence_frame``: tokens the model reads before and after every sentence, as in its training (a language
    model's ``<eos>``). :meth:`embed_words` adds them; :meth:`encode_words` returns the words' positions only.
    """

    sentence_frame: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())

    def word_embedder(self) -> TokenEmbedder:
        raise NotImplementedError

    def sentence_encoder(self) -> SequenceEncoder:
        raise NotImplementedError

    def word_heads(self, tokens: TokenBatch) -> torch.Tensor | None:
        """The dependency heads ``[B, T]`` the sentence encoder reads for a batch of raw words (a tree-reading
        encoder's, e.g. from the frozen language model of ``tree_source: lm``), or None (it reads none)."""
        return None

    def word_tokens(
        self, sentences: Sequence[Sequence[str]], normalizer: WordNormalizer | None = None, max_word_length: int = 30
    ) -> TokenBatch:
        """Raw token lists (framed by :attr:`sentence_frame`) as the model's token batch, on its device.

        ``normalizer``/``max_word_length``: the training data module's (``lowercase``, ``normalize_digits``,
        ``max_word_length``; see :func:`onlstm_tasks.data.core.common.word_options_from_checkpoint`).
        """
        lead, trail = self.sentence_frame
        if lead or trail:
            sentences = [[*lead, *words, *trail] for words in sentences]
        tokens = words_to_batch(sentences, self.hparams.word_vocab, self.hparams.char_vocab, normalizer,
                                max_word_length)
        return move_data_to_device(tokens, self.device)

    def embed_words(
        self, sentences: Sequence[Sequence[str]], normalizer: WordNormalizer | None = None, max_word_length: int = 30
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The sentence encoder's input for raw token lists: ``(x [B, T, D], mask [B, T])`` on the model's device
        (arguments as :meth:`word_tokens`)."""
        tokens = self.word_tokens(sentences, normalizer, max_word_length)
        return self.word_embedder()(tokens), tokens.mask

    def encode_words(
        self, sentences: Sequence[Sequence[str]], normalizer: WordNormalizer | None = None, max_word_length: int = 30
    ) -> EncoderOutput:
        """The sentence encoder's output (hidden states, per-layer states, distances) for raw token lists; a
        tree-reading encoder gets the heads of :meth:`word_heads`."""
        tokens = self.word_tokens(sentences, normalizer, max_word_length)
        x, mask = self.word_embedder()(tokens), tokens.mask
        encoded = encode(self.sentence_encoder(), x, mask, self.word_heads(tokens))
        lead, trail = (len(part) for part in self.sentence_frame)
        return trim_frame(encoded, mask, lead, trail) if lead or trail else encoded


def trim_frame(encoded: EncoderOutput, mask: torch.Tensor, lead: int, trail: int) -> EncoderOutput:
    """The words' positions of an output over framed sentences: ``lead`` tokens before and ``trail`` after each
    row's words are cut (each row keeps its words from position 0; zeros beyond its length, as at padding)."""
    steps = mask.size(1) - lead - trail
    words = mask[:, lead + trail:]  # [B, steps]: True at each row's first (length - lead - trail) positions

    def cut(t: torch.Tensor, time_dim: int) -> torch.Tensor:
        kept = t.narrow(time_dim, lead, steps)
        shape = [1] * kept.dim()
        shape[time_dim - 1], shape[time_dim] = words.shape
        return kept * words.view(shape).to(kept.dtype)

    if isinstance(encoded, TreeOutput):
        raise ValueError("trim_frame cannot cut the trees of a tree-reading encoder")
    trimmed = {"hidden": cut(encoded.hidden, 1), "layers": tuple(cut(layer, 1) for layer in encoded.layers)}
    if isinstance(encoded, HasDistances):
        trimmed.update(distances=cut(encoded.distances, 3), input_distances=cut(encoded.input_distances, 3))
    return replace(encoded, **trimmed)  # the same class: its capabilities, and a carried state, kept
