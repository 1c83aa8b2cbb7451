"""Where the shared data kit lives (``../shared/data`` from the repository root) and how tests require it.

Tests that read it use ``@requires_shared_data``: marked ``shared_data`` (CI runs them and fails if they
are skipped) and skipped with a clear reason on machines without the kit. Nothing from the kit is ever
copied into the repository.
"""

from __future__ import annotations


import pytest
from helpers.paths import REPO

REPO_ROOT = REPO
SHARED_DATA = REPO_ROOT / ".." / "shared" / "data"

_skip_without_kit = pytest.mark.skipif(
    not SHARED_DATA.is_dir(),
    reason=f"shared data kit not found at {SHARED_DATA} (only present on the project's CI/dev machines)",
)


def requires_shared_data(test):
    """Mark ``test`` as ``shared_data`` and skip it when the kit is absent."""
    return _skip_without_kit(pytest.mark.shared_data(test))
