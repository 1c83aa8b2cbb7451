"""Pretrained word vectors (GloVe or word2vec *text* format, read by :mod:`onlstm_tasks.data.core.vector_file`) copied
into the rows of an embedding matrix."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from onlstm_tasks.data.core.vector_file import iter_vector_lines, parse_values
from onlstm_tasks.data.core.vocab import PAD, UNK


def copy_pretrained_rows(
    weight: torch.Tensor, vocab: Sequence[str], path: str | Path, lowercase_lookup: bool = True
) -> list[int]:
    """Copy the vectors of ``path`` into the rows of ``weight`` [len(vocab), dim] whose word is found.

    Matching, best first: the exact word; then (with ``lowercase_lookup``) the lowercased vocabulary word
    (``Paris`` takes ``paris`` from an uncased GloVe file); then the lowercased file word (``paris``, in a
    lowercased vocabulary, takes ``Paris`` from a cased word2vec file). At equal rank the first line of the
    file wins. The special tokens ``<pad>`` and ``<unk>`` are never looked up. Returns the indices of the rows set,
    sorted.
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
    return sorted(rank)
