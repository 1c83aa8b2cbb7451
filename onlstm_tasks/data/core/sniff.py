"""What an input file looks like, so a file given to the wrong ``format`` is named as what it is.

:func:`sniff` reads the first few KB of a file and says which kind of input it resembles (XML, parquet, JSON
lines, a JSON list, CoNLL-2012, CoNLL-X/U, ``.seg`` or token columns); :func:`with_format_hint` turns a reader's
:class:`DataFormatError` into one that also says which ``format:`` value reads that kind. The split loader
(:func:`~onlstm_tasks.data.core.splits.load_splits`) applies it wherever a file reader fails to parse, for every task.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from onlstm_tasks.errors import DataFormatError

# kind -> (what it is, the format values that read it (in order of preference, across the tasks), the advice when
# none of them is a format of the task at hand)
KINDS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "xml": ("XML", ("semeval_xml",), "format: semeval_xml reads SemEval XML, for aspect-sentiment data"),
    "parquet": ("a parquet dataset file", ("tokens", "ontonotes", "setfit"), "give it as a dataset"),
    "jsonl": ("JSON lines (a dataset file)", ("tokens", "ontonotes", "setfit"), "give it as a dataset"),
    "json": ("a JSON document", (), "parser output (*_depparsed.json) belongs in data.parses; a dataset of "
             "records needs format: tokens, ontonotes or setfit"),
    "conll2012": ("CoNLL-2012 '#begin document' blocks", ("conll2012",), "format: conll2012 reads it, for NER"),
    "conllx": ("CoNLL-X/U rows (numbered tokens, 10+ tab-separated columns)", ("conllx",),
               "format: conllx reads it, for NER"),
    "seg": ("the 3-line .seg format (sentence with $T$, aspect, polarity)", ("seg",),
            "format: seg reads it, for aspect-sentiment data"),
    "columns": ("token columns (token ... tag)", ("columns",), "format: columns reads it, for NER"),
}
_HEAD_BYTES = 8192
_CONLLX_ROW = re.compile(r"^\d+(?:[-.]\d+)?\t(?:[^\t]*\t){8,}")


def sniff(path: str | Path) -> str | None:
    """The kind of input (a key of :data:`KINDS`) the start of a file resembles, or None (unreadable, empty,
    or nothing recognisable)."""
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD_BYTES)
    except OSError:
        return None
    if head.startswith(b"PAR1"):
        return "parquet"
    text = head.decode("utf-8", errors="replace").removeprefix("\ufeff")
    stripped = text.lstrip()
    if stripped.startswith("<"):
        return "xml"
    if stripped.startswith("["):
        return "json"
    lines = [line.rstrip("\r") for line in text.split("\n") if line.strip()]
    if len(head) == _HEAD_BYTES and len(lines) > 1:
        lines.pop()  # cut off by the read
    if stripped.startswith("{"):
        return "jsonl" if all(line.lstrip().startswith("{") for line in lines[:5]) else "json"
    if any(line.lstrip().startswith("#begin document") for line in lines[:20]):
        return "conll2012"
    rows = [line for line in lines if not line.startswith("#")][:20]
    if rows and sum(bool(_CONLLX_ROW.match(line)) for line in rows) >= len(rows) * 0.8:
        return "conllx"
    if any("$T$" in line for line in lines[:9]):
        return "seg"
    if rows and all(len(line.split()) >= 2 for line in rows):
        return "columns"
    return None


def hint(path: str | Path, format: str, known: Iterable[str]) -> str | None:
    """``"this file looks like X, not F: use format: Y"`` when the file resembles a kind that another of the task's
    formats (``known``) reads, ``"... which no format of this task reads"`` when none does, None when it looks
    like ``format`` (or like nothing known)."""
    kind = sniff(path)
    if kind is None:
        return None
    what, readers, otherwise = KINDS[kind]
    if format in readers:
        return None
    usable = [name for name in readers if name in set(known)]
    if not usable:
        return f"this file looks like {what}, which no format of this task reads: {otherwise}"
    alternatives = " or ".join(f"format: {name}" for name in usable)
    return f"this file looks like {what}, not {format}: use {alternatives}"


def with_format_hint(err: DataFormatError, path: str | Path, format: str, known: Iterable[str]) -> DataFormatError:
    """``err`` with :func:`hint` appended when the file looks like another format than ``format`` (else ``err``)."""
    extra = hint(path, format, known)
    if extra is None:
        return err
    message = str(err)
    where = f"{err.source}:{err.line}: " if err.line not in (None, "") else f"{err.source}: "
    what = message[len(where):] if message.startswith(where) else message
    return DataFormatError(err.source, err.line, f"{what} ({extra})")
