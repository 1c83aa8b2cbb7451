"""Helpers shared by the readers: strict UTF-8 line reading, sentence blocks, stats and logging."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from onlstm_tasks.errors import DataFormatError

Stats = dict[str, int]
Row = tuple[int, str]  # (1-based line number, line text)
_FIELD_SEPARATOR = re.compile(r"[ \t]+")


def split_fields(line: str) -> list[str]:
    """Split on runs of spaces/tabs only (``str.split`` would also split tokens at U+00A0 and friends)."""
    return _FIELD_SEPARATOR.split(line.strip(" \t"))


def read_lines(path: str | Path, expected: str) -> list[str]:
    """The file's lines (no line ends), decoded strictly as UTF-8 (a leading BOM is dropped).

    Only ``\\n`` (and ``\\r\\n``) end a line: ``str.splitlines`` would also split inside tokens on
    U+2028, U+0085, form feeds etc.; the ``\\n`` that ends the last line starts no further (empty) line. Raises
    DataFormatError for an empty file or bytes that are not UTF-8.
    """
    data = Path(path).read_bytes()
    if not data.strip():
        raise DataFormatError(str(path), 1, f"expected {expected}, found an empty file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise DataFormatError(
            str(path), line, f"expected UTF-8 text, found byte 0x{data[err.start]:02x} at column {column}"
        ) from None
    lines = [line.removesuffix("\r") for line in text.removeprefix("\ufeff").split("\n")]
    if text.endswith("\n"):
        lines.pop()
    return lines


def blocks(lines: list[str]) -> Iterator[list[Row]]:
    """Groups of consecutive non-blank lines (sentences), each line with its 1-based number."""
    block: list[Row] = []
    for number, line in enumerate(lines, start=1):
        if line.strip(" \t"):
            block.append((number, line))
        elif block:
            yield block
            block = []
    if block:
        yield block


def log_read(logger: logging.Logger, source: str, stats: Mapping[str, int], skipped: Mapping[str, str]) -> None:
    """One INFO line: how many sentences were read and the count of everything skipped (or repaired) by design."""
    parts = [f"{label}: {stats.get(key, 0)}" for key, label in skipped.items()]
    logger.info("%s: read %d sentences; %s", source, stats.get("sentences", 0), "; ".join(parts))


def inner_feature(feature: Any) -> Any:
    """The element feature of a ``datasets`` list feature (``List``/``Sequence`` or a plain ``[feature]``)."""
    if isinstance(feature, list):
        return feature[0]
    return getattr(feature, "feature", feature)


def class_label_names(feature: Any) -> list[str] | None:
    """ClassLabel names of a list-of-labels feature, or None when its elements are not ClassLabels."""
    names = getattr(inner_feature(feature), "names", None)
    return list(names) if names is not None else None
