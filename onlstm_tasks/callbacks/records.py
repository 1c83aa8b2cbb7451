"""Turning the rows of a task's ``predict_step`` into output records: the one code path behind
``onlstm-tasks predict`` (:class:`~onlstm_tasks.callbacks.jsonl_writer.JsonlPredictionWriter`) and the Python API
(:mod:`onlstm_tasks.api`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


def prediction_records(batches: Iterable[Sequence[dict]], examples: Sequence,
                       empty: Mapping | None = None) -> list[dict]:
    """One record per example, in input order: each row of ``batches`` (a row has the ``index`` of its example),
    and for an example without words (an empty input line, never batched) ``{"text": ..., **empty, "empty": true}``
    (``empty``: the task's fields of a record, empty: ``model.empty_record``)."""
    rows = {row["index"]: row for batch in batches for row in batch}
    records = []
    for index, example in enumerate(examples):
        if index in rows:
            records.append(prediction_record(rows[index], example))
        elif not len(example):
            records.append({"text": example.text, "tokens": [], **(empty or {}), "empty": True})
    return records


def prediction_record(row: dict, example) -> dict:
    """One record: the row without ``index``, the example's ``text`` first when it has one; entities given as
    ``(type, start, end)`` token spans are expanded with their tokens, and with the character span and the text when
    the example has offsets; an aspect's ``term`` and ``char_span`` (as the input gave them) are added when the
    example has them."""
    record = {k: v for k, v in row.items() if k not in ("index", "entities")}
    if example.text is not None:
        record = {"text": example.text, **record}
    for key in ("term", "char_span"):  # aspect sentiment: the aspect as the input gave it
        if key in example.meta:
            record[key] = list(example.meta[key]) if key == "char_span" else example.meta[key]
    if "entities" in row:
        entities = []
        for label, start, end in row["entities"]:
            entity = {"type": label, "start": start, "end": end, "tokens": list(example.words[start:end])}
            if example.offsets is not None and example.text is not None:
                char_start, char_end = example.offsets[start][0], example.offsets[end - 1][1]
                entity.update(char_start=char_start, char_end=char_end, text=example.text[char_start:char_end])
            entities.append(entity)
        record["entities"] = entities
    return record
