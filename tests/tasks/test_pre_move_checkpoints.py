"""Checkpoints written before the re-layering of issue 17 (main at baa3c06) still load and predict the same.

The fixtures in ``tests/fixtures/pre_move_checkpoints`` were written by ``make_checkpoints.py`` there (tiny models on
the bundled samples) together with what ``onlstm-tasks predict`` printed for them at the time. Each test rebuilds the
same config with today's helpers, predicts with the old checkpoint and compares: tags, polarities, trees and heads
exactly, probabilities to 1e-5.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from helpers.paths import FIXTURES as FIXTURE_ROOT
from helpers.cli import tiny_absa_config, tiny_ner_config
from onlstm_tasks.cli import main
from onlstm_tasks.sample_data import sample_path
from onlstm_tasks.tasks.loading import load_task_model

FIXTURES = FIXTURE_ROOT / "pre_move_checkpoints"

DG_ENCODER = {"class_path": "onlstm_tasks.encoders.DependencyGuidedEncoder",
              "init_args": {"encoder": {"class_path": "onlstm_tasks.encoders.ONLSTM",
                                        "init_args": {"hidden_size": 16, "chunk_size": 4, "bidirectional": True}},
                            "interaction": {"class_path": "onlstm_tasks.interaction.MLPInteraction"},
                            "num_stages": 2, "tree_source": "induced"}}


def absa_tree_config(tmp_path: Path) -> Path:
    cfg = tiny_absa_config(tmp_path, {"path": str(sample_path("absa")), "data_dir": None, "revision": None})
    config = yaml.safe_load(cfg.read_text())
    config["model"]["init_args"]["head"] = {
        "class_path": "onlstm_tasks.modules.tree_aspect_head.TreeAwareAspectHead",
        "init_args": {"encoder": {"class_path": "onlstm_tasks.encoders.ONLSTM",
                                  "init_args": {"hidden_size": 16, "chunk_size": 4, "bidirectional": True}},
                      "interaction": {"class_path": "onlstm_tasks.interaction.GCNInteraction",
                                      "init_args": {"num_layers": 1}},
                      "tree_source": "induced"}}
    cfg.write_text(yaml.safe_dump(config))
    return cfg


CASES = {
    "ner_onlstm": (lambda tmp: tiny_ner_config(tmp), "sentences.txt", ["--data.init_args.pretokenized", "true"]),
    "ner_dg_induced": (lambda tmp: tiny_ner_config(tmp, encoder=DG_ENCODER), "sentences.txt",
                       ["--data.init_args.pretokenized", "true"]),
    "absa_tree_induced": (absa_tree_config, "aspects.jsonl", []),
}


def assert_same_records(new: dict, old: dict) -> None:
    assert new.keys() == old.keys()
    for key, value in old.items():
        if key == "probabilities":
            assert new[key].keys() == value.keys()
            for label, p in value.items():
                assert new[key][label] == pytest.approx(p, abs=1e-5)
        else:
            assert new[key] == value, key


@pytest.mark.parametrize("name", sorted(CASES))
def test_old_checkpoint_predicts_as_before(tmp_path, name):
    make_config, inputs, extra = CASES[name]
    config = make_config(tmp_path)
    checkpoint = tmp_path / f"{name}.ckpt"
    shutil.copy(FIXTURES / f"{name}.ckpt", checkpoint)  # a copy: the fixture is never written to
    main(["predict", "--config", str(config), "--ckpt_path", str(checkpoint), "--data.init_args.path", "null",
          "--data.init_args.predict_file", str(FIXTURES / inputs), *extra])
    new = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    old = [json.loads(line) for line in (FIXTURES / f"{name}.predictions.jsonl").read_text().splitlines()]
    assert len(new) == len(old) > 0
    for n, o in zip(new, old):
        assert_same_records(n, o)


@pytest.mark.parametrize("name", sorted(CASES))
def test_old_checkpoint_loads_from_python(name):
    model = load_task_model(FIXTURES / f"{name}.ckpt")
    assert not model.training
    assert sum(p.numel() for p in model.parameters()) > 0
