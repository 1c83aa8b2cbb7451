"""The 3-line ``.xml.seg`` format of many public ABSA codebases (e.g. ``Laptops_Train.xml.seg``).

Each aspect is three lines: the sentence with ``$T$`` where the aspect stands, the aspect, and the polarity
``-1``/``0``/``1`` (negative/neutral/positive). A sentence with several aspects is repeated, once per aspect.
"""

from __future__ import annotations

import logging
from pathlib import Path

from onlstm_tasks.data.absa.readers.aspects import AspectCollector
from onlstm_tasks.data.core.examples import Example
from onlstm_tasks.data.core.reading import read_lines
from onlstm_tasks.errors import DataFormatError

logger = logging.getLogger(__name__)

PLACEHOLDER = "$T$"
SEG_POLARITIES = {"-1": "negative", "0": "neutral", "1": "positive"}


def read_seg(
    path: str | Path, source: str | None = None, keep_conflict: bool = False
) -> tuple[list[Example], dict[str, int]]:
    """One ``.seg`` file -> one Example per 3-line group (``line`` = the group's first line).

    The text is rebuilt by putting the aspect in place of ``$T$``; consecutive groups with the same rebuilt
    text are one sentence (``sentence_id`` = the first line of its first group). The format has no conflict
    class, so ``keep_conflict`` changes nothing (accepted so every reader takes the same options).
    """
    source = source or str(path)
    lines = read_lines(path, "3-line groups: sentence with $T$, aspect, polarity")
    while lines and not lines[-1].strip():
        lines.pop()
    if len(lines) % 3:
        first = len(lines) - len(lines) % 3 + 1
        raise DataFormatError(source, first, f"expected 3 lines per aspect (sentence with $T$, aspect, polarity), "
                              f"found a last group of {len(lines) % 3} line(s)")
    collector = AspectCollector(source, keep_conflict)
    previous, sentence_id = None, None
    for i in range(0, len(lines), 3):
        number = i + 1
        sentence, term, value = (line.strip(" \t") for line in lines[i : i + 3])
        count = sentence.count(PLACEHOLDER)
        if count != 1:
            raise DataFormatError(source, number, f"expected the sentence with one '$T$' where the aspect stands, "
                                  f"found {count or 'none'}: {sentence!r}")
        if not term:
            raise DataFormatError(source, number + 1, "expected the aspect term, found an empty line")
        label = SEG_POLARITIES.get(value)
        if label is None:
            raise DataFormatError(source, number + 2, f"expected a polarity -1, 0 or 1, found {value!r}")
        left, _, right = sentence.partition(PLACEHOLDER)
        text = left + term + right
        if text != previous:
            previous, sentence_id = text, str(number)
            collector.stats["sentences"] += 1
        collector.add(text, len(left), len(left) + len(term), label, number, sentence_id)
    return collector.finish(logger)
