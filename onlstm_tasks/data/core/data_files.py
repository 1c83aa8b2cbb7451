"""Which inputs make up which split: split names, ``data_files`` expansion and discovery by file name.

Used by the one split loader (``splits.load_splits``), which mirrors ``datasets.load_dataset``: ``data_files`` as
{split: file | directory | glob | list of them}, or splits found among the children of a folder whose names carry
a train/validation/dev/test token.
"""

from __future__ import annotations

import glob
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypeVar

SPLIT_ALIASES = {
    "train": "train", "training": "train",
    "validation": "validation", "valid": "validation", "val": "validation", "dev": "validation",
    "development": "validation", "devel": "validation", "testa": "validation",  # CoNLL-2003 eng.testa
    "test": "test", "testb": "test",  # CoNLL-2003 eng.testb
}
SPLIT_ORDER = ("train", "validation", "test")
DataFiles = str | Sequence[str] | Mapping[str, str | Sequence[str]]
T = TypeVar("T")

log = logging.getLogger(__name__)


def normalise_split(name: str) -> str:
    """``dev``/``development``/``valid``/``testa`` -> ``validation``, ``testb`` -> ``test``; others unchanged."""
    return SPLIT_ALIASES.get(name.lower(), name)


def ordered(splits: dict[str, T]) -> dict[str, T]:
    """train, validation, test first, then any other split by name."""
    rank = {s: i for i, s in enumerate(SPLIT_ORDER)}
    return dict(sorted(splits.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))


def add_split(out: dict, split: str, examples) -> None:
    """``out[normalise_split(split)] = examples``; two splits with the same normalised name are an error."""
    key = normalise_split(split)
    if key in out:
        raise ValueError(f"two splits normalise to {key!r}; give them distinct names")
    out[key] = examples


def flat(data_files: DataFiles) -> list[str]:
    """Every path or pattern named in ``data_files``, in order."""
    if isinstance(data_files, Mapping):
        return [v for value in data_files.values() for v in flat(value)]
    if isinstance(data_files, (str, os.PathLike)):
        return [os.fspath(data_files)]
    return [os.fspath(v) for v in data_files]


def check_hub_id(path: str) -> None:
    """Raise FileNotFoundError when a path that does not exist cannot be a hub id ("owner/name") either."""
    if path.startswith(("/", ".", "~")) or path.count("/") > 1 or "\\" in path:
        raise FileNotFoundError(f"{path}: no such file or directory (and not a hub dataset id)")


def expand(pattern: str, root: Path) -> list[Path]:
    """A file, directory or glob (relative to ``root`` unless absolute) -> existing paths, sorted."""
    full = pattern if os.path.isabs(pattern) else str(root / pattern)
    if glob.has_magic(pattern):
        matches = sorted(Path(p) for p in glob.glob(full, recursive=True))
        if not matches:
            raise FileNotFoundError(f"{full}: the pattern matches no file")
        return matches
    if not Path(full).exists():
        raise FileNotFoundError(f"{full}: no such file or directory")
    return [Path(full)]


def split_of(name: str) -> str | None:
    """The split a file or folder name implies (``Laptop_Train_v2.xml`` -> train), or None (none or several)."""
    found = {SPLIT_ALIASES[t] for t in re.split(r"[^a-z0-9]+", name.lower()) if t in SPLIT_ALIASES}
    return found.pop() if len(found) == 1 else None


def discover(base: Path) -> dict[str, list[Path]]:
    """Children of ``base`` named after a split (``train.txt``, ``dev/``, ``en_ewt-uner-test.conllx``, ...).

    The other children (``LICENSE.txt``, ``README``, names with no or several split tokens) are ignored, and
    logged by name; hidden ones (``.cache``) are ignored and counted.
    """
    if base.is_file():
        return {split_of(base.name) or "train": [base]}
    if not base.is_dir():
        raise FileNotFoundError(f"{base}: no such file or directory")
    splits: dict[str, list[Path]] = {}
    ignored: list[str] = []
    hidden = 0
    for child in sorted(base.iterdir()):
        if child.name.startswith("."):
            hidden += 1
            continue
        split = split_of(child.name)
        if split is None:
            ignored.append(child.name)
        else:
            splits.setdefault(split, []).append(child)
    if not splits:
        found = f" (found: {', '.join(ignored[:10])}{', ...' if len(ignored) > 10 else ''})" if ignored else ""
        raise FileNotFoundError(f"{base}: no file or folder named after a split (train, validation/dev, test)"
                                f"{found}; pass data_files={{split: path}}")
    log_ignored(base, ignored, hidden)
    return splits


def log_ignored(base: Path, ignored: list[str], hidden: int, shown: int = 10) -> None:
    """One INFO line naming the children of ``base`` no split took (the first ``shown``) and counting hidden ones."""
    parts = []
    if ignored:
        more = f" and {len(ignored) - shown} more" if len(ignored) > shown else ""
        parts.append(f"{len(ignored)} not named after a split (train, validation/dev, test): "
                     f"{', '.join(ignored[:shown])}{more}")
    if hidden:
        parts.append(f"{hidden} hidden")
    if parts:
        log.info("%s: ignored %s; pass data_files={split: path} to use them", base, "; ".join(parts))


def split_paths(base: Path, data_files: DataFiles | None) -> tuple[dict[str, list[Path]], dict[str, bool]]:
    """The inputs of every split and, per split, whether they were listed one by one (no glob, so a mix of
    formats among them is an error rather than something to filter). ``data_files`` that is not a mapping
    is the training split."""
    if data_files is None:
        return discover(base), {}
    if not isinstance(data_files, Mapping):
        data_files = {"train": data_files}
    root = base if base.is_dir() else Path(".")
    try:
        splits = {split: [p for pattern in flat(value) for p in expand(pattern, root)]
                  for split, value in data_files.items()}
    except FileNotFoundError as err:
        if base.exists():
            raise
        # relative data_files are looked up in the working directory when the folder does not exist: say so
        raise FileNotFoundError(
            f"{err}; looked in the working directory {Path.cwd()} because the data folder {base} does not exist "
            f"(give the folder holding the files: --data.init_args.path FOLDER)") from None
    strict = {split: not any(glob.has_magic(p) for p in flat(value)) for split, value in data_files.items()}
    return splits, strict


def files_under(paths: list[Path]) -> list[Path]:
    """The paths, with every directory replaced by the files under it (recursive, sorted, no hidden ones)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(f for f in p.rglob("*")
                          if f.is_file() and not any(part.startswith(".") for part in f.relative_to(p).parts))
        else:
            out.append(p)
    return out
