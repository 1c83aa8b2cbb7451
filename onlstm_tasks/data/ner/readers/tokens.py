"""Any ``datasets.Dataset`` with a tokens column and a tags column (CoNLL-2003 on the hub, WNUT, ...)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from onlstm_tasks.data.core.examples import Example
from onlstm_tasks.data.core.reading import Stats, class_label_names, inner_feature, log_read
from onlstm_tasks.data.core.tags import normalise_tags
from onlstm_tasks.errors import DataFormatError

logger = logging.getLogger(__name__)


def _names(values: Sequence, names: Sequence[str] | None, source: str, row: int, column: str) -> list[str]:
    if all(isinstance(v, str) for v in values):
        return list(values)
    if names is None:
        raise DataFormatError(source, row, f"{column} holds integer ids but the dataset has no ClassLabel "
                              "feature for it: pass label_names=[...] (id -> tag name)")
    try:
        return [names[v] for v in values]
    except (IndexError, TypeError):
        raise DataFormatError(source, row, f"{column}: expected label ids in [0, {len(names)}), "
                              f"found {list(values)}") from None


def read_token_rows(
    dataset: Any,
    source: str | None = None,
    tokens_column: str = "tokens",
    tags_column: str = "ner_tags",
    label_names: Sequence[str] | None = None,
    scheme: str = "iob2",
    pos_column: str | None = None,
    id_column: str | None = "id",
) -> tuple[list[Example], Stats]:
    """One split of token/tag rows -> IOB2 Examples (``line`` = 0-based row index).

    Tags may be strings or ids; ids are named by the column's ClassLabel feature, else by ``label_names``.
    ``scheme`` is the input scheme (iob1 | iob2 | iobes); orphan ``I-X`` in IOB2 are repaired and counted.
    ``sentence_id`` comes from ``id_column`` when the dataset has it. Rows without tokens are kept as empty
    Examples (counted): the data module skips or refuses them (its ``empty_sentences``).
    """
    source = source or "dataset"
    for column in (tokens_column, tags_column, pos_column):
        if column is not None and column not in dataset.column_names:
            raise DataFormatError(source, None, f"expected a column {column!r}; the dataset has {dataset.column_names}")
    tag_names = list(label_names) if label_names is not None else class_label_names(dataset.features[tags_column])
    dtype = getattr(inner_feature(dataset.features[tags_column]), "dtype", "")
    if tag_names is None and dtype.startswith(("int", "uint")):
        raise DataFormatError(source, None, f"{tags_column} holds integer ids ({dtype}) but the dataset has no "
                              "ClassLabel feature for it: pass label_names=[...] (id -> tag name)")
    pos_names = class_label_names(dataset.features[pos_column]) if pos_column else None
    has_id = id_column is not None and id_column in dataset.column_names
    stats = {"sentences": 0, "tokens": 0, "repaired_tags": 0, "empty_rows": 0}
    examples: list[Example] = []
    for row_index, row in enumerate(dataset):
        words = row[tokens_column]
        stats["empty_rows"] += not words  # kept: the data module skips or refuses them (empty_sentences)
        raw = _names(row[tags_column], tag_names, source, row_index, tags_column)
        if len(raw) != len(words):
            raise DataFormatError(source, row_index, f"expected one tag per token, found {len(raw)} tags for "
                                  f"{len(words)} tokens")
        tags, repaired = normalise_tags(raw, scheme, source, row_index)
        stats["repaired_tags"] += repaired
        pos = _names(row[pos_column], pos_names, source, row_index, pos_column) if pos_column else None
        try:
            examples.append(Example(
                words=tuple(words), tags=tuple(tags), pos=None if pos is None else tuple(pos),
                source=source, line=row_index, sentence_id=str(row[id_column]) if has_id else None,
            ))
        except ValueError as err:
            raise DataFormatError(source, row_index, f"expected one POS tag per token: {err}") from None
        stats["sentences"] += 1
        stats["tokens"] += len(words)
    log_read(logger, source, stats, {"empty_rows": "rows without tokens",
                                      "repaired_tags": "orphan I- tags repaired to B-"})
    return examples, stats
