"""The aspect-sentiment input formats for the one split loader (:func:`~onlstm_tasks.data.core.splits.load_splits`),
and ``load_absa_splits``, that loader with them."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from onlstm_tasks.data.absa.readers.semeval_xml import read_semeval_xml
from onlstm_tasks.data.absa.readers.seg import read_seg
from onlstm_tasks.data.absa.readers.setfit import read_setfit_rows
from onlstm_tasks.data.core.examples import Example
from onlstm_tasks.data.core.splits import Reader, SplitFormats, load_splits

logger = logging.getLogger(__name__)

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


def _select(paths: list[Path], files: list[Path], format: str, strict: bool) -> tuple[str, list[Path], list[Path]]:
    """The format of one split, its files and the files ignored. Under "auto", XML wins over .seg; other files
    are ignored and logged. Files listed one by one (``strict``) must share one format; with an explicit
    ``format`` they, or files none of whose names imply a format, are all read whatever their names."""
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
    return format, chosen, sorted(set(files) - set(chosen))


ABSA_FORMATS = SplitFormats(
    readers=READERS,
    dataset_formats=DATASET_FORMATS,
    dataset_format=lambda columns: "setfit",
    # a hub id or a dataset folder, unless the inputs hold SemEval XML or .seg files
    is_dataset=lambda names: not any(file_format(n) for n in names),
    select=_select,
    what="raw aspect files",
    unit="aspects",
    log=logger,
)


def load_absa_splits(path: str | os.PathLike, **options: Any) -> dict[str, list[Example]]:
    """Every split of a hub dataset, a local dataset folder, or SemEval XML / ``.seg`` files as Examples, one per
    aspect (:func:`~onlstm_tasks.data.core.splits.load_splits` with :data:`ABSA_FORMATS`: ``name``, ``data_dir``,
    ``data_files``, ``revision`` and ``format`` as there).

    Datasets follow the ``tomaarsen/setfit-absa-semeval-*`` schema; file splits are found by names with a
    train/validation/dev/test token (``Laptop_Train_v2.xml``, ``Laptops_Test_Gold.xml``). ``format="auto"``
    reads files when the inputs hold ``.xml`` or ``.seg`` files (XML preferred; other files are ignored and
    logged), else a dataset. Other ``options`` go to the reader (``keep_conflict=True`` keeps the conflict
    class).
    """
    return load_splits(ABSA_FORMATS, path, **options)
