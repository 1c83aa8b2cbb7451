"""Checks of a split's sentences that the data modules run at ``setup``, before any training step.

Each names the file (or dataset split) and the line (or row and sentence id) of what it finds:

* :func:`drop_empty_sentences`: sentences without a token (an encoder needs at least one per row) are skipped
  and counted (``empty_sentences: skip``, the default) or refused (``empty_sentences: error``);
* :func:`check_tokens`: a token that is the empty string (or only whitespace) is an error;
* :func:`warn_cut_types`: an entity type seen once in training that is a prefix of another type (``MI`` beside
  ``MISC``: a file cut mid-tag) is a warning.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence

from onlstm_tasks.errors import DataFormatError

from .examples import Example
from .tags import split_tag

EMPTY_SENTENCES = ("skip", "error")


def where(example: Example) -> tuple[str, str | int]:
    """An example's (source, line) for :class:`DataFormatError`, the line with its sentence id when it has one."""
    line = f"{example.line} (sentence {example.sentence_id})" if example.sentence_id else example.line
    return example.source or "<data>", line


def drop_empty_sentences(split: str, examples: Sequence[Example], policy: str, log: logging.Logger) -> list[Example]:
    """``examples`` without the sentences that have no token: skipped and counted in one WARNING line naming the
    first (``policy="skip"``), or a :class:`DataFormatError` naming the first (``policy="error"``)."""
    if policy not in EMPTY_SENTENCES:
        raise ValueError(f"empty_sentences must be one of {EMPTY_SENTENCES}, got {policy!r}")
    kept = [ex for ex in examples if len(ex)]
    if len(kept) == len(examples):
        return list(examples)
    first = next(ex for ex in examples if not len(ex))
    source, line = where(first)
    if policy == "error":
        raise DataFormatError(source, line, f"empty sentence (no token) in the {split} split (remove it, or set "
                              "data empty_sentences: skip)")
    log.warning("%s: %d empty sentence(s) (no token) skipped, the first at %s:%s (empty_sentences: skip; 'error' "
                "refuses them)", split, len(examples) - len(kept), source, line)
    return kept


def check_tokens(examples: Sequence[Example]) -> None:
    """A :class:`DataFormatError` for the first token that is the empty string or only whitespace."""
    for ex in examples:
        for position, word in enumerate(ex.words, start=1):
            if not word.strip():
                source, line = where(ex)
                raise DataFormatError(source, line, f"token {position} of the sentence is {word!r}, an empty "
                                      "token (remove it or give it a text)")


def warn_cut_types(train: Sequence[Example], log: logging.Logger) -> list[str]:
    """Warns once per entity type that occurs in one training entity only and is a prefix of another type (a
    file cut mid-tag: ``I-MI`` beside ``I-MISC``), naming where it occurs; returns those warnings."""
    counts: Counter[str] = Counter()
    first: dict[str, tuple[Example, int]] = {}
    for ex in train:  # tags are IOB2 after reading: an entity starts at its B- tag
        for position, tag in enumerate(ex.tags or (), start=1):
            prefix, kind = split_tag(tag)
            if prefix == "B":
                counts[kind] += 1
                first.setdefault(kind, (ex, position))
    warnings = []
    for kind, n in sorted(counts.items()):
        longer = sorted(other for other in counts if other != kind and other.startswith(kind))
        if n == 1 and longer:
            ex, position = first[kind]
            source, line = where(ex)
            if ex.token_lines is not None:  # the line of the tag itself, not the sentence's first
                line = ex.token_lines[position - 1]
            message = (f"{source}:{line}: entity type {kind!r} (token {position} of the sentence) occurs "
                       f"once in training and is a prefix of {longer[0]!r}: a file cut mid-tag? (fix the tag if so)")
            log.warning("%s", message)
            warnings.append(message)
    return warnings
