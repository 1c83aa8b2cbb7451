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


PACKAGE = REPO / "onlstm_tasks"


def _modules(folder):
    return sorted(path.name for path in folder.glob("*.py") if path.name not in ("__init__.py", "__main__.py"))


def test_the_package_root_and_data_top_hold_few_modules():
    """The house of issue 48: rooms, not loose modules (at most 4 at the package root, 10 at data/'s top)."""
    assert len(_modules(PACKAGE)) <= 4, _modules(PACKAGE)
    assert len(_modules(PACKAGE / "data")) <= 10, _modules(PACKAGE / "data")


def test_no_two_classes_share_a_name():
    import ast
    import collections

    where = collections.defaultdict(list)
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(str(path.relative_to(PACKAGE)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}


def test_modules_do_not_reach_into_the_onlstm():
    """The CRF loads its kernels from ``onlstm_tasks.native``, not through the ON-LSTM's folder."""
    for path in (PACKAGE / "modules").rglob("*.py"):
        text = path.read_text()
        assert "import" not in text or "encoders.onlstm" not in "\n".join(
            line for line in text.splitlines() if line.lstrip().startswith(("from ", "import "))), path


PUBLIC_NAMES = [
    "onlstm_tasks.encoders.ONLSTM", "onlstm_tasks.encoders.onlstm.ONLSTM", "onlstm_tasks.encoders.LSTM",
    "onlstm_tasks.encoders.GRU", "onlstm_tasks.encoders.DependencyGuidedEncoder", "onlstm_tasks.modules.CRF",
    "onlstm_tasks.modules.crf.CRF", "onlstm_tasks.data.ner.NERDataModule",
    "onlstm_tasks.data.absa.AspectSentimentDataModule", "onlstm_tasks.data.lm.LanguageModelDataModule",
    "onlstm_tasks.tasks.ner.NERTagger", "onlstm_tasks.tasks.absa.AspectSentimentClassifier",
    "onlstm_tasks.tasks.language_model.LanguageModel", "onlstm_tasks.api.load", "onlstm_tasks.api.Tagger",
    "onlstm_tasks.api.AspectClassifier", "onlstm_tasks.metrics.EntityF1", "onlstm_tasks.cli.main",
]


def _class_paths(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "class_path" and isinstance(value, str):
                yield value
            yield from _class_paths(value)
    elif isinstance(node, list):
        for item in node:
            yield from _class_paths(item)


def test_public_names_and_every_class_path_of_the_shipped_configs_import():
    """Names users import and every ``class_path`` a shipped config names (configs/, benchmarks/configs/, the
    test fixtures' configs) resolve after the re-layering; ``onlstm_tasks.load`` too."""
    import importlib

    import yaml

    import onlstm_tasks

    names = set(PUBLIC_NAMES)
    for folder in ("configs", "benchmarks/configs", "tests/fixtures"):
        for path in (REPO / folder).rglob("*.yaml"):
            names |= {name for name in _class_paths(yaml.safe_load(path.read_text())) if name.startswith("onlstm_tasks.")}
    for name in sorted(names):
        module, _, attr = name.rpartition(".")
        assert hasattr(importlib.import_module(module), attr), name
    assert callable(onlstm_tasks.load)
