"""Streaming reader for pretrained word vectors in GloVe or word2vec *text* format.

GloVe: ``word v1 v2 ... vD`` per line.  word2vec text: the same, after a header line ``count dim``.
Files are read line by line (GloVe files are gigabytes), optionally gzip-compressed (``*.gz``), and decoded
strictly as UTF-8 (a leading BOM is dropped): a line that is not UTF-8 is an error naming the file and line.
The data modules read only the words (:func:`read_vector_words`, to extend the vocabulary); the word embedder
reads the values (:mod:`onlstm_tasks.embedders.pretrained`).
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import IO


def _open(path: Path) -> IO[bytes]:
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(1-based line number, text)`` of every line, split at ``\\n`` only and decoded strictly as UTF-8."""
    with _open(path) as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                yield lineno, raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
            except UnicodeDecodeError as err:
                raise ValueError(
                    f"{path}:{lineno}: expected UTF-8 text, found byte 0x{raw[err.start]:02x} at column "
                    f"{err.start + 1}"
                ) from None


def _is_header(fields: list[str]) -> bool:
    return len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit()


def iter_vector_lines(path: str | Path, dim: int | None) -> Iterator[tuple[int, str, list[str]]]:
    """Yield ``(line_number, word, value_strings)`` for every vector line of ``path`` (1-based lines).

    The values are left as strings so callers parse only the rows they keep. Raises ``ValueError`` naming
    the file and line when the file's dimension (word2vec header, or the first vector line) is not ``dim``,
    or when a later line has too few values. With ``dim=None`` the dimension is the file's own (its header's,
    else its first vector line's). A line with *more* fields is read as a word containing
    spaces (GloVe 840B has a few such entries): the last ``dim`` fields are the vector.
    """
    path = Path(path)
    first = True
    for lineno, line in _lines(path):
        fields = line.rstrip("\r\n ").split(" ")
        if fields == [""]:
            continue
        if first:
            first = False
            if _is_header(fields):
                if dim is None:
                    dim = int(fields[1])
                elif int(fields[1]) != dim:
                    raise ValueError(
                        f"{path}:{lineno}: word2vec header says {fields[1]}-dimensional vectors, "
                        f"but the embedding has dim={dim}"
                    )
                continue
            if dim is None:
                dim = len(fields) - 1
            elif len(fields) - 1 != dim:
                raise ValueError(
                    f"{path}:{lineno}: found {len(fields) - 1}-dimensional vectors, "
                    f"but the embedding has dim={dim}"
                )
        if len(fields) - 1 < dim:
            raise ValueError(
                f"{path}:{lineno}: expected a word and {dim} values, found {len(fields)} fields"
            )
        yield lineno, " ".join(fields[:-dim]), fields[-dim:]


def parse_values(path: str | Path, lineno: int, values: list[str]) -> list[float]:
    """The floats of one vector line, or ``ValueError`` naming the file and line."""
    try:
        return [float(v) for v in values]
    except ValueError as e:
        raise ValueError(f"{path}:{lineno}: not a number in vector line ({e})") from None


def read_vector_words(path: str | Path, limit: int | None = None) -> list[str]:
    """The words of the first ``limit`` vector lines of ``path`` (all with ``None``), in file order (most frequent
    first in word2vec and GloVe files). Only the words are kept; a missing file is an error naming it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: word vectors file not found (data.vectors)")
    words: list[str] = []
    if limit is not None and limit <= 0:
        return words
    for _, word, _ in iter_vector_lines(path, None):
        words.append(word)
        if limit is not None and len(words) >= limit:
            break
    return words
