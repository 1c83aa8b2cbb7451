"""CoNLL-2003-style column files: token first, tag last, whitespace-separated, blank line between sentences."""

from __future__ import annotations

import logging
from pathlib import Path

from onlstm_tasks.data.core.examples import Example
from onlstm_tasks.data.core.reading import Stats, blocks, log_read, read_lines, split_fields
from onlstm_tasks.data.core.tags import normalise_tags
from onlstm_tasks.errors import DataFormatError

logger = logging.getLogger(__name__)

DOCSTART = "-DOCSTART-"


def read_columns(
    path: str | Path, source: str | None = None, scheme: str = "iob1", pos_column: int | None = None
) -> tuple[list[Example], Stats]:
    """Read one column file to IOB2 Examples.

    ``scheme`` is the file's tag scheme: "iob1" (CoNLL-2003, the default), "iob2" (orphan ``I-X`` repaired
    to ``B-X`` and counted) or "iobes". ``-DOCSTART-`` lines are ignored wherever they stand (counted).
    ``pos_column`` (e.g. 1 for CoNLL-2003) also keeps that column as ``pos``. Every token line of the file
    must have the same number of columns.
    """
    source = source or str(path)
    lines = read_lines(path, "token lines with a tag in the last column")
    stats = {"sentences": 0, "tokens": 0, "docstart_lines": 0, "repaired_tags": 0}
    examples: list[Example] = []
    n_columns: tuple[int, int] | None = None  # (count, line it was first seen on)
    for block in blocks(lines):
        rows = []
        for number, line in block:
            cols = split_fields(line)
            if cols[0] == DOCSTART:
                stats["docstart_lines"] += 1
                continue
            if n_columns is None:
                n_columns = (len(cols), number)
                if len(cols) < 2:
                    raise DataFormatError(source, number, "expected at least 2 columns (token ... tag), found 1")
            elif len(cols) != n_columns[0]:
                raise DataFormatError(source, number, f"expected {n_columns[0]} columns as on line {n_columns[1]}, "
                                      f"found {len(cols)}")
            if pos_column is not None and not 0 < pos_column < len(cols) - 1:
                raise DataFormatError(source, number, f"expected a POS column at index {pos_column}, "
                                      f"but the line has {len(cols)} columns")
            rows.append((number, cols))
        if not rows:  # a block made only of -DOCSTART- lines
            continue
        numbers = [number for number, _ in rows]
        tags, repaired = normalise_tags([cols[-1] for _, cols in rows], scheme, source, numbers)
        stats["repaired_tags"] += repaired
        examples.append(Example(
            words=tuple(cols[0] for _, cols in rows), tags=tuple(tags),
            pos=None if pos_column is None else tuple(cols[pos_column] for _, cols in rows),
            source=source, line=numbers[0], token_lines=tuple(numbers),
        ))
        stats["sentences"] += 1
        stats["tokens"] += len(rows)
    if not examples:
        raise DataFormatError(source, 1, "expected at least one sentence, found only -DOCSTART- lines")
    log_read(logger, source, stats, {"docstart_lines": "-DOCSTART- lines ignored",
                                      "repaired_tags": "orphan I- tags repaired to B-"})
    return examples, stats
