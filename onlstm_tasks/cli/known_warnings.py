"""Silences the messages of Lightning and PyTorch that a user of ``onlstm-tasks`` cannot act on.

Each filter names one message and why it says nothing to our users; every other warning still shows. The CLI
calls :func:`quiet_known_warnings` once at start (in every DDP process, since each runs the console script).
"""

from __future__ import annotations

import logging
import warnings

# (message regex, why it is noise here)
WARNINGS = (
    (r"`isinstance\(treespec, LeafSpec\)` is deprecated",
     "Lightning's own pytree helper on a newer torch; nothing in a config changes it"),
    (r"You are using a custom batch sampler `BucketBatchSampler` for prediction",
     "our sampler never drops a batch (every input is predicted: tests/tasks/test_predict_outputs.py)"),
)
# INFO lines of Lightning's rank-zero logger that advertise, rather than inform
INFO_LINES = ("💡 Tip: For seamless cloud logging",)
RANK_ZERO_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")


class _DropAdvice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(INFO_LINES)


def quiet_known_warnings() -> None:
    """Installs the filters of :data:`WARNINGS` and :data:`INFO_LINES` (idempotent)."""
    for pattern, _why in WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)
    for name in RANK_ZERO_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropAdvice) for f in logger.filters):
            logger.addFilter(_DropAdvice())
