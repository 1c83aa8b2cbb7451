"""``load_splits``: the one split loader, mirroring ``datasets.load_dataset``, for every task's input formats.

A task's formats (:class:`SplitFormats`: the NER readers in ``ner/readers/formats.py``, the aspect-sentiment readers
in ``absa/readers/formats.py``, the language-model text rows in ``lm/text.py``) say what differs: the readers by format
name, which of them read ``datasets`` rows, which format a dataset's columns imply, whether named inputs are a
dataset, and how a split's files are chosen. Everything else is done here once: hub ids and local dataset
folders go through ``datasets.load_dataset`` (the default and single entry for datasets); raw files are found
by :mod:`.data_files` (a ``data_files`` option or discovery by name); split names are normalised and ordered.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onlstm_tasks.errors import ConfigError, DataFormatError, HubUnreachableError

from .sniff import hint, with_format_hint
from .data_files import DataFiles, add_split, check_hub_id, files_under, flat, normalise_split, ordered, split_paths

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


# the options (as docs/guide.md gives them) that read each hub dataset of the configs from a local copy (the data
# kit's ../shared/data)
LOCAL_COPIES = {
    "ontonotes/conll2012_ontonotesv5":
        "--data.init_args.path ../shared/data/conll2012_ontonotesv5 --data.init_args.revision null",
    "tomaarsen/setfit-absa-semeval-laptops": "--data.init_args.path ../shared/data/setfit-absa-semeval-laptops",
    "tomaarsen/setfit-absa-semeval-restaurants":
        "--data.init_args.path ../shared/data/setfit-absa-semeval-restaurants",
    "eriktks/conll2003": "--data.init_args.path DIR --data.init_args.revision null (DIR holding "
                         "conll2003/{train,validation,test}/*.parquet)",
    "Salesforce/wikitext": "--data.init_args.path text --data.init_args.name null --data.init_args.data_files "
                           "'{train: a.txt, validation: b.txt, test: c.txt}'",
}
HUB_TIMEOUT = 3.0  # seconds to wait for the hub before calling it unreachable


def hub_unreachable() -> str | None:
    """Why the Hugging Face hub cannot be reached now (None when it answers, or in offline mode, where
    ``datasets`` reads its cache): one connection attempt of :data:`HUB_TIMEOUT` seconds, instead of
    ``datasets``' retries (about 30 s without network)."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return None
    url = urlparse(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=HUB_TIMEOUT).close()
    except OSError as err:
        return f"{url.hostname}: {err}"
    return None


def _unreachable(path: str, reason: str) -> HubUnreachableError:
    local = LOCAL_COPIES.get(path, "--data.init_args.path DIR --data.init_args.revision null (DIR: a local copy "
                                   "with the hub's layout)")
    return HubUnreachableError(f"{path}: the Hugging Face hub cannot be reached ({reason}) (read a local copy "
                               f"instead: {local}; or set HF_HUB_OFFLINE=1 to use a cached copy)")


def _dataset_splits(formats: SplitFormats, path, name, data_dir, data_files, revision, format, options) -> dict:
    import datasets  # heavy import, only when a dataset is read

    on_hub = not Path(path).exists() and data_files is None
    if on_hub and (reason := hub_unreachable()) is not None:
        raise _unreachable(path, reason)
    try:
        with _quiet_builder_errors():
            loaded = datasets.load_dataset(path, name=name, data_dir=data_dir, data_files=data_files,
                                           revision=revision)
    except ConnectionError as err:
        if not on_hub:
            raise
        raise _unreachable(path, str(err).splitlines()[0][:200]) from err
    except StopIteration:  # datasets' builders on an empty file
        raise DataFormatError(_source_of(path, data_dir, data_files), None, f"empty {_kind(path, data_files)} "
                              "input: no rows (give a file with at least one sentence)") from None
    except datasets.exceptions.DatasetGenerationError as err:
        cause = err.__cause__ or err.__context__ or err
        raise DataFormatError(_source_of(path, data_dir, data_files), None, f"not valid {_kind(path, data_files)}: "
                              f"{type(cause).__name__}: {str(cause).splitlines()[0][:200] if str(cause) else ''}")
    label = path + (f"/{data_dir}" if data_dir else "") + (f"[{name}]" if name else "")
    out: dict[str, list] = {}
    for split, dataset in loaded.items():
        fmt = format if format != "auto" else formats.dataset_format(dataset.column_names)
        check_reader_options(formats.readers[fmt], fmt, options)
        items, _ = formats.readers[fmt](dataset, source=f"{label}:{split}", **options)
        add_split(out, split, items)
    return ordered(out)


def check_reader_options(reader: Reader, fmt: str, options: dict[str, Any]) -> None:
    """Each of ``options`` (the data's ``reader_options``) is an argument the ``fmt`` reader takes; else one
    :class:`ConfigError` naming it and what the reader takes (a reader of another format takes other options)."""
    import inspect

    parameters = inspect.signature(reader).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    takes = [name for name in list(parameters)[1:] if name != "source"]
    for key in options:
        if key not in parameters:
            raise ConfigError(f"--data.init_args.reader_options: the {fmt} reader takes no option {key!r} (it takes "
                              f"{', '.join(takes) or 'none'}); delete it, or give the format it belongs to")


class _DropErrors(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.ERROR


@contextmanager
def _quiet_builder_errors():
    """``datasets``' builders log a failed file with its traceback at ERROR before raising; the error raised is
    turned into one ``DataFormatError`` naming the file, so those log records are dropped while loading."""
    handlers = logging.getLogger("datasets").handlers
    drop = _DropErrors()
    for handler in handlers:
        handler.addFilter(drop)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(drop)


def _source_of(path, data_dir, data_files) -> str:
    if data_files is not None:
        return ", ".join(str(Path(path) / f) if Path(path).is_dir() else str(f) for f in flat(data_files))
    return str(Path(path) / data_dir) if data_dir else str(path)


def _kind(path, data_files) -> str:
    names = [str(f) for f in flat(data_files)] if data_files is not None else [str(path)]
    if all(n.endswith(".parquet") for n in names):
        return "parquet"
    if all(n.endswith((".jsonl", ".json")) for n in names):
        return "JSON lines"
    return "dataset input"


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
            looks = next((h for h in (hint(f, fmt, formats.readers) for f in ignored[:1]) if h), None)
            raise FileNotFoundError(f"no {fmt} input among {[str(p) for p in paths]}" + (f" ({looks})" if looks else ""))
        items: list = []
        total: Counter = Counter()
        check_reader_options(formats.readers[fmt], fmt, options)
        for item in inputs:
            try:
                item_items, stats = formats.readers[fmt](item, **options)
            except DataFormatError as err:  # a file of another format says which one it looks like
                file = Path(item) if Path(item).is_file() else Path(err.source)  # a directory: the failing file
                if not file.is_file():
                    raise
                raise with_format_hint(err, file, fmt, formats.readers) from None
            items.extend(item_items)
            total.update(stats)
        formats.log.info("split %s: %d %s from %d %s input(s) %s", normalise_split(split), len(items), formats.unit,
                         len(inputs), fmt, dict(total))
        add_split(out, split, items)
    return ordered(out)
