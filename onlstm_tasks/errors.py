"""Error types shared across the package's layers (the ground layer: it imports nothing of the package).

:class:`DataFormatError` is raised by the data readers (``onlstm_tasks.data``) and by the tree readers
(``onlstm_tasks.trees``: PTB brackets, parser JSON) alike, so it lives here, below both; the old path
``onlstm_tasks.data.examples.DataFormatError`` re-exports it.
"""

from __future__ import annotations

__all__ = ["ConfigError", "DataFormatError"]


class DataFormatError(ValueError):
    """Malformed input. The message always names the file (or dataset) and the line (or sentence id)."""

    def __init__(self, source: str, line: int | str | None, expected: str) -> None:
        where = f"{source}:{line}" if line not in (None, "") else str(source)
        super().__init__(f"{where}: {expected}")
        self.source = source
        self.line = line


class ConfigError(ValueError):
    """A configuration (or command line) that cannot work; the message says what was looked at and what to do."""
