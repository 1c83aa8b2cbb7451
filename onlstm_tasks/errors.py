"""Error types shared across the package's layers (the ground layer: it imports nothing of the package).

:class:`DataFormatError` is raised by the data readers (``onlstm_tasks.data``) and by the tree readers
(``onlstm_tasks.trees``: PTB brackets, parser JSON) alike, so it lives here, below both; the old path
``onlstm_tasks.data.core.examples.DataFormatError`` re-exports it.
"""

from __future__ import annotations

__all__ = ["CheckpointError", "ConfigError", "DataFormatError", "HubUnreachableError"]


class DataFormatError(ValueError):
    """Malformed input. The message always names the file (or dataset) and the line (or sentence id)."""

    def __init__(self, source: str, line: int | str | None, expected: str) -> None:
        where = f"{source}:{line}" if line not in (None, "") else str(source)
        super().__init__(f"{where}: {expected}")
        self.source = source
        self.line = line


class ConfigError(ValueError):
    """A configuration the project cannot run: an unknown key, a value its class refuses, a checkpoint of another
    task. The message says where (the config key) and what to do."""


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used: not a checkpoint at all (empty, truncated, random bytes), one without
    a model's weights, or one whose weights are not finite. The message names the file."""


class HubUnreachableError(ConnectionError):
    """A hub dataset asked for while the Hugging Face hub cannot be reached (no network, or offline mode without
    a cached copy). The message names the dataset and the option that reads a local copy instead."""


USER_ERRORS: tuple[type[BaseException], ...] = (DataFormatError, ConfigError, CheckpointError, HubUnreachableError)


def find_user_error(error: BaseException) -> BaseException | None:
    """The project's own user error (:data:`USER_ERRORS`) behind ``error``: itself, or one in its chain of causes
    (Lightning and jsonargparse may wrap what a reader or a model constructor raised); None for anything else."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, USER_ERRORS):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def debug_requested(argv: list[str]) -> tuple[bool, list[str]]:
    """Whether ``--debug`` is in ``argv`` (or ``ONLSTM_TASKS_DEBUG=1`` is set), and ``argv`` without it."""
    import os

    rest = [arg for arg in argv if arg != "--debug"]
    return len(rest) != len(argv) or os.environ.get("ONLSTM_TASKS_DEBUG", "") not in ("", "0"), rest


def report_user_error(error: BaseException) -> None:
    """Prints ``error: <message>`` (the file, line, what and what to do) on stderr and exits with code 2."""
    import sys

    sys.stderr.write(f"error: {error}\n(run with --debug or ONLSTM_TASKS_DEBUG=1 for the traceback)\n")
    raise SystemExit(2)
