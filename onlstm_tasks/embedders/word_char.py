"""The usual NER input layer: word embeddings + character features (+ an optional transformer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

from onlstm_tasks.data.batching import TokenBatch
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
