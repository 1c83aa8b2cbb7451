"""Small self-written samples shipped inside the package (for the quickstart and the tests).

``sample_path("ner")`` is a folder with ``train.txt``, ``validation.txt`` and ``test.txt`` in a CoNLL-2003-like
two-column format (``token TAG``, IOB2, blank line between sentences), written by
``scripts/make_sample_data.py`` from invented names and templates.

``sample_path("absa")`` is a folder with ``Gadgets_Train.xml`` and ``Gadgets_Test.xml`` in the SemEval-2014 Task 4
XML format (aspect terms with positive/negative/neutral/conflict polarity and character offsets): invented gadget
and restaurant reviews written by ``scripts/make_absa_sample.py``. ``AspectSentimentDataModule(path=...)`` reads
it as it is (the file names give the splits; a validation split is carved from train).
"""

from __future__ import annotations

from pathlib import Path

_ROOT = Path(__file__).resolve().parent


def available() -> list[str]:
    """Names of the bundled samples."""
    return sorted(p.name for p in _ROOT.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def sample_path(name: str) -> Path:
    """The folder of the bundled sample ``name`` (``"ner"``, ``"absa"``); ``ValueError`` for an unknown name."""
    path = _ROOT / name
    if not name or name.startswith(("_", ".")) or not path.is_dir():
        raise ValueError(f"no bundled sample {name!r}; available: {', '.join(available())}")
    return path
