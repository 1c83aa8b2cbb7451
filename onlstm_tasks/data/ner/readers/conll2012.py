"""Raw CoNLL-2012 ``*_conll`` files (the LDC OntoNotes 5.0 release after the CoNLL scripts) -> Examples.

Columns (whitespace-separated): document id, part, word number, word, POS, parse bit, predicate lemma,
frameset, word sense, speaker, named entities, one column per predicate (SRL), coreference (last).
Sentences are separated by blank lines and wrapped in ``#begin document (ID); part N`` / ``#end document``.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from pathlib import Path

from onlstm_tasks.data.core.examples import Example
from onlstm_tasks.data.core.reading import Row, Stats, log_read, read_lines, split_fields
from onlstm_tasks.data.ner.readers.ontonotes import is_excluded_document
from onlstm_tasks.errors import DataFormatError

logger = logging.getLogger(__name__)

MIN_COLUMNS = 11  # through the named-entity column; real files also have SRL and coreference columns
NE_COLUMN = 10
_BEGIN = re.compile(r"#begin document \((?P<id>[^)]*)\);\s*part\s+(?P<part>\d+)\s*$")
_PARSE_BIT = re.compile(r"(?P<left>(?:\([^()*\s]+)*)\*(?P<right>\)*)")
_BRACKETS = {"(": "-LRB-", ")": "-RRB-"}
_NE_EXPECTED = "expected a named-entity cell '*', '*)', '(TYPE*', '(TYPE*)' or '(TYPE)'"
_SKIPPED = {
    "excluded_documents": "pt/ documents excluded (no NER)",
    "excluded_sentences": "sentences in them",
    "comment_lines": "other '#' lines ignored",
    "word_number_gaps": "sentences with non-consecutive word numbers (kept)",
}
_SKIPPED_IN_DIRECTORY = {**_SKIPPED, "skipped_auto_files": "*auto_conll files skipped (a gold_conll twin exists)"}


def conll2012_files(directory: str | Path) -> tuple[list[Path], int]:
    """Every ``*_conll`` file under ``directory`` (recursive, sorted), minus ``auto_conll`` files with a
    ``gold_conll`` twin (the LDC release ships both; reading both would double the data). Returns the
    files and the number of skipped twins."""
    found = sorted(p for p in Path(directory).rglob("*_conll") if p.is_file())
    keep = [p for p in found
            if not ("auto_conll" in p.name and p.with_name(p.name.replace("auto_conll", "gold_conll")).exists())]
    return keep, len(found) - len(keep)


def read_conll2012(
    path: str | Path, source: str | None = None, include_pt: bool = False
) -> tuple[list[Example], Stats]:
    """Read a ``*_conll`` file, or every one under a directory, to IOB2 Examples with POS and parse trees.

    ``source`` names a single file in errors/Examples (default: its path); ``pt/`` documents are
    excluded unless ``include_pt`` (counted in the stats and logged).
    """
    path = Path(path)
    if not path.is_dir():
        return _read_file(path, source or str(path), include_pt)
    files, twins = conll2012_files(path)
    if not files:
        raise DataFormatError(str(path), None, "expected *_conll files under this directory, found none")
    examples: list[Example] = []
    total: Counter = Counter({"skipped_auto_files": twins})
    for file in files:
        file_examples, stats = _read_file(file, str(file), include_pt, log=False)
        examples.extend(file_examples)
        total.update(stats)
    log_read(logger, f"{path} ({len(files)} files)", total, _SKIPPED_IN_DIRECTORY)
    return examples, dict(total)


def _read_file(path: Path, source: str, include_pt: bool, log: bool = True) -> tuple[list[Example], Stats]:
    lines = read_lines(path, "CoNLL-2012 '#begin document' blocks")
    stats = dict.fromkeys(("files", "documents", "sentences", *_SKIPPED), 0)
    stats["files"] = 1
    examples: list[Example] = []
    doc: dict | None = None  # the open document: header id, begin line, sentence counter, excluded flag
    rows: list[Row] = []

    def flush() -> None:
        if not rows:
            return
        example = _sentence(rows, source, doc["index"], stats)
        doc["index"] += 1
        rows.clear()
        if not include_pt and (is_excluded_document(doc["id"]) or is_excluded_document(example.meta["document_id"])):
            doc["excluded"] = True
            stats["excluded_sentences"] += 1
        else:
            examples.append(example)
            stats["sentences"] += 1

    for number, line in enumerate(lines, start=1):
        text = line.strip(" \t")
        if text.startswith("#begin document"):
            if doc is not None:
                raise DataFormatError(source, number, f"expected '#end document' before a new document "
                                      f"(document opened on line {doc['line']})")
            match = _BEGIN.match(text)
            if not match:
                raise DataFormatError(source, number, "expected '#begin document (ID); part N'")
            doc = {"id": match["id"], "line": number, "index": 0, "excluded": False}
        elif text.startswith("#end document"):
            if doc is None:
                raise DataFormatError(source, number, "'#end document' without an open '#begin document'")
            flush()
            stats["excluded_documents" if doc["excluded"] else "documents"] += 1
            doc = None
        elif text.startswith("#"):
            stats["comment_lines"] += 1
        elif not text:
            if doc is not None:
                flush()
        else:
            if doc is None:
                raise DataFormatError(source, number, "expected '#begin document (ID); part N' before token rows")
            rows.append((number, line))
    if doc is not None:
        raise DataFormatError(source, doc["line"], "document is never closed: expected '#end document' "
                              "before the end of the file")
    if log:
        log_read(logger, source, stats, _SKIPPED)
    return examples, stats


def _sentence(rows: list[Row], source: str, index: int, stats: Stats) -> Example:
    """One sentence's rows -> Example (IOB2 from the NE brackets, tree rebuilt from the parse bits)."""
    first_line, first = rows[0]
    first_cols = split_fields(first)
    n_columns = len(first_cols)
    words: list[str] = []
    pos: list[str] = []
    tags: list[str] = []
    pieces: list[str] = []
    word_numbers: list[int] = []
    entity: tuple[str, int] | None = None  # open entity type and its line
    depth = 0
    has_xx = False
    for number, line in rows:
        cols = split_fields(line)
        if len(cols) < MIN_COLUMNS:
            raise DataFormatError(source, number, f"expected at least {MIN_COLUMNS} columns (document id, part, "
                                  f"word number, word, POS, parse bit, lemma, frameset, sense, speaker, named "
                                  f"entities, ...), found {len(cols)}")
        if len(cols) != n_columns:
            raise DataFormatError(source, number, f"expected {n_columns} columns like line {first_line} of the "
                                  f"same sentence, found {len(cols)}")
        if not all(c.isascii() and c.isdigit() for c in cols[1:3]):
            raise DataFormatError(source, number, f"expected integer part and word number, "
                                  f"found {cols[1]!r} {cols[2]!r}")
        word, tag = cols[3], cols[4]
        word_numbers.append(int(cols[2]))
        # parse bit: "(S(NP*" -> "(S(NP (DT the) ", "*))" -> " (NN dog) ))"
        match = _PARSE_BIT.fullmatch(cols[5])
        if not match:
            raise DataFormatError(source, number, f"expected a parse bit like '(S(NP*' or '*))', found {cols[5]!r}")
        depth += match["left"].count("(") - len(match["right"])
        if depth < 0:
            raise DataFormatError(source, number, "unbalanced parse brackets: ')' closes more constituents "
                                  "than are open")
        has_xx |= word == "XX" or tag == "XX"
        pieces.append(f"{match['left']} ({_BRACKETS.get(tag, tag)} {_BRACKETS.get(word, word)}) {match['right']}")
        ne_tag, entity = _ne_step(cols[NE_COLUMN], entity, source, number)
        words.append(word)
        pos.append(tag)
        tags.append(ne_tag)
    last_line = rows[-1][0]
    if depth != 0:
        raise DataFormatError(source, last_line, f"unbalanced parse brackets: {depth} constituent(s) of the sentence "
                              f"starting on line {first_line} are not closed")
    if entity is not None:
        raise DataFormatError(source, last_line, f"unbalanced named-entity brackets: ({entity[0]} opened on line "
                              f"{entity[1]} is not closed by the end of the sentence")
    if word_numbers != list(range(len(rows))):
        stats["word_number_gaps"] += 1
    document_id, part = first_cols[0], int(first_cols[1])
    speaker = first_cols[9]
    return Example(
        words=tuple(words), tags=tuple(tags), pos=tuple(pos),
        parse_tree=None if has_xx else "".join(pieces),  # "XX" marks a token without parse information
        source=source, line=first_line, sentence_id=f"{document_id}/{part}/{index}",
        token_lines=tuple(number for number, _ in rows),
        meta={"document_id": document_id, "part_id": part, "speaker": None if speaker == "-" else speaker},
    )


def _ne_step(cell: str, entity: tuple[str, int] | None, source: str, line: int) -> tuple[str, tuple[str, int] | None]:
    """One named-entity cell -> (IOB2 tag, entity still open after this token)."""
    if cell in ("*", "*)"):
        if entity is None:
            if cell == "*)":
                raise DataFormatError(source, line, "unbalanced named-entity brackets: '*)' closes no open entity")
            return "O", None
        return f"I-{entity[0]}", None if cell == "*)" else entity
    if not cell.startswith("("):
        raise DataFormatError(source, line, f"{_NE_EXPECTED}, found {cell!r}")
    if entity is not None:
        raise DataFormatError(source, line, f"unbalanced named-entity brackets: {cell!r} opens an entity while "
                              f"({entity[0]} from line {entity[1]} is still open")
    body = cell[1:]
    for end, closes in (("*)", True), (")", True), ("*", False)):
        if body.endswith(end):
            typ = body[: -len(end)]
            if typ and not any(c in typ for c in "()*"):
                return f"B-{typ}", None if closes else (typ, line)
            break
    raise DataFormatError(source, line, f"{_NE_EXPECTED}, found {cell!r}")
