"""``load_absa_splits``: one entry point, mirroring ``datasets.load_dataset``, for every aspect-sentiment format."""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from onlstm_tasks.data.absa_readers.semeval_xml import read_semeval_xml
from onlstm_tasks.data.absa_readers.seg import read_seg
from onlstm_tasks.data.absa_readers.setfit import read_setfit_rows
from onlstm_tasks.data.examples import Example
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

Reader = Callable[..., tuple[list[Example], dict[str, int]]]  # (data, source=None, **options)
READERS: dict[str, Reader] = {
    "setfit": read_setfit_rows,  # data: a datasets.Dataset of text/span/label/ordinal rows
    "semeval_xml": read_semeval_xml,  # data: a SemEval-2014 XML file
    "seg": read_seg,  # data: a 3-line .seg file
}
DATASET_FORMATS = ("setfit",)
FILE_FORMATS = ("semeval_xml", "seg")


def file_format(path: Path | str) -> str | None:
    """The aspect file format a name implies (``*.seg`` -> seg, ``*.xml`` -> semeval_xml), else None."""
    name = os.fspath(path).lower()
    return "seg" if name.endswith(".seg") else "semeval_xml" if name.endswith(".xml") else None


def load_absa_splits(
    path: str | os.PathLike,
    name: str | None = None,
    data_dir: str | None = None,
    data_files: DataFiles | None = None,
    revision: str | None = None,
    format: str = "auto",
    **options: Any,
) -> dict[str, list[Example]]:
    """Read every split of a hub dataset, a local dataset folder, or SemEval XML / ``.seg`` files to Examples,
    one per aspect.

    Datasets (the ``tomaarsen/setfit-absa-semeval-*`` schema) are read with
    ``datasets.load_dataset(path, name=, data_dir=, data_files=, revision=)``. Files take ``data_files`` as
    {split: file | directory | glob | list of them} (relative to ``path`` when it is a directory); without it,
    splits are the children of ``path`` (or ``path/data_dir``) whose names carry a train/validation/dev/test
    token (``Laptop_Train_v2.xml``, ``Laptops_Test_Gold.xml``). ``format="auto"`` reads files when the inputs
    hold ``.xml`` or ``.seg`` files (XML preferred; other files are ignored and logged), else a dataset.
    ``options`` go to the reader (``keep_conflict=True`` keeps the conflict class).
    """
    if format != "auto" and format not in READERS:
        raise ValueError(f"unknown format {format!r}: expected 'auto' or one of {sorted(READERS)}")
    path = os.fspath(path)
    if format in DATASET_FORMATS or (format == "auto" and _is_dataset(path, data_dir, data_files)):
        return _dataset_splits(path, name, data_dir, data_files, revision, options)
    if name is not None or revision is not None:
        raise ValueError("name= and revision= apply to datasets only, not to raw aspect files")
    return _file_splits(Path(path) / data_dir if data_dir else Path(path), data_files, format, options)


def _is_dataset(path: str, data_dir: str | None, data_files: DataFiles | None) -> bool:
    """A hub id or a dataset folder, unless the inputs hold SemEval XML or .seg files."""
    if data_files is not None:
        return not any(file_format(f) for f in flat(data_files))
    local = Path(path)
    if not local.exists():
        check_hub_id(path)
        return True  # "owner/name" on the hub
    base = local / data_dir if data_dir and local.is_dir() else local
    files = [base] if base.is_file() else [f for f in base.rglob("*") if f.is_file()]
    return not any(file_format(f) for f in files)


def _dataset_splits(path, name, data_dir, data_files, revision, options) -> dict[str, list[Example]]:
    import datasets  # heavy import, only when a dataset is read

    loaded = datasets.load_dataset(path, name=name, data_dir=data_dir, data_files=data_files, revision=revision)
    label = path + (f"/{data_dir}" if data_dir else "") + (f"[{name}]" if name else "")
    out: dict[str, list[Example]] = {}
    for split, dataset in loaded.items():
        examples, _ = read_setfit_rows(dataset, source=f"{label}:{split}", **options)
        add_split(out, split, examples)
    return ordered(out)


def _file_splits(base: Path, data_files, format, options) -> dict[str, list[Example]]:
    splits, strict = split_paths(base, data_files)
    out: dict[str, list[Example]] = {}
    for split, paths in splits.items():
        fmt, inputs = _select(paths, format, strict.get(split, False) and not any(p.is_dir() for p in paths))
        examples: list[Example] = []
        total: Counter = Counter()
        for item in inputs:
            item_examples, stats = READERS[fmt](item, **options)
            examples.extend(item_examples)
            total.update(stats)
        logger.info("split %s: %d aspects from %d %s file(s) %s", normalise_split(split), len(examples),
                    len(inputs), fmt, dict(total))
        add_split(out, split, examples)
    return ordered(out)


def _select(paths: list[Path], format: str, strict: bool) -> tuple[str, list[Path]]:
    """The format of one split and its files. Under "auto", XML wins over .seg; other files are ignored and
    logged. Files listed one by one (``strict``) must share one format; with an explicit ``format`` they, or
    files none of whose names imply a format, are all read whatever their names."""
    files = files_under(paths)
    present = {file_format(f) for f in files}
    if format == "auto":
        if strict and len(present) > 1:
            raise ValueError(f"data files of different formats in one split ({sorted(map(str, present))}): "
                             f"{[str(f) for f in files]}; pass format=")
        format = next((f for f in FILE_FORMATS if f in present), None)
        if format is None:
            raise FileNotFoundError(f"no SemEval .xml or .seg file among {[str(p) for p in paths]}; "
                                    "pass format= to read files named otherwise")
    if strict or present == {None}:  # listed one by one, or no name says a format: read them all
        chosen = files
    else:
        chosen = [f for f in files if file_format(f) == format]
    ignored = sorted(set(files) - set(chosen))
    if ignored:
        logger.info("%s split input: ignored %d file(s) of another format, e.g. %s", format, len(ignored),
                    [str(f) for f in ignored[:5]])
    if not chosen:
        raise FileNotFoundError(f"no {format} input among {[str(p) for p in paths]}")
    return format, chosen
