"""Sentences (token lists) for language modelling, from a text column or from the words of any NER source.

Two kinds of source, both read through ``datasets.load_dataset`` where a dataset is involved:

* ``format="text"``: any dataset with a text column (default ``text``): a hub dataset such as
  ``Salesforce/wikitext`` (``name="wikitext-103-raw-v1"``), or local text files through the ``text`` builder
  (``path="text"``, ``data_files={"train": "train.txt", ...}``). Each non-blank row is one sentence, split at
  whitespace (wikitext is already tokenised that way). Blank rows are skipped and counted.
* any NER format (``ontonotes``, ``conll2012``, ``columns``, ``conllx``, ``tokens``, ``auto``): the words of
  every sentence, read by :func:`~onlstm_tasks.data.readers.load_ner_splits` (tags are ignored). So the
  OntoNotes and Universal NER kits can be language-modelled with the same tokenisation the taggers see.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from onlstm_tasks.errors import DataFormatError

from .readers import load_ner_splits
from .split_files import add_split, ordered

log = logging.getLogger(__name__)

TEXT_FORMAT = "text"
Sentences = list[list[str]]


def load_lm_sentences(
    path: str | os.PathLike,
    format: str = TEXT_FORMAT,
    name: str | None = None,
    data_dir: str | None = None,
    data_files: Any = None,
    revision: str | None = None,
    text_column: str = "text",
    reader_options: dict[str, Any] | None = None,
) -> dict[str, Sentences]:
    """Every split of the source as token lists (split names normalised to train/validation/test)."""
    if format == TEXT_FORMAT:
        if reader_options:
            raise ValueError(f"reader_options apply to NER formats only, not format='text' (got {reader_options})")
        return _text_splits(os.fspath(path), name, data_dir, data_files, revision, text_column)
    splits = load_ner_splits(path, name=name, data_dir=data_dir, data_files=data_files, revision=revision,
                             format=format, **(reader_options or {}))
    return {split: [list(ex.words) for ex in examples] for split, examples in splits.items()}


def _text_splits(path, name, data_dir, data_files, revision, text_column) -> dict[str, Sentences]:
    import datasets  # heavy import, only when a dataset is read

    loaded = datasets.load_dataset(path, name=name, data_dir=data_dir, data_files=data_files, revision=revision)
    label = path + (f"[{name}]" if name else "")
    out: dict[str, Sentences] = {}
    for split, dataset in loaded.items():
        if text_column not in dataset.column_names:
            raise DataFormatError(f"{label}:{split}", None, f"expected a text column {text_column!r} (set "
                                  f"text_column), found columns {dataset.column_names}")
        sentences, blank = [], 0
        for row, text in enumerate(dataset[text_column]):
            if text is None or not isinstance(text, str):
                raise DataFormatError(f"{label}:{split}", row + 1, f"column {text_column!r} must hold strings, "
                                      f"got {type(text).__name__}")
            words = text.split()
            if words:
                sentences.append(words)
            else:
                blank += 1
        if blank:
            log.info("%s:%s: %d blank row(s) skipped, %d sentence(s) kept", label, split, blank, len(sentences))
        add_split(out, split, sentences)
    return ordered(out)
