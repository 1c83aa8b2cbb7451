"""The repository's folders, for tests at any depth of ``tests/``."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
