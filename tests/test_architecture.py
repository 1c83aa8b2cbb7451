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


def test_every_result_file_the_docs_and_configs_name_exists():
    """A results table named in a config's comment, README, benchmarks/README or the guide is in
    benchmarks/results/ (a config once cited lm_unlabelled_en.md, which never existed)."""
    import re

    from helpers.paths import REPO

    files = [*(REPO / "configs").rglob("*.yaml"), REPO / "README.md", REPO / "benchmarks" / "README.md",
             *(REPO / "docs").rglob("*.md")]
    missing = [(str(f.relative_to(REPO)), name) for f in files
               for name in re.findall(r"results/([\w.-]+\.(?:md|json))", f.read_text())
               if not (REPO / "benchmarks" / "results" / name).exists()]
    assert not missing, missing
