"""A run ended by ``max_steps`` or ``max_epochs`` (before its first scheduled validation, or between two) ends
cleanly through the CLI: exit 0, its last step validated, ``best.ckpt`` written and tested (``ValidateLastStep``);
one ended by ``max_time`` too (Lightning's Timer asks to stop, which validates)."""

from __future__ import annotations

import csv

import pytest
import torch
import yaml

from helpers.lm import text_data, tiny_lm_config, write_toy_corpus
from onlstm_tasks.cli import main

EARLY_STOPPING = {"class_path": "lightning.pytorch.callbacks.EarlyStopping",
                  "init_args": {"monitor": "val_ppl", "mode": "min", "patience": 5}}


pytestmark = pytest.mark.usefixtures("plain_argv")  # (conftest.py)


def lm_run(tmp_path, **trainer):
    files = write_toy_corpus(tmp_path / "corpus", {"train": 200, "validation": 20, "test": 20})
    config = tiny_lm_config(tmp_path / "run", text_data(files), **trainer)
    cfg = yaml.safe_load(config.read_text())
    cfg["trainer"].pop("limit_train_batches")  # the toy epoch: 13 batches
    cfg["trainer"]["callbacks"].append(EARLY_STOPPING)
    config.write_text(yaml.safe_dump(cfg))
    return config


def metric_rows(folder) -> list[dict[str, str]]:
    (metrics,) = folder.rglob("metrics.csv")
    with metrics.open() as f:
        return list(csv.DictReader(f))


def fit(config, *extra: str) -> int:
    try:
        main(["fit", "--config", str(config), "--test_after_fit", "true", *extra])
    except SystemExit as stop:
        return stop.code or 0
    return 0


@pytest.mark.parametrize("trainer", [
    ["--trainer.max_steps", "3"],  # EarlyStopping checks at the end of the (cut) epoch: raised before the fix
    ["--trainer.max_steps", "3", "--trainer.val_check_interval", "10"],  # the first validation never comes
    ["--trainer.max_steps", "7", "--trainer.val_check_interval", "5", "--trainer.check_val_every_n_epoch", "null"],
], ids=["epoch_interval", "before_first_interval", "between_intervals"])
def test_a_run_ended_by_max_steps_validates_its_last_step_and_tests_the_best_checkpoint(tmp_path, trainer):
    config = lm_run(tmp_path)
    assert fit(config, *trainer) == 0
    best = tmp_path / "run" / "ckpt" / "best.ckpt"
    assert best.is_file() and (tmp_path / "run" / "ckpt" / "last.ckpt").is_file()
    max_steps = int(trainer[1])
    assert torch.load(best, weights_only=False)["global_step"] <= max_steps
    rows = metric_rows(tmp_path / "run" / "logs")
    validated = [int(r["step"]) for r in rows if r.get("val_ppl")]
    assert validated and validated[-1] == max_steps - 1  # the CSV logger's step of the last batch (0-based)
    assert any(r.get("test_ppl") for r in rows)  # test_after_fit ran (on best.ckpt)


def test_a_run_ended_by_max_epochs_between_validations_validates_its_last_step(tmp_path):
    config = lm_run(tmp_path)
    assert fit(config, "--trainer.max_epochs", "1", "--trainer.val_check_interval", "5") == 0
    validated = [int(r["step"]) for r in metric_rows(tmp_path / "run" / "logs") if r.get("val_ppl")]
    assert validated == [4, 9, 12]  # every 5 batches, then the 13th and last


def test_a_run_ended_by_max_time_validates_its_last_step_and_tests_the_best_checkpoint(tmp_path):
    config = lm_run(tmp_path)
    assert fit(config, "--trainer.max_time", "00:00:00:01", "--trainer.val_check_interval", "10") == 0
    assert (tmp_path / "run" / "ckpt" / "best.ckpt").is_file()
    rows = metric_rows(tmp_path / "run" / "logs")
    trained = max(int(r["step"]) for r in rows if r.get("train_loss"))
    validated = [int(r["step"]) for r in rows if r.get("val_ppl")]
    assert validated and validated[-1] == trained  # wherever the clock stopped it (or max_epochs on a fast machine)
    assert any(r.get("test_ppl") for r in rows)
