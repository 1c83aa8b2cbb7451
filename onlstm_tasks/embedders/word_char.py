"""The usual NER input layer: word embeddings + character features (+ an optional transformer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

from onlstm_tasks.data.core.batching import TokenBatch
from onlstm_tasks.embedders.base import TokenEmbedder
from onlstm_tasks.embedders.char_cnn import CharCNN
from onlstm_tasks.embedders.char_lstm import CharLSTM
from onlstm_tasks.embedders.concat import ConcatEmbedder
from onlstm_tasks.embedders.word import WordEmbedding


class WordCharEmbedder(TokenEmbedder):
    """Word embeddings (optionally from a GloVe/word2vec text file) + a char CNN or BiLSTM (+ a transformer).

    ``word_vocab`` and ``char_vocab`` come from the data; everything else is plain config. Each part is a
    :class:`TokenEmbedder` of its own; this class only chooses and concatenates them. ``output_size`` is derived.
    The ``pretrained`` file is read at first use, and never when the weights are restored from a checkpoint
    (see :class:`WordEmbedding`). ``freeze``/``fine_tune`` (which word rows train) and ``unk_replace``/
    ``word_dropout`` (unknown-word training: tokens replaced by ``<unk>`` in training only; the characters still
    see the real word) go to :class:`WordEmbedding`.

    Args:
        word_vocab: the word vocabulary (linked from the data module by the CLI).
        char_vocab: the character vocabulary (linked from the data module by the CLI).
        word_dim: the size of a word vector (the vectors file's, with ``pretrained``).
        pretrained: a GloVe/word2vec text file whose vectors start the word rows it has (read at the first
            ``fit`` only).
        freeze: the word vectors do not train (see ``fine_tune`` for the finer choice).
        char_encoder: ``cnn`` (a convolution with max pooling over each word's characters), ``lstm`` (a
            BiLSTM's last states) or ``none``.
        char_dim: the size of a character vector.
        char_features: the size of a word's character features (the CNN's filters, or the BiLSTM's two
            directions together).
        transformer: a Hugging Face model id or folder whose sub-word states are pooled per word and added to
            the features (``pip install -e '.[transformers]'``).
        transformer_pooling: how a word's sub-words are pooled: ``first`` or ``mean``.
        freeze_transformer: the transformer's weights do not train.
        dropout: on the concatenated features.
        fine_tune: which word rows train: ``all``, ``unfound`` (only the rows the vectors file lacks) or
            ``none``; None: from ``freeze``.
        unk_replace: in training, a word seen once in training is replaced by ``<unk>`` with this probability.
        word_dropout: in training, any word is replaced by ``<unk>`` with this probability.
    """

    def __init__(
        self,
        word_vocab: Sequence[str],
        char_vocab: Sequence[str],
        word_dim: int = 100,
        pretrained: str | None = None,
        freeze: bool = False,
        char_encoder: Literal["cnn", "lstm", "none"] = "cnn",
        char_dim: int = 30,
        char_features: int = 50,
        transformer: str | None = None,
        transformer_pooling: Literal["first", "mean"] = "first",
        freeze_transformer: bool = False,
        dropout: float = 0.5,
        fine_tune: Literal["all", "unfound", "none"] | None = None,
        unk_replace: float = 0.0,
        word_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        parts: list[TokenEmbedder] = [WordEmbedding(word_vocab, word_dim, pretrained=pretrained, freeze=freeze,
                                                    fine_tune=fine_tune, unk_replace=unk_replace,
                                                    word_dropout=word_dropout)]
        if char_encoder == "cnn":
            parts.append(CharCNN(len(char_vocab), char_dim=char_dim, filters=char_features))
        elif char_encoder == "lstm":
            parts.append(CharLSTM(len(char_vocab), char_dim=char_dim, hidden_size=char_features // 2))
        elif char_encoder != "none":
            raise ValueError(f"char_encoder must be 'cnn', 'lstm' or 'none', got {char_encoder!r}")
        if transformer:
            from onlstm_tasks.embedders.transformer import TransformerEmbedding

            parts.append(TransformerEmbedding(transformer, pooling=transformer_pooling, freeze=freeze_transformer))
        self.embed = ConcatEmbedder(parts, dropout=dropout)
        self.output_size = self.embed.output_size

    def forward(self, batch: TokenBatch) -> torch.Tensor:
        return self.embed(batch)
