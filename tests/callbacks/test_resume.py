"""``fit --ckpt_path last`` after a SIGTERM mid-epoch continues exactly where the killed run stopped."""

from __future__ import annotations

import csv
import re

import pytest
import torch
import yaml

from helpers.cli import run_cli, tiny_ner_config

STEPS_PER_EPOCH, EPOCHS, KILL_AT = 5, 2, 7  # killed in the second epoch, after its second batch


def _config(folder, kill: bool = False):
    path = tiny_ner_config(folder, max_epochs=EPOCHS, limit_train_batches=STEPS_PER_EPOCH, limit_val_batches=2)
    config = yaml.safe_load(path.read_text())
    if kill:
        config["trainer"]["callbacks"].append({"class_path": "helpers.kill_callback.TermAtStep", "init_args": {"step": KILL_AT}})
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
    assert killed.returncode == 143, killed.stderr[-3000:]  # 128 + SIGTERM: a stopped run does not look finished
    resumed = run_cli("fit", "--config", str(cut / "config.yaml"), "--ckpt_path", "last")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "not resumable" not in resumed.stderr  # Lightning's warning for a loader that restarts its epoch
    # quiet and right: no warning about the folders it reuses on purpose, and where it continues, as it stopped
    warned = [line for line in resumed.stderr.splitlines() if re.search(r"\.py:\d+: |WARNING|[Ww]arning:", line)]
    assert not warned, warned
    assert f"continues after optimizer step {KILL_AT}, in epoch {KILL_AT // STEPS_PER_EPOCH} after its first " \
           f"{KILL_AT % STEPS_PER_EPOCH} batches" in resumed.stderr, resumed.stderr[-3000:]

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


def test_ckpt_path_last_without_a_last_checkpoint_names_where_it_looked(tmp_path, capsys):
    from onlstm_tasks.cli import main

    with pytest.raises(SystemExit) as exit_info:  # a user error: one line, exit code 2
        main(["fit", "--config", str(_config(tmp_path)), "--ckpt_path", "last"])
    assert exit_info.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no last.ckpt under" in errors[0] and tmp_path.name in errors[0]


def test_sampler_resumes_an_epoch_at_a_batch_and_orders_by_epoch_at_first_batch():
    from onlstm_tasks.data.core.resumable_loader import ResumableDataLoader
    from onlstm_tasks.data.core.sampler import BucketBatchSampler

    def sampler():
        return BucketBatchSampler([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8], batch_size=2, shuffle=True, seed=7)

    reference = sampler()
    reference.set_epoch(2)
    epoch2 = list(reference)
    reference.set_epoch(3)
    assert list(reference) != epoch2  # the order depends on the epoch, so the checks below can fail

    lazy = sampler()
    batches = iter(lazy)  # Lightning creates the iterator before it calls set_epoch
    lazy.set_epoch(2)
    assert list(batches) == epoch2

    loader = ResumableDataLoader(range(12), batch_sampler=sampler(), collate_fn=list)
    loader.load_state_dict({"epoch": 2, "batches_done": 2})
    loader.batch_sampler.set_epoch(2)
    assert list(loader) == epoch2[2:] and loader.state_dict() == {"epoch": 2, "batches_done": len(epoch2)}
    assert list(loader) == epoch2  # the skip applies once
    loader.load_state_dict({"epoch": 2, "batches_done": len(epoch2)})  # a finished epoch: the next one
    assert loader.batch_sampler.epoch == 3 and loader.batch_sampler.skipped == 0
