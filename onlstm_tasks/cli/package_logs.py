"""Where the package's own log lines go when it runs as a program (``onlstm-tasks``): its INFO lines (counts of what
the readers skipped or repaired, vocabulary sizes, vector coverage) on stderr, as Lightning shows its own.

While the command line is checked and the data read (:func:`show_package_logs` with ``hold=True``), those lines
are held back: a mistake then ends in its one error line alone (:func:`drop_held_logs`), and a run whose inputs
passed shows them all (:func:`release_held_logs`). A library import configures nothing by itself.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys

LOGGER = "onlstm_tasks"


class _StderrHandler(logging.StreamHandler):
    """A stream handler that writes to whatever ``sys.stderr`` is at the time of the record (not the stream of
    the moment it was made), so a redirected or captured stderr never leaves it writing to a closed file."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler.__init__ assigns one; the property always reads sys.stderr
        pass


class HeldLines(logging.handlers.MemoryHandler):
    """Holds INFO records until :meth:`show_held` (then writes them, and every later record at once) or
    :meth:`forget_held` (then forgets them); a warning or an error is written at once, with what was held before it.
    (``release`` and ``acquire`` are the handler's lock.)"""

    def __init__(self, target: logging.Handler) -> None:
        super().__init__(capacity=1_000_000, flushLevel=logging.WARNING, target=target, flushOnClose=True)
        self.holding = True

    def shouldFlush(self, record: logging.LogRecord) -> bool:
        return not self.holding or super().shouldFlush(record)

    def show_held(self) -> None:
        self.holding = False
        self.flush()

    def forget_held(self) -> None:
        with self.lock:
            self.buffer.clear()
        self.show_held()


def show_package_logs(hold: bool = False) -> None:
    """Shows this package's INFO lines on stderr; ``hold``: only once :func:`release_held_logs` is called."""
    logger = logging.getLogger(LOGGER)
    if not logger.handlers:
        handler: logging.Handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(HeldLines(handler) if hold else handler)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)


def _held() -> list[HeldLines]:
    return [h for h in logging.getLogger(LOGGER).handlers if isinstance(h, HeldLines)]


def release_held_logs() -> None:
    """Writes the held lines, and every later one at once."""
    for handler in _held():
        handler.show_held()


def drop_held_logs() -> None:
    """Forgets the held lines (a mistake's error line stands alone); later ones are written at once."""
    for handler in _held():
        handler.forget_held()
