"""Rows of the hub dataset ``ontonotes/conll2012_ontonotesv5`` (one row = one document) -> sentences."""

from __future__ import annotations

import logging
from typing import Any

from onlstm_tasks.data.core.examples import Example
from onlstm_tasks.data.core.reading import Stats, class_label_names, inner_feature, log_read
from onlstm_tasks.data.core.tags import validate_iob2
from onlstm_tasks.errors import DataFormatError

logger = logging.getLogger(__name__)

EXCLUDED_GENRES = ("pt/",)  # the Bible (pivot text) genre has no named-entity annotation


def is_excluded_document(document_id: str) -> bool:
    """True for documents of a genre without NER labels (``pt/...``)."""
    return document_id.startswith(EXCLUDED_GENRES)


def _to_names(values: list, names: list[str] | None, source: str, where: str, column: str) -> list[str]:
    if names is None:
        return [str(v) for v in values]
    for position, v in enumerate(values, start=1):
        # -1 (ClassLabel's "no label") would silently index the last name
        if not isinstance(v, int) or not 0 <= v < len(names):
            raise DataFormatError(source, where, f"{column}: expected ClassLabel ids in [0, {len(names)}), found "
                                  f"{v!r} at token {position}")
    return [names[v] for v in values]


def bracket_problem(tree: str) -> str | None:
    """Why the brackets of a bracketed parse tree do not balance (characters counted from 1), or None when they do
    (words hold no brackets: the treebanks escape them as ``-LRB-``/``-RRB-``)."""
    depth = 0
    for position, char in enumerate(tree, start=1):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                return f"')' at character {position} closes no open '('"
    return f"{depth} '(' not closed at the end" if depth else None


def _check_parse_tree(tree: str | None, source: str, where: str) -> str | None:
    """``tree`` (a string or None: the sentence has no tree), or DataFormatError when its brackets do not balance."""
    if tree is None:
        return None
    if not isinstance(tree, str):
        raise DataFormatError(source, where, f"parse_tree: expected a bracketed string or null, found "
                              f"{type(tree).__name__}")
    problem = bracket_problem(tree)
    if problem:
        raise DataFormatError(source, where, f"parse_tree has unbalanced brackets: {problem}")
    return tree


def read_ontonotes_rows(
    dataset: Any, source: str | None = None, include_pt: bool = False
) -> tuple[list[Example], Stats]:
    """Flatten one split of document rows to sentence Examples (IOB2 tags, POS names, parse tree).

    ``line`` is the document's 0-based row index and ``sentence_id`` is ``"{document_id}/{part_id}/{i}"``
    (the hub repeats a document id for each of its parts). ``pt/`` documents are skipped unless
    ``include_pt``; the returned stats count them. Errors (ClassLabel ids out of range, invalid tags, words and
    tags of different lengths, a ``parse_tree`` whose brackets do not balance) are :class:`DataFormatError`
    naming the row and the sentence id.
    """
    source = source or "dataset"
    sentence_features = inner_feature(dataset.features["sentences"])
    ne_names = class_label_names(sentence_features["named_entities"])
    pos_names = class_label_names(sentence_features["pos_tags"])
    stats = {"documents": 0, "sentences": 0, "excluded_documents": 0, "excluded_sentences": 0, "repaired_tags": 0}
    examples: list[Example] = []
    for row_index, row in enumerate(dataset):
        document_id = row["document_id"]
        sentences = row["sentences"]
        if not include_pt and is_excluded_document(document_id):
            stats["excluded_documents"] += 1
            stats["excluded_sentences"] += len(sentences)
            continue
        stats["documents"] += 1
        for i, sent in enumerate(sentences):
            sentence_id = f"{document_id}/{sent.get('part_id', 0)}/{i}"
            where = f"{row_index} (sentence {sentence_id})"
            words = sent["words"]
            tags = _to_names(sent["named_entities"], ne_names, source, where, "named_entities")
            pos = _to_names(sent["pos_tags"], pos_names, source, where, "pos_tags")
            # one location per token, all this sentence's (a plain string would be indexed per token)
            tags, repaired = validate_iob2(tags, source, where)
            stats["repaired_tags"] += repaired
            tree = _check_parse_tree(sent.get("parse_tree"), source, where)
            try:
                example = Example(
                    words=tuple(words), tags=tuple(tags), pos=tuple(pos), parse_tree=tree,
                    source=source, line=row_index, sentence_id=sentence_id,
                    meta={"document_id": document_id, "part_id": sent.get("part_id"), "speaker": sent.get("speaker")},
                )
            except ValueError as err:
                raise DataFormatError(source, where, f"expected one tag and POS per word: {err}") from None
            examples.append(example)
            stats["sentences"] += 1
    log_read(logger, source, stats, {
        "excluded_documents": "pt/ documents excluded (no NER)", "excluded_sentences": "sentences in them",
        "repaired_tags": "orphan I- tags repaired to B-",
    })
    return examples, stats
