"""CoNLL-X / CoNLL-U files with an 11th NER column (the Dependency-Guided LSTM-CRF layout) -> Examples.

Columns: ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC NER, tab-separated; ``# sent_id = ...``
comments name the sentence. Multiword-token ranges (``1-2``) and empty nodes (``5.1``) are skipped.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from onlstm_tasks.data.core.examples import Example
from onlstm_tasks.data.core.reading import Stats, blocks, log_read, read_lines, split_fields
from onlstm_tasks.data.core.tags import normalise_tags
from onlstm_tasks.errors import DataFormatError

logger = logging.getLogger(__name__)

N_COLUMNS = 11
ID, FORM, UPOS, XPOS, HEAD, DEPREL = 0, 1, 3, 4, 6, 7
_SENT_ID = re.compile(r"#\s*sent_id\s*=\s*(.*\S)")
_TEXT = re.compile(r"#\s*text\s*=\s?(.*)")
_MULTIWORD = re.compile(r"\d+-\d+")
_EMPTY_NODE = re.compile(r"\d+\.\d+")


def read_conllx(
    path: str | Path, source: str | None = None, scheme: str = "iob2", pos: str = "upos"
) -> tuple[list[Example], Stats]:
    """Read one CoNLL-X/U+NER file: words, IOB2 tags (last column), ``pos`` ("upos" or "xpos"), heads, deprels.

    ``line`` is the sentence's first non-comment line; ``sentence_id`` comes from ``# sent_id``.
    Orphan ``I-X`` tags are repaired to ``B-X`` and counted (``scheme="iob1"`` converts IOB1 instead).
    """
    if pos not in ("upos", "xpos"):
        raise ValueError(f"pos must be 'upos' or 'xpos', not {pos!r}")
    source = source or str(path)
    lines = read_lines(path, "CoNLL-X/U sentences with an NER column")
    stats = {"sentences": 0, "tokens": 0, "multiword_tokens": 0, "empty_nodes": 0, "repaired_tags": 0,
             "comment_blocks": 0}
    examples = [_sentence(block, source, scheme, pos, stats) for block in blocks(lines)]
    examples = [e for e in examples if e is not None]
    if not examples:
        raise DataFormatError(source, 1, "expected at least one sentence, found only comments")
    stats["sentences"] = len(examples)
    log_read(logger, source, stats, {"multiword_tokens": "multiword-token lines skipped",
                                      "empty_nodes": "empty-node lines skipped",
                                      "repaired_tags": "orphan I- tags repaired to B-",
                                      "comment_blocks": "blocks of only comments ignored"})
    return examples, stats


def _fields(line: str) -> list[str]:
    cols = line.split("\t")
    return cols if len(cols) > 1 else split_fields(line)  # tolerate space-separated files


def _sentence(block: list[tuple[int, str]], source: str, scheme: str, pos: str, stats: Stats) -> Example | None:
    sentence_id = text = first_row = None  # first_row: the sentence's first non-comment line (may be a 1-2 range)
    rows: list[tuple[int, list[str]]] = []
    for number, line in block:
        if line.startswith("#"):
            if match := _SENT_ID.match(line):
                sentence_id = match[1]
            elif match := _TEXT.match(line):
                text = match[1]
            continue
        first_row = first_row or number
        cols = _fields(line)
        if len(cols) != N_COLUMNS:
            raise DataFormatError(source, number, f"expected {N_COLUMNS} tab-separated columns (ID FORM LEMMA UPOS "
                                  f"XPOS FEATS HEAD DEPREL DEPS MISC NER), found {len(cols)}")
        if _MULTIWORD.fullmatch(cols[ID]):
            stats["multiword_tokens"] += 1
            continue
        if _EMPTY_NODE.fullmatch(cols[ID]):
            stats["empty_nodes"] += 1
            continue
        if cols[ID] != str(len(rows) + 1):
            raise DataFormatError(source, number, f"expected token ID {len(rows) + 1}, found {cols[ID]!r}")
        rows.append((number, cols))
    if not rows:
        if any(not line.startswith("#") for _, line in block):
            raise DataFormatError(source, block[0][0], "expected word lines (integer IDs) in the sentence, "
                                  "found only multiword-token/empty-node lines")
        stats["comment_blocks"] += 1
        return None
    numbers = [number for number, _ in rows]
    heads = []
    for number, cols in rows:
        if not (cols[HEAD].isascii() and cols[HEAD].isdigit()):
            raise DataFormatError(source, number, f"expected an integer HEAD, found {cols[HEAD]!r}")
        if int(cols[HEAD]) > len(rows):
            raise DataFormatError(source, number, f"expected HEAD in 0..{len(rows)} (the sentence has {len(rows)} "
                                  f"tokens), found {cols[HEAD]}")
        heads.append(int(cols[HEAD]))
    tags, repaired = normalise_tags([cols[-1] for _, cols in rows], scheme, source, numbers)
    stats["repaired_tags"] += repaired
    stats["tokens"] += len(rows)
    return Example(
        words=tuple(cols[FORM] for _, cols in rows), tags=tuple(tags),
        pos=tuple(cols[UPOS if pos == "upos" else XPOS] for _, cols in rows),
        heads=tuple(heads), deprels=tuple(cols[DEPREL] for _, cols in rows),
        text=text, source=source, line=first_row, sentence_id=sentence_id, token_lines=tuple(numbers),
    )
