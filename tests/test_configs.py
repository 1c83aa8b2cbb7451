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
