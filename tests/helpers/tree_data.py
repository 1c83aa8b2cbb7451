"""The toy CoNLL-X NER data with gold trees (``tests/fixtures/ner/trees``) and a small embedder for models over it."""

from __future__ import annotations

import functools
from pathlib import Path

from onlstm_tasks.data.ner.module import NERDataModule
from onlstm_tasks.embedders.word_char import WordCharEmbedder

TREES = Path(__file__).resolve().parents[1] / "fixtures" / "ner" / "trees"
EMBEDDER = functools.partial(WordCharEmbedder, word_dim=8, char_dim=4, char_features=4, dropout=0.0)


def tree_data(**options) -> NERDataModule:
    dm = NERDataModule(path=str(TREES), data_dir=None, revision=None, format="conllx", batch_size=3,
                       eval_batch_size=3, **options)
    dm.setup("fit")
    return dm
