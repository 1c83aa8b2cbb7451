"""Keeps a CSVLogger's ``metrics.csv`` across ``--ckpt_path last``.

Lightning's CSV writer deletes an existing ``metrics.csv`` when a run starts in a version folder that has one,
so a resumed run would lose the history of the run it continues. :func:`set_aside` moves the file away before
the logger starts; :func:`restore` (at checkpoint load) puts back its rows up to the checkpoint's step (rows
logged after that step are logged again by the resumed run) and lets the logger append from there.
"""

from __future__ import annotations

import csv
import logging
from pathlib import Path

from lightning.pytorch.loggers import CSVLogger

log = logging.getLogger(__name__)

SET_ASIDE = "metrics.before_resume.csv"


def set_aside(log_dir: str | Path) -> None:
    metrics = Path(log_dir) / "metrics.csv"
    if metrics.is_file():
        metrics.replace(metrics.with_name(SET_ASIDE))


def restore(loggers: list, global_step: int) -> None:
    for logger in loggers:
        if not isinstance(logger, CSVLogger):
            continue
        kept = Path(logger.log_dir) / SET_ASIDE
        if not kept.is_file():
            continue
        with kept.open(newline="") as f:
            reader = csv.DictReader(f)
            header = list(reader.fieldnames or [])
            rows = list(reader)
        kept_rows = [r for r in rows if not r.get("step") or int(float(r["step"])) <= global_step]
        writer = logger.experiment  # the writer appends to an existing file with these keys as its header
        writer.metrics_keys = sorted(set(writer.metrics_keys) | set(header))
        with open(writer.metrics_file_path, "w", newline="") as f:
            out = csv.DictWriter(f, fieldnames=writer.metrics_keys)
            out.writeheader()
            out.writerows(kept_rows)
        kept.unlink()
        log.info("%s: kept %d rows of the interrupted run (up to step %d), dropped %d logged after it",
                 writer.metrics_file_path, len(kept_rows), global_step, len(rows) - len(kept_rows))
