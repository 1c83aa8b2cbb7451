"""Writes ``predict`` results as JSON lines, in input order, with character spans where the input has them."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from lightning.pytorch.callbacks import BasePredictionWriter

log = logging.getLogger(__name__)


class JsonlPredictionWriter(BasePredictionWriter):
    """One JSON object per input sentence.

    Each task's ``predict_step`` returns a list of dicts with an ``index`` (position of the example in the
    predict split); entities given as ``(type, start, end)`` token spans are expanded with the character span
    and the text when the example has offsets, and an aspect's ``term`` and ``char_span`` (as the input gave them)
    are added when the example has them. Under DDP each process writes ``<stem>.rank<N>.jsonl``.

    ``output`` defaults to ``predictions.jsonl`` in the trainer's ``default_root_dir`` (the run's folder, e.g.
    ``runs/quickstart/``), so ``--trainer.default_root_dir`` moves the predictions along with everything else.
    """

    def __init__(self, output: str | None = None) -> None:
        super().__init__(write_interval="epoch")
        self.output = output

    def write_on_epoch_end(self, trainer, pl_module, predictions, batch_indices) -> None:
        rows = sorted((row for batch in predictions for row in batch), key=lambda r: r["index"])
        examples = trainer.datamodule.examples("predict")
        path = Path(self.output) if self.output else Path(trainer.default_root_dir) / "predictions.jsonl"
        if trainer.world_size > 1:
            path = path.with_name(f"{path.stem}.rank{trainer.global_rank}{path.suffix}")
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(self._record(row, examples[row["index"]]), ensure_ascii=False) + "\n")
        log.info("wrote %d predictions to %s", len(rows), path)

    @staticmethod
    def _record(row: dict, example) -> dict:
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
