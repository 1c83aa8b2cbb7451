"""Sentences (token lists) for language modelling, from a text column or from the words of any NER source.

Two kinds of source, both read through ``datasets.load_dataset`` where a dataset is involved:

* ``format="text"``: any dataset with a text column (default ``text``): a hub dataset such as
  ``Salesforce/wikitext`` (``name="wikitext-103-raw-v1"``), or local text files through the ``text`` builder
  (``path="text"``, ``data_files={"train": "train.txt", ...}``). Each non-blank row is one sentence, split at
  whitespace (wikitext is already tokenised that way). Blank rows are skipped and counted.
* any NER format (``ontonotes``, ``conll2012``, ``columns``, ``conllx``, ``tokens``, ``auto``): the words of
  every sentence, read by :func:`~onlstm_tasks.data.ner.readers.load_ner_splits` (tags are ignored). So the
  OntoNotes and Universal NER kits can be language-modelled with the same tokenisation the taggers see.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from onlstm_tasks.errors import DataFormatError

from ..ner.readers import load_ner_splits
from ..core.splits import SplitFormats, load_splits

log = logging.getLogger(__name__)

TEXT_FORMAT = "text"
Sentences = list[list[str]]


def read_text_rows(dataset, source: str | None = None, text_column: str = "text") -> tuple[Sentences, dict[str, int]]:
    """The non-blank rows of a dataset's ``text_column``, each split at whitespace; blank rows skipped and counted.
    Errors name ``source`` and the row."""
    if text_column not in dataset.column_names:
        raise DataFormatError(source, None, f"expected a text column {text_column!r} (set text_column), found "
                              f"columns {dataset.column_names}")
    sentences, blank = [], 0
    for row, text in enumerate(dataset[text_column]):
        if text is None or not isinstance(text, str):
            raise DataFormatError(source, row + 1, f"column {text_column!r} must hold strings, got "
                                  f"{type(text).__name__}")
        words = text.split()
        if words:
            sentences.append(words)
        else:
            blank += 1
    if blank:
        log.info("%s: %d blank row(s) skipped, %d sentence(s) kept", source, blank, len(sentences))
    return sentences, {"sentences": len(sentences), "blank": blank}


TEXT_FORMATS = SplitFormats(
    readers={TEXT_FORMAT: read_text_rows},
    dataset_formats=(TEXT_FORMAT,),
    dataset_format=lambda columns: TEXT_FORMAT,
    is_dataset=lambda names: True,
    select=None,  # local text files go through the ``text`` builder of ``datasets`` (path="text")
    what="text files",
    unit="sentences",
    log=log,
)


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
    """Every split of the source as token lists (split names normalised to train/validation/test), read by the one
    split loader: :data:`TEXT_FORMATS` for ``format="text"``, the NER formats otherwise."""
    if format == TEXT_FORMAT:
        if reader_options:
            raise ValueError(f"reader_options apply to NER formats only, not format='text' (got {reader_options})")
        return load_splits(TEXT_FORMATS, path, name=name, data_dir=data_dir, data_files=data_files,
                           revision=revision, format=TEXT_FORMAT, text_column=text_column)
    splits = load_ner_splits(path, name=name, data_dir=data_dir, data_files=data_files, revision=revision,
                             format=format, **(reader_options or {}))
    return {split: [list(ex.words) for ex in examples] for split, examples in splits.items()}
