"""Small self-written samples shipped inside the package (for the quickstart and the tests).

``sample_path("ner")`` is a folder with ``train.txt``, ``validation.txt`` and ``test.txt`` in a CoNLL-2003-like
two-column format (``token TAG``, IOB2, blank line between sentences), written by
``scripts/make_sample_data.py`` from invented names and templates.
"""

from __future__ import annotations

from pathlib import Path

_ROOT = Path(__file__).resolve().parent


def available() -> list[str]:
    """Names of the bundled samples."""
    return sorted(p.name for p in _ROOT.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def sample_path(name: str) -> Path:
    """The folder of the bundled sample ``name`` (e.g. ``"ner"``); ``ValueError`` for an unknown name."""
    path = _ROOT / name
    if not name or name.startswith(("_", ".")) or not path.is_dir():
        raise ValueError(f"no bundled sample {name!r}; available: {', '.join(available())}")
    return path
