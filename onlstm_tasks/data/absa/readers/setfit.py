"""Rows of the hub schema ``tomaarsen/setfit-absa-semeval-{restaurants,laptops}``: one row per aspect term.

Columns: ``text`` (the sentence), ``span`` (the term as it appears in the text), ``label``
(positive/negative/neutral/conflict, strings or ClassLabel ids), ``ordinal`` (which occurrence of ``span`` in
``text``, 0-based, counted as ``str.count`` does).
"""

from __future__ import annotations

import logging
from typing import Any

from onlstm_tasks.data.absa.readers.aspects import AspectCollector, nth_occurrence, polarity
from onlstm_tasks.data.core.examples import Example
from onlstm_tasks.errors import DataFormatError

logger = logging.getLogger(__name__)


def read_setfit_rows(
    dataset: Any,
    source: str | None = None,
    keep_conflict: bool = False,
    text_column: str = "text",
    span_column: str = "span",
    label_column: str = "label",
    ordinal_column: str = "ordinal",
) -> tuple[list[Example], dict[str, int]]:
    """One split of aspect rows -> one Example per aspect (``line`` = 0-based row index).

    Consecutive rows with the same text are one sentence: ``sentence_id`` is the row index of its first row
    (the schema has no sentence ids). The term is found at its ``ordinal``-th occurrence in the text.
    """
    source = source or "dataset"
    for column in (text_column, span_column, label_column, ordinal_column):
        if column not in dataset.column_names:
            raise DataFormatError(source, None, f"expected a column {column!r}; the dataset has "
                                  f"{dataset.column_names}")
    names = getattr(dataset.features[label_column], "names", None)
    collector = AspectCollector(source, keep_conflict)
    previous, sentence_id = None, None
    for row_index, row in enumerate(dataset):
        text, term, ordinal = row[text_column], row[span_column], row[ordinal_column]
        if not isinstance(text, str) or not text.strip():
            raise DataFormatError(source, row_index, f"expected the sentence in {text_column!r}, found {text!r}")
        if text != previous:
            previous, sentence_id = text, str(row_index)
            collector.stats["sentences"] += 1
        label = row[label_column]
        if names is not None and isinstance(label, int):
            label = names[label] if 0 <= label < len(names) else label
        label = polarity(label, source, row_index)
        if not isinstance(term, str) or not term.strip():
            raise DataFormatError(source, row_index, f"expected the aspect term in {span_column!r}, found {term!r}")
        if not isinstance(ordinal, int) or ordinal < 0:
            raise DataFormatError(source, row_index, f"expected a 0-based occurrence number in {ordinal_column!r}, "
                                  f"found {ordinal!r}")
        start = nth_occurrence(text, term, ordinal)
        if start is None:
            raise DataFormatError(source, row_index, f"expected occurrence {ordinal} (0-based) of the term {term!r} "
                                  f"in the text, but it occurs {text.count(term)} time(s): {text!r}")
        collector.add(text, start, start + len(term), label, row_index, sentence_id)
    return collector.finish(logger)
