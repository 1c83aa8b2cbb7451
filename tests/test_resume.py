"""``fit --ckpt_path last`` after a SIGTERM mid-epoch continues exactly where the killed run stopped."""

from __future__ import annotations

import csv

import pytest
import torch
import yaml

from cli_helpers import run_cli, tiny_ner_config

STEPS_PER_EPOCH, EPOCHS, KILL_AT = 5, 2, 7  # killed in the second epoch, after its second batch


def _config(folder, kill: bool = False):
    path = tiny_ner_config(folder, max_epochs=EPOCHS, limit_train_batches=STEPS_PER_EPOCH, limit_val_batches=2)
    config = yaml.safe_load(path.read_text())
    if kill:
        config["trainer"]["callbacks"].append({"class_path": "kill_callback.TermAtStep", "init_args": {"step": KILL_AT}})
        path = folder / "kill.yaml"
        path.write_text(yaml.safe_dump(config))
    return path


def _last(folder) -> dict:
    return torch.load(folder / "ckpt" / "last.ckpt", weights_only=True)


@pytest.mark.slow
def test_sigterm_mid_epoch_then_ckpt_path_last_matches_an_uninterrupted_run(tmp_path):
    full, cut = tmp_path / "full", tmp_path / "cut"
    assert run_cli("fit", "--config", str(_config(full))).returncode == 0

    killed = run_cli("fit", "--config", str(_config(cut, kill=True)))
    assert _last(cut)["global_step"] == KILL_AT, killed.stderr[-3000:]  # last.ckpt written on SIGTERM, mid-epoch
    resumed = run_cli("fit", "--config", str(cut / "config.yaml"), "--ckpt_path", "last")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "not resumable" not in resumed.stderr  # Lightning's warning for a loader that restarts its epoch

    expected, got = _last(full), _last(cut)
    assert got["global_step"] == expected["global_step"] == EPOCHS * STEPS_PER_EPOCH
    assert got["state_dict"].keys() == expected["state_dict"].keys()
    different = [k for k, v in expected["state_dict"].items() if not torch.equal(v, got["state_dict"][k])]
    assert not different, f"weights differ from the uninterrupted run: {different}"
    # the same version folder, its metrics history kept: one row per step, no step twice or missing
    assert sorted(p.name for p in (cut / "logs").iterdir()) == ["version_0"]
    with (cut / "logs" / "version_0" / "metrics.csv").open() as f:
        train_steps = [int(r["step"]) for r in csv.DictReader(f) if r.get("train_loss")]
    assert train_steps == list(range(EPOCHS * STEPS_PER_EPOCH)), train_steps


def test_ckpt_path_last_without_a_last_checkpoint_names_where_it_looked(tmp_path):
    from onlstm_tasks.cli import main
    from onlstm_tasks.errors import ConfigError

    with pytest.raises(ConfigError, match=rf"no last.ckpt under .*{tmp_path.name}"):
        main(["fit", "--config", str(_config(tmp_path)), "--ckpt_path", "last"])
