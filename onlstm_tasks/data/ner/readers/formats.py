"""The NER input formats for the one split loader (:func:`~onlstm_tasks.data.core.splits.load_splits`), and
``load_ner_splits``, that loader with them."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from onlstm_tasks.data.core.examples import Example
from onlstm_tasks.data.ner.readers.columns import read_columns
from onlstm_tasks.data.ner.readers.conll2012 import read_conll2012
from onlstm_tasks.data.ner.readers.conllx import read_conllx
from onlstm_tasks.data.ner.readers.ontonotes import read_ontonotes_rows
from onlstm_tasks.data.ner.readers.tokens import read_token_rows
from onlstm_tasks.data.core.data_files import normalise_split
from onlstm_tasks.data.core.splits import Reader, SplitFormats, load_splits

__all__ = ["DATASET_FORMATS", "FILE_FORMATS", "NER_FORMATS", "READERS", "file_format", "load_ner_splits",
           "normalise_split"]

logger = logging.getLogger(__name__)

READERS: dict[str, Reader] = {
    "ontonotes": read_ontonotes_rows,  # data: a datasets.Dataset of hub-schema document rows
    "tokens": read_token_rows,  # data: a datasets.Dataset with tokens/tags columns
    "conll2012": read_conll2012,  # data: a *_conll file or a directory of them
    "columns": read_columns,  # data: a column file
    "conllx": read_conllx,  # data: a .conllx/.conllu file with an NER column
}
DATASET_FORMATS = ("ontonotes", "tokens")
FILE_FORMATS = ("conll2012", "columns", "conllx")
_DATASET_SUFFIXES = (".parquet", ".arrow", ".json", ".jsonl", ".csv")


def file_format(path: Path) -> str:
    """The file format a file's name implies: ``*_conll`` -> conll2012, .conllx/.conllu -> conllx, else columns."""
    if path.name.endswith("_conll"):
        return "conll2012"
    return "conllx" if path.suffix.lower() in (".conllx", ".conllu") else "columns"


def _select(paths: list[Path], files: list[Path], format: str, strict: bool) -> tuple[str, list[Path], list[Path]]:
    """The format of one split, the inputs to hand its reader (conll2012 reads directories itself) and the files
    ignored.

    Under "auto", ``*_conll`` files win over ``.conllx``/``.conllu``, and those over anything else (columns);
    files of another format in the split are ignored and logged. With ``strict`` (files listed one by one
    in ``data_files``) they must all share one format.
    """
    if format == "auto":
        present = {file_format(f) for f in files}
        if strict and len(present) > 1:
            raise ValueError(f"data files of different formats in one split ({sorted(present)}): "
                             f"{[str(f) for f in files]}; pass format=")
        format = next((f for f in ("conll2012", "conllx") if f in present), "columns")
    if format == "conll2012":
        chosen = [p for p in paths if p.is_dir() or file_format(p) == "conll2012"]
        return format, chosen, [f for f in files if file_format(f) != "conll2012"]
    if format == "conllx":  # .conllx preferred: a merged .conllx usually sits next to its source .conllu
        chosen = [f for f in files if f.suffix.lower() == ".conllx"]
        chosen = chosen or [f for f in files if f.suffix.lower() == ".conllu"]
    else:
        chosen = files
    return format, chosen, sorted(set(files) - set(chosen))


NER_FORMATS = SplitFormats(
    readers=READERS,
    dataset_formats=DATASET_FORMATS,
    dataset_format=lambda columns: "ontonotes" if "sentences" in columns else "tokens",
    # a hub id or a folder of parquet/arrow/json/csv files (as opposed to raw NER text files)
    is_dataset=lambda names: any(os.fspath(n).lower().endswith(_DATASET_SUFFIXES) for n in names),
    select=_select,
    what="raw NER files",
    unit="sentences",
    log=logger,
)


def load_ner_splits(path: str | os.PathLike, **options: Any) -> dict[str, list[Example]]:
    """Every split of a hub dataset, a local dataset folder or raw NER files as Examples
    (:func:`~onlstm_tasks.data.core.splits.load_splits` with :data:`NER_FORMATS`: ``name``, ``data_dir``,
    ``data_files``, ``revision`` and ``format`` as there).

    ``format="auto"`` picks "ontonotes"/"tokens" by a dataset's columns, or a file format by extension.
    Other ``options`` go to the reader (e.g. ``include_pt=True``).
    """
    return load_splits(NER_FORMATS, path, **options)
