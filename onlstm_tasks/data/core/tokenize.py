"""One tokenizer for raw text that keeps character offsets (used for prediction input and ABSA)."""

from __future__ import annotations

import re

_ABBREVIATIONS = r"(?:Mr|Mrs|Ms|Dr|Prof|St|Jr|Sr|Inc|Ltd|Co|Corp|vs|etc|No|Gen|Gov|Sen|Rep)\."
# initialisms ("U.S."), known abbreviations, numbers with inner periods or commas ("3.5", "1,000"), words with
# inner apostrophes ("don't"), or any single other symbol; hyphens split words ("well - built"), as in OntoNotes,
# so that an aspect term inside a hyphenated compound gets its own token
_TOKEN = re.compile(rf"(?:[A-Za-z]\.){{2,}}|\b{_ABBREVIATIONS}|\d+(?:[.,]\d+)+|\w+(?:['’]\w+)*|[^\w\s]")


def tokenize(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Splits ``text`` into tokens and their [start, end) character offsets."""
    words, offsets = [], []
    for m in _TOKEN.finditer(text):
        words.append(m.group())
        offsets.append((m.start(), m.end()))
    return words, offsets
