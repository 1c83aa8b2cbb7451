"""Writes ``predict`` results as JSON lines, in input order, with character spans where the input has them."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from lightning.pytorch.callbacks import BasePredictionWriter

from onlstm_tasks.callbacks.records import prediction_records

log = logging.getLogger(__name__)


class JsonlPredictionWriter(BasePredictionWriter):
    """One JSON object per input sentence (per line of the predict file: an empty line gives a record with
    ``"empty": true``).

    Each task's ``predict_step`` returns a list of dicts with an ``index`` (position of the example in the
    predict split), turned into records by :func:`~onlstm_tasks.callbacks.records.prediction_records` (as the
    Python API does). Under DDP each process writes ``<stem>.rank<N>.jsonl``.

    ``output`` defaults to ``predictions.jsonl`` in the trainer's ``default_root_dir`` (the run's folder, e.g.
    ``runs/quickstart/``), so ``--trainer.default_root_dir`` moves the predictions along with everything else.
    """

    def __init__(self, output: str | None = None) -> None:
        super().__init__(write_interval="epoch")
        self.output = output

    def write_on_epoch_end(self, trainer, pl_module, predictions, batch_indices) -> None:
        records = prediction_records(predictions, trainer.datamodule.examples("predict"),
                                     getattr(pl_module, "empty_record", None))
        path = Path(self.output) if self.output else Path(trainer.default_root_dir) / "predictions.jsonl"
        if trainer.world_size > 1:
            path = path.with_name(f"{path.stem}.rank{trainer.global_rank}{path.suffix}")
            if trainer.global_rank:  # the records of empty lines are rank 0's
                records = [r for r in records if not r.get("empty")]
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as f:
            for record in records:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        log.info("wrote %d predictions to %s", len(records), path)
