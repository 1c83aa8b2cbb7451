"""The package's import graph keeps the layer order of DESIGN.md (import-linter contracts in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from helpers.paths import REPO



def test_import_contracts_hold():
    lint = shutil.which("lint-imports")
    if lint is None:
        pytest.fail("lint-imports not found: install the dev extras (pip install -e '.[dev]')")
    proc = subprocess.run([lint, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout
