"""Streaming reader for pretrained word vectors in GloVe or word2vec *text* format.

GloVe: ``word v1 v2 ... vD`` per line.  word2vec text: the same, after a header line ``count dim``.
Files are read line by line (GloVe files are gigabytes), optionally gzip-compressed (``*.gz``), and decoded
strictly as UTF-8 (a leading BOM is dropped): a line that is not UTF-8 is an error naming the file and line.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

import torch

from onlstm_tasks.data.vocab import PAD, UNK


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


def iter_vector_lines(path: str | Path, dim: int) -> Iterator[tuple[int, str, list[str]]]:
    """Yield ``(line_number, word, value_strings)`` for every vector line of ``path`` (1-based lines).

    The values are left as strings so callers parse only the rows they keep. Raises ``ValueError`` naming
    the file and line when the file's dimension (word2vec header, or the first vector line) is not ``dim``,
    or when a later line has too few values. A line with *more* fields is read as a word containing
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
                if int(fields[1]) != dim:
                    raise ValueError(
                        f"{path}:{lineno}: word2vec header says {fields[1]}-dimensional vectors, "
                        f"but the embedding has dim={dim}"
                    )
                continue
            if len(fields) - 1 != dim:
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


def copy_pretrained_rows(
    weight: torch.Tensor, vocab: Sequence[str], path: str | Path, lowercase_lookup: bool = True
) -> int:
    """Copy the vectors of ``path`` into the rows of ``weight`` [len(vocab), dim] whose word is found.

    Matching, best first: the exact word; then (with ``lowercase_lookup``) the lowercased vocabulary word
    (``Paris`` takes ``paris`` from an uncased GloVe file); then the lowercased file word (``paris``, in a
    lowercased vocabulary, takes ``Paris`` from a cased word2vec file). At equal rank the first line of the
    file wins. The special tokens ``<pad>`` and ``<unk>`` are never looked up. Returns the number of rows set.
    """
    dim = weight.shape[1]
    exact = {w: i for i, w in enumerate(vocab) if w not in (PAD, UNK)}
    by_lower: dict[str, list[int]] = {}
    if lowercase_lookup:
        for w, i in exact.items():
            by_lower.setdefault(w.lower(), []).append(i)
    rank: dict[int, int] = {}  # vocabulary index -> rank of the match that set its row (3 best)
    for lineno, word, values in iter_vector_lines(path, dim):
        targets = []
        i = exact.get(word)
        if i is not None and rank.get(i, 0) < 3:
            targets.append(i)
            rank[i] = 3
        if lowercase_lookup:
            candidates = [(j, 2) for j in by_lower.get(word, ())]
            if word.lower() != word:
                candidates += [(j, 1) for j in by_lower.get(word.lower(), ())]
            for j, r in candidates:
                if rank.get(j, 0) < r:
                    targets.append(j)
                    rank[j] = r
        if targets:
            row = torch.tensor(parse_values(path, lineno, values), dtype=weight.dtype)
            weight[targets] = row
    return len(rank)
