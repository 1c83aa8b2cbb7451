"""What every aspect reader shares: polarity names, locating a term, character span -> token span, stats.

Every format ends in :meth:`AspectCollector.add`: the sentence text is tokenised by THE tokenizer
(``data.tokenize``), the term's character span [start, end) becomes the token span of the tokens overlapping
it, and one :class:`Example` per aspect is kept (``conflict`` only with ``keep_conflict``). The same term in
the same text therefore gets the same token span whichever format it was read from. A term that begins or ends
inside a token (``trackpad`` in ``trackpad's``) takes the whole token: counted, and logged as a warning naming
the file, line and sentence (the SemEval-2014 laptops have one such term in 2,358 training terms, one in 654 test
terms: legitimate data, so not an error).
"""

from __future__ import annotations

import logging
from collections import Counter

from onlstm_tasks.data.core.examples import Example
from onlstm_tasks.data.core.tokenize import tokenize
from onlstm_tasks.errors import DataFormatError

logger = logging.getLogger(__name__)

POLARITIES = ("positive", "negative", "neutral", "conflict")
WIDENED_SHOWN = 5  # aspect terms widened to whole tokens that are each logged (all are counted) per input
STAT_KEYS = ("sentences", "aspects", "conflict_dropped", "sentences_without_aspects", "inside_token")


def polarity(value: object, source: str, line: int | str | None, sentence: str | None = None) -> str:
    """A polarity name (``Positive`` -> ``positive``); anything else is a DataFormatError."""
    name = value.strip().lower() if isinstance(value, str) else None
    if name not in POLARITIES:
        raise DataFormatError(source, line, f"{_sentence(sentence)}expected a polarity in {list(POLARITIES)}, "
                              f"found {value!r}")
    return name


def nth_occurrence(text: str, term: str, ordinal: int) -> int | None:
    """Start of the ``ordinal``-th (0-based) occurrence of ``term`` in ``text``, counted without overlaps as
    ``str.count`` does (the hub datasets' ``ordinal`` is ``text[:start].count(term)``); None if there is none."""
    start = -len(term)
    for _ in range(ordinal + 1):
        start = text.find(term, start + len(term))
        if start < 0:
            return None
    return start


def token_span(offsets: list[tuple[int, int]], start: int, end: int) -> tuple[int, int, bool] | None:
    """The tokens overlapping characters [start, end): ``(first, last + 1, exact)``, where ``exact`` says the
    tokens cover exactly the (whitespace-trimmed) characters; None when no token overlaps."""
    inside = [i for i, (a, b) in enumerate(offsets) if a < end and b > start]
    if not inside:
        return None
    first, last = inside[0], inside[-1]
    return first, last + 1, offsets[first][0] == start and offsets[last][1] == end


def _sentence(sentence: str | None) -> str:
    return f"sentence {sentence}: " if sentence is not None else ""


class AspectCollector:
    """Builds the Examples of one input (file or dataset split) and counts what it did.

    ``stats``: sentences (with text), aspects (Examples kept), conflict_dropped, sentences_without_aspects,
    inside_token (terms whose first or last character is inside a token, so the span takes that whole token).
    """

    def __init__(self, source: str, keep_conflict: bool = False) -> None:
        self.source, self.keep_conflict = source, keep_conflict
        self.examples: list[Example] = []
        self.stats: dict[str, int] = dict.fromkeys(STAT_KEYS, 0)
        self._tokenized: tuple[str, tuple[str, ...], tuple[tuple[int, int], ...]] | None = None

    def add(self, text: str, start: int, end: int, label: str | None, line: int, sentence_id: str | None) -> None:
        """One aspect: ``text[start:end]`` is the term (already checked by the reader), ``label`` a polarity
        (None when unknown, for prediction inputs)."""
        term = text[start:end]
        trimmed_start = start + len(term) - len(term.lstrip())
        trimmed_end = end - len(term) + len(term.rstrip())
        if self._tokenized is None or self._tokenized[0] != text:
            words, offsets = tokenize(text)
            self._tokenized = (text, tuple(words), tuple(offsets))
        _, words, offsets = self._tokenized
        span = token_span(list(offsets), trimmed_start, trimmed_end) if trimmed_end > trimmed_start else None
        if span is None:
            raise DataFormatError(self.source, line, f"{_sentence(sentence_id)}the aspect term {term!r} at "
                                  f"characters {start}-{end} covers no token of the text")
        first, last, exact = span
        if not exact:
            self._widened(line, sentence_id, term, words[first:last])
        if label == "conflict" and not self.keep_conflict:
            self.stats["conflict_dropped"] += 1
            return
        self.examples.append(Example(
            words=words, label=label, aspect=(first, last), text=text, offsets=offsets, source=self.source,
            line=line, sentence_id=sentence_id, meta={"term": term, "char_span": (start, end)},
        ))
        self.stats["aspects"] += 1

    def _widened(self, line: int | str, sentence_id: str | None, term: str, tokens: tuple[str, ...]) -> None:
        """A term whose first or last character lies inside a token: the span takes the whole token (the SemEval
        texts have a few, e.g. ``securitysoftware`` inside ``freesecuritysoftware``: refusing them would refuse
        the benchmark). Counted; the first :data:`WIDENED_SHOWN` of an input are each a WARNING naming the file,
        line and sentence."""
        self.stats["inside_token"] += 1
        if self.stats["inside_token"] <= WIDENED_SHOWN:
            logger.warning("%s:%s: %saspect term %r begins or ends inside a token: its span is widened to the "
                           "token(s) %s (fix the text's spacing or the term's offsets if that is wrong)", self.source,
                           line, _sentence(sentence_id), term, list(tokens))

    def finish(self, logger: logging.Logger) -> tuple[list[Example], dict[str, int]]:
        """Logs one INFO line (counts, per-class counts, everything dropped) and returns (examples, stats)."""
        s = self.stats
        classes = dict(sorted(Counter(ex.label for ex in self.examples).items()))
        logger.info("%s: %d aspects from %d sentences %s; conflict dropped: %d; sentences without aspects: %d; "
                    "term boundary inside a token: %d (span widened to the whole token)", self.source, s["aspects"], s["sentences"], classes,
                    s["conflict_dropped"], s["sentences_without_aspects"], s["inside_token"])
        return self.examples, dict(s)
