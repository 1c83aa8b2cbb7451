"""``load_splits``: the one split loader, mirroring ``datasets.load_dataset``, for every task's input formats.

A task's formats (:class:`SplitFormats`: the NER readers in ``readers.splits``, the aspect-sentiment readers in
``absa_readers.splits``, the language-model text rows in ``lm_text``) say what differs: the readers by format
name, which of them read ``datasets`` rows, which format a dataset's columns imply, whether named inputs are a
dataset, and how a split's files are chosen. Everything else is done here once: hub ids and local dataset
folders go through ``datasets.load_dataset`` (the default and single entry for datasets); raw files are found
by ``split_files`` (``data_files`` or discovery by name); split names are normalised and ordered.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .split_files import DataFiles, add_split, check_hub_id, files_under, flat, normalise_split, ordered, split_paths

Reader = Callable[..., tuple[list, dict[str, int]]]  # (data, source=None, **options) -> (items, stats)
# (paths of one split, the files under them, format or "auto", strict) -> (format, inputs to read, ignored files)
Selector = Callable[[list[Path], list[Path], str, bool], tuple[str, list[Path], list[Path]]]


@dataclass(frozen=True)
class SplitFormats:
    """What one task's input formats are: everything :func:`load_splits` needs to know about them.

    readers: format name -> reader ``(data, source=None, **options) -> (items, stats)``.
    dataset_formats: the formats whose reader takes a ``datasets.Dataset`` (read through ``load_dataset``).
    dataset_format: under ``format="auto"``, the dataset format a dataset's column names imply.
    is_dataset: whether named inputs (``data_files`` entries, or the files under the path) are a dataset
        rather than raw files of this task.
    select: how a split's raw files are chosen (see :data:`Selector`); None when the task reads datasets only.
    what: the raw files' name in messages ("raw NER files"); unit: what an item is in the log ("sentences").
    log: the logger of the task's readers (their INFO lines keep its name).
    """

    readers: dict[str, Reader]
    dataset_formats: Sequence[str]
    dataset_format: Callable[[list[str]], str]
    is_dataset: Callable[[list[str | Path]], bool]
    select: Selector | None
    what: str
    unit: str
    log: logging.Logger


def load_splits(
    formats: SplitFormats,
    path: str | os.PathLike,
    name: str | None = None,
    data_dir: str | None = None,
    data_files: DataFiles | None = None,
    revision: str | None = None,
    format: str = "auto",
    **options: Any,
) -> dict[str, list]:
    """Read every split of a hub dataset, a local dataset folder or raw files with the readers of ``formats``.

    Dataset formats call ``datasets.load_dataset(path, name=, data_dir=, data_files=, revision=)`` and read
    each split. File formats take ``data_files`` as {split: file | directory | glob | list of them}
    (relative to ``path`` when it is a directory); without it, splits are the children of ``path``
    (or ``path/data_dir``) whose file or folder name has a train/validation/dev/test token. ``format="auto"``
    reads a dataset when ``formats.is_dataset`` says the inputs are one (a hub id always is), else raw files.
    Split names are normalised to train/validation/test. ``options`` go to the reader.
    """
    if format != "auto" and format not in formats.readers:
        raise ValueError(f"unknown format {format!r}: expected 'auto' or one of {sorted(formats.readers)}")
    path = os.fspath(path)
    if format in formats.dataset_formats or (format == "auto" and _is_dataset(formats, path, data_dir, data_files)):
        return _dataset_splits(formats, path, name, data_dir, data_files, revision, format, options)
    if name is not None or revision is not None:
        raise ValueError(f"name= and revision= apply to datasets only, not to {formats.what}")
    return _file_splits(formats, Path(path) / data_dir if data_dir else Path(path), data_files, format, options)


def _is_dataset(formats: SplitFormats, path: str, data_dir: str | None, data_files: DataFiles | None) -> bool:
    """A hub id, or local inputs that ``formats.is_dataset`` takes for a dataset."""
    if data_files is not None:
        return formats.is_dataset(flat(data_files))
    local = Path(path)
    if not local.exists():
        check_hub_id(path)
        return True  # "owner/name" on the hub
    base = local / data_dir if data_dir and local.is_dir() else local
    return formats.is_dataset([base] if base.is_file() else [f for f in base.rglob("*") if f.is_file()])


def _dataset_splits(formats: SplitFormats, path, name, data_dir, data_files, revision, format, options) -> dict:
    import datasets  # heavy import, only when a dataset is read

    loaded = datasets.load_dataset(path, name=name, data_dir=data_dir, data_files=data_files, revision=revision)
    label = path + (f"/{data_dir}" if data_dir else "") + (f"[{name}]" if name else "")
    out: dict[str, list] = {}
    for split, dataset in loaded.items():
        fmt = format if format != "auto" else formats.dataset_format(dataset.column_names)
        items, _ = formats.readers[fmt](dataset, source=f"{label}:{split}", **options)
        add_split(out, split, items)
    return ordered(out)


def _file_splits(formats: SplitFormats, base: Path, data_files, format, options) -> dict[str, list]:
    if formats.select is None:
        raise ValueError(f"no raw file format: give a dataset (one of {list(formats.dataset_formats)})")
    splits, strict = split_paths(base, data_files)
    out: dict[str, list] = {}
    for split, paths in splits.items():
        strict_split = strict.get(split, False) and not any(p.is_dir() for p in paths)
        fmt, inputs, ignored = formats.select(paths, files_under(paths), format, strict_split)
        if ignored:
            formats.log.info("%s split input: ignored %d file(s) of another format, e.g. %s", fmt, len(ignored),
                             [str(f) for f in ignored[:5]])
        if not inputs:
            raise FileNotFoundError(f"no {fmt} input among {[str(p) for p in paths]}")
        items: list = []
        total: Counter = Counter()
        for item in inputs:
            item_items, stats = formats.readers[fmt](item, **options)
            items.extend(item_items)
            total.update(stats)
        formats.log.info("split %s: %d %s from %d %s input(s) %s", normalise_split(split), len(items), formats.unit,
                         len(inputs), fmt, dict(total))
        add_split(out, split, items)
    return ordered(out)
