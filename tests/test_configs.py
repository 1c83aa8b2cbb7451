"""Every shipped config parses through the CLI, and encoder-swap pairs differ only in the encoder block."""

import sys
from pathlib import Path

import pytest
import yaml

from onlstm_tasks.cli import main

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").rglob("*.yaml"))


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_config_parses(config, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["onlstm-tasks"])
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(config), "--print_config"])
    assert exit_info.value.code in (0, None)
    assert "class_path" in capsys.readouterr().out


def test_ontonotes_pair_differs_only_in_the_encoder():
    configs_dir = Path(__file__).resolve().parents[1] / "configs"
    onlstm = yaml.safe_load((configs_dir / "ner/ontonotes_onlstm_crf.yaml").read_text())
    lstm = yaml.safe_load((configs_dir / "ner/ontonotes_lstm_crf.yaml").read_text())
    assert onlstm["model"]["init_args"].pop("encoder") != lstm["model"]["init_args"].pop("encoder")
    assert onlstm == lstm


def _load(name: str) -> dict:
    return yaml.safe_load((Path(__file__).resolve().parents[1] / "configs" / name).read_text())


@pytest.mark.parametrize("domain", ["restaurants", "laptops"])
@pytest.mark.parametrize("head", ["td", "attention"])
def test_absa_encoder_pairs_differ_only_in_the_encoder(domain, head):
    a, b = _load(f"absa/semeval14_{domain}_onlstm_{head}.yaml"), _load(f"absa/semeval14_{domain}_lstm_{head}.yaml")
    assert a["model"]["init_args"]["head"]["init_args"].pop("encoder") != \
        b["model"]["init_args"]["head"]["init_args"].pop("encoder")
    assert a == b


@pytest.mark.parametrize("domain", ["restaurants", "laptops"])
def test_absa_head_pairs_differ_only_in_the_head_class(domain):
    a, b = _load(f"absa/semeval14_{domain}_onlstm_td.yaml"), _load(f"absa/semeval14_{domain}_onlstm_attention.yaml")
    assert a["model"]["init_args"]["head"].pop("class_path") != b["model"]["init_args"]["head"].pop("class_path")
    assert a == b


def _without_tree_source(config: dict, *path: str) -> tuple[str, dict]:
    block = config["model"]["init_args"]
    for key in path:
        block = block[key]["init_args"]
    return block.pop("tree_source"), config


def test_dependency_guided_ner_configs_differ_only_in_the_tree_source():
    configs = {s: _load(f"ner/uner_onlstm_crf_dg_{s}.yaml") for s in ("none", "induced", "gold")}
    stripped = {s: _without_tree_source(c, "encoder") for s, c in configs.items()}
    assert {s: source for s, (source, _) in stripped.items()} == {"none": "none", "induced": "induced", "gold": "gold"}
    assert stripped["none"][1] == stripped["induced"][1] == stripped["gold"][1]


def test_tree_aware_absa_configs_differ_only_in_the_tree_source_and_gold_parses():
    configs = {s: _load(f"absa/semeval14_laptops_onlstm_tree_{s}.yaml") for s in ("none", "induced", "gold")}
    stripped = {s: _without_tree_source(c, "head") for s, c in configs.items()}
    assert {s: source for s, (source, _) in stripped.items()} == {"none": "none", "induced": "induced", "gold": "gold"}
    assert stripped["gold"][1]["data"]["init_args"].pop("parses")
    assert "parses" not in stripped["none"][1]["data"]["init_args"]
    assert stripped["none"][1] == stripped["induced"][1] == stripped["gold"][1]
