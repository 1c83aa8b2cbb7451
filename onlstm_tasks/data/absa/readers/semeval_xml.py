"""The organisers' SemEval-2014 Task 4 XML (``Laptop_Train_v2.xml``, ``Laptops_Test_Gold.xml``, restaurants).

``<sentence id=..><text>..</text><aspectTerms><aspectTerm term= polarity= from= to=/>..</aspectTerms></sentence>``
with ``from``/``to`` character offsets into the text. Parsed with expat so errors carry line numbers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from xml.parsers import expat

from onlstm_tasks.data.absa.readers.aspects import AspectCollector, polarity
from onlstm_tasks.data.core.examples import Example
from onlstm_tasks.errors import DataFormatError

logger = logging.getLogger(__name__)


@dataclass
class _Sentence:
    id: str
    line: int
    text: list[str] | None = None  # character data chunks of <text>
    terms: list[tuple[int, dict[str, str]]] = field(default_factory=list)  # (line, attributes)


def _parse(path: Path, source: str) -> tuple[list[_Sentence], int]:
    """The sentences of the file and the number of SemEval-2015/16 ``<Opinion>`` elements seen."""
    parser = expat.ParserCreate()
    sentences: list[_Sentence] = []
    state = {"current": None, "in_text": False, "opinions": 0}

    def start(name: str, attrs: dict[str, str]) -> None:
        line, current = parser.CurrentLineNumber, state["current"]
        if name == "sentence":
            state["current"] = _Sentence(attrs.get("id") or f"at line {line}", line)
        elif name == "text" and current is not None:
            current.text, state["in_text"] = current.text or [], True
        elif name == "aspectTerm" and current is not None:
            current.terms.append((line, attrs))
        elif name == "Opinion":
            state["opinions"] += 1

    def end(name: str) -> None:
        if name == "text":
            state["in_text"] = False
        elif name == "sentence" and state["current"] is not None:
            sentences.append(state["current"])
            state["current"] = None

    def characters(data: str) -> None:
        if state["in_text"]:
            state["current"].text.append(data)

    parser.StartElementHandler, parser.EndElementHandler = start, end
    parser.CharacterDataHandler = characters
    try:
        parser.Parse(path.read_bytes(), True)
    except expat.ExpatError as err:
        raise DataFormatError(source, err.lineno, f"expected well-formed XML, found: "
                              f"{expat.ErrorString(err.code)} (column {err.offset + 1})") from None
    return sentences, state["opinions"]


def _offset(attrs: dict[str, str], key: str, source: str, line: int, sentence: str) -> int:
    value = attrs.get(key)
    if value is None or not value.strip().isdigit():
        raise DataFormatError(source, line, f"sentence {sentence}: expected a character offset {key}=\"N\" on "
                              f"<aspectTerm>, found {value!r}")
    return int(value)


def read_semeval_xml(
    path: str | Path, source: str | None = None, keep_conflict: bool = False
) -> tuple[list[Example], dict[str, int]]:
    """One XML file -> one Example per ``<aspectTerm>`` (``line`` = the aspectTerm's line,
    ``sentence_id`` = the sentence's ``id``). Sentences without aspect terms give none (counted).

    Every term is checked: ``text[from:to]`` must equal ``term``; unknown polarities, missing or empty
    ``<text>`` and bad offsets are DataFormatErrors naming the file, line and sentence id.
    """
    path = Path(path)
    source = source or str(path)
    sentences, opinions = _parse(path, source)
    collector = AspectCollector(source, keep_conflict)
    for sentence in sentences:
        sid = sentence.id
        text = "".join(sentence.text) if sentence.text is not None else None
        if not text or not text.strip():
            raise DataFormatError(source, sentence.line, f"sentence {sid}: expected a non-empty <text> element, "
                                  f"found {'none' if text is None else repr(text)}")
        collector.stats["sentences"] += 1
        if not sentence.terms:
            collector.stats["sentences_without_aspects"] += 1
        for line, attrs in sentence.terms:
            term = attrs.get("term")
            if not term or not term.strip():
                raise DataFormatError(source, line, f"sentence {sid}: expected a non-empty term=\"...\" on "
                                      f"<aspectTerm>, found {term!r}")
            label = polarity(attrs.get("polarity"), source, line, sid)
            start, end = _offset(attrs, "from", source, line, sid), _offset(attrs, "to", source, line, sid)
            if not 0 <= start < end <= len(text) or text[start:end] != term:
                found = repr(text[start:end]) if 0 <= start < end <= len(text) else "nothing (out of range)"
                raise DataFormatError(source, line, f"sentence {sid}: offsets from={start} to={end} give {found} "
                                      f"but the term is {term!r}")
            collector.add(text, start, end, label, line, sid)
    if not collector.stats["sentences"] or (sentences and all(not s.terms for s in sentences)):
        hint = (f" ({opinions} SemEval-2015/16 <Opinion> elements found: that format is not read here)"
                if opinions else "")
        raise DataFormatError(source, None, f"expected <sentence> elements with <aspectTerm>s, found "
                              f"{len(sentences)} sentence(s) and no aspect term{hint}")
    return collector.finish(logger)
