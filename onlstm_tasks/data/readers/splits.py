"""``load_ner_splits``: one entry point, mirroring ``datasets.load_dataset``, for every NER input format."""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from onlstm_tasks.data.examples import Example
from onlstm_tasks.data.readers._common import Stats
from onlstm_tasks.data.readers.columns import read_columns
from onlstm_tasks.data.readers.conll2012 import read_conll2012
from onlstm_tasks.data.readers.conllx import read_conllx
from onlstm_tasks.data.readers.ontonotes import read_ontonotes_rows
from onlstm_tasks.data.readers.tokens import read_token_rows
from onlstm_tasks.data.split_files import (
    DataFiles,
    add_split,
    check_hub_id,
    files_under,
    flat,
    normalise_split,
    ordered,
    split_paths,
)

logger = logging.getLogger(__name__)

Reader = Callable[..., tuple[list[Example], Stats]]  # (data, source=None, **options) -> (examples, stats)
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


def load_ner_splits(
    path: str | os.PathLike,
    name: str | None = None,
    data_dir: str | None = None,
    data_files: DataFiles | None = None,
    revision: str | None = None,
    format: str = "auto",
    **reader_options: Any,
) -> dict[str, list[Example]]:
    """Read every split of a hub dataset, a local dataset folder or raw NER files to Examples.

    Dataset formats call ``datasets.load_dataset(path, name=, data_dir=, data_files=, revision=)`` and read
    each split. File formats take ``data_files`` as {split: file | directory | glob | list of them}
    (relative to ``path`` when it is a directory); without it, splits are the children of ``path``
    (or ``path/data_dir``) whose file or folder name has a train/validation/dev/test token. ``format="auto"``
    picks "ontonotes"/"tokens" by a dataset's columns, or a file format by extension. Split names are
    normalised to train/validation/test. ``reader_options`` go to the reader (e.g. ``include_pt=True``).
    """
    if format != "auto" and format not in READERS:
        raise ValueError(f"unknown format {format!r}: expected 'auto' or one of {sorted(READERS)}")
    path = os.fspath(path)
    if format in DATASET_FORMATS or (format == "auto" and _is_dataset(path, data_dir, data_files)):
        return _dataset_splits(path, name, data_dir, data_files, revision, format, reader_options)
    if name is not None or revision is not None:
        raise ValueError("name= and revision= apply to datasets only, not to raw NER files")
    return _file_splits(path, data_dir, data_files, format, reader_options)


def _is_dataset(path: str, data_dir: str | None, data_files: DataFiles | None) -> bool:
    """A hub id or a folder of parquet/arrow/json/csv files (as opposed to raw NER text files)."""
    if data_files is not None:
        return any(str(f).lower().endswith(_DATASET_SUFFIXES) for f in flat(data_files))
    local = Path(path)
    if not local.exists():
        check_hub_id(path)
        return True  # "owner/name" on the hub
    base = local / data_dir if data_dir and local.is_dir() else local
    if base.is_file():
        return base.suffix.lower() in _DATASET_SUFFIXES
    return any(f.suffix.lower() in _DATASET_SUFFIXES for f in base.rglob("*") if f.is_file())


def _dataset_splits(path, name, data_dir, data_files, revision, format, reader_options) -> dict[str, list[Example]]:
    import datasets  # heavy import, only when a dataset is read

    loaded = datasets.load_dataset(path, name=name, data_dir=data_dir, data_files=data_files, revision=revision)
    label = path + (f"/{data_dir}" if data_dir else "") + (f"[{name}]" if name else "")
    out: dict[str, list[Example]] = {}
    for split, dataset in loaded.items():
        fmt = format if format != "auto" else ("ontonotes" if "sentences" in dataset.column_names else "tokens")
        examples, _ = READERS[fmt](dataset, source=f"{label}:{split}", **reader_options)
        add_split(out, split, examples)
    return ordered(out)


def _file_splits(path, data_dir, data_files, format, reader_options) -> dict[str, list[Example]]:
    splits, strict = split_paths(Path(path) / data_dir if data_dir else Path(path), data_files)
    out: dict[str, list[Example]] = {}
    for split, paths in splits.items():
        fmt, inputs = _select(paths, format, strict.get(split, False) and not any(p.is_dir() for p in paths))
        examples: list[Example] = []
        total: Counter = Counter()
        for item in inputs:
            item_examples, stats = READERS[fmt](item, **reader_options)
            examples.extend(item_examples)
            total.update(stats)
        logger.info("split %s: %d sentences from %d %s input(s) %s", normalise_split(split), len(examples),
                    len(inputs), fmt, dict(total))
        add_split(out, split, examples)
    return ordered(out)


def _select(paths: list[Path], format: str, strict: bool) -> tuple[str, list[Path]]:
    """The format of one split and the inputs to hand its reader (conll2012 reads directories itself).

    Under "auto", ``*_conll`` files win over ``.conllx``/``.conllu``, and those over anything else (columns);
    files of another format in the split are ignored and logged. With ``strict`` (files listed one by one
    in ``data_files``) they must all share one format.
    """
    files = files_under(paths)
    if format == "auto":
        present = {file_format(f) for f in files}
        if strict and len(present) > 1:
            raise ValueError(f"data files of different formats in one split ({sorted(present)}): "
                             f"{[str(f) for f in files]}; pass format=")
        format = next((f for f in ("conll2012", "conllx") if f in present), "columns")
    if format == "conll2012":
        chosen = [p for p in paths if p.is_dir() or file_format(p) == "conll2012"]
        ignored = [f for f in files if file_format(f) != "conll2012"]
    else:
        if format == "conllx":  # .conllx preferred: a merged .conllx usually sits next to its source .conllu
            chosen = [f for f in files if f.suffix.lower() == ".conllx"]
            chosen = chosen or [f for f in files if f.suffix.lower() == ".conllu"]
        else:
            chosen = files
        ignored = sorted(set(files) - set(chosen))
    if ignored:
        logger.info("%s split input: ignored %d file(s) of another format, e.g. %s", format, len(ignored),
                    [str(f) for f in ignored[:5]])
    if not chosen:
        raise FileNotFoundError(f"no {format} input among {[str(p) for p in paths]}")
    return format, chosen
