"""Ctrl-C at any moment of training, then ``fit --ckpt_path last``: the same run as an uninterrupted one, bit for bit
on the CPU (issue 50). A real SIGINT reaches a real ``onlstm-tasks fit`` subprocess at a chosen moment
(:class:`helpers.kill_callback.SigintAt`): between batches, inside a step before the optimizer's update, after the
update in the batch's end hooks, and inside a validation. The interrupted batch is settled whole: redone from the
RNG states it started with, or counted done where its update is in the weights."""

from __future__ import annotations

import csv

import pytest
import torch
import yaml

from helpers.cli import run_cli, tiny_ner_config
from helpers.kill_callback import SigintAt

STEPS_PER_EPOCH, EPOCHS, AT = 5, 2, 6  # the interrupt comes in the second epoch (or in its first validation)


def _config(folder, moment: str | None = None):
    path = tiny_ner_config(folder, max_epochs=EPOCHS, limit_train_batches=STEPS_PER_EPOCH, limit_val_batches=2)
    config = yaml.safe_load(path.read_text())
    encoder = config["model"]["init_args"]["encoder"]["init_args"]
    encoder["dropconnect"] = 0.3  # draws from the RNG inside every step: a redone batch must draw the same
    path.write_text(yaml.safe_dump(config))
    if moment is not None:
        step = STEPS_PER_EPOCH - 1 if moment in ("validation", "sanity") else AT
        config["trainer"]["callbacks"].append({"class_path": "helpers.kill_callback.SigintAt",
                                               "init_args": {"step": step, "moment": moment}})
        path = folder / "interrupt.yaml"
        path.write_text(yaml.safe_dump(config))
    return path


def _last(folder) -> dict:
    return torch.load(folder / "ckpt" / "last.ckpt", weights_only=True)


def _rows(folder) -> list[dict]:
    with (folder / "logs" / "version_0" / "metrics.csv").open() as f:
        return [{k: v for k, v in row.items() if v} for row in csv.DictReader(f)]


def interrupt_then_resume(interrupting_config, folder) -> None:
    """Runs ``interrupting_config`` (its SigintAt interrupts it, leaving ``last.ckpt`` in ``folder``), then the
    same run without the interrupt (``folder/config.yaml``) with ``--ckpt_path last``."""
    interrupted = run_cli("fit", "--config", str(interrupting_config))
    assert interrupted.returncode != 0 and "KeyboardInterrupt" in interrupted.stderr, interrupted.stderr[-3000:]
    assert (folder / "ckpt" / "last.ckpt").is_file(), interrupted.stderr[-3000:]
    resumed = run_cli("fit", "--config", str(folder / "config.yaml"), "--ckpt_path", "last")
    assert resumed.returncode == 0, resumed.stderr[-3000:]


def assert_same_run(full, cut) -> None:
    """The same global step and the same weights, bit for bit, at the end of both runs."""
    expected, got = _last(full), _last(cut)
    assert got["global_step"] == expected["global_step"] == EPOCHS * STEPS_PER_EPOCH
    different = [k for k, v in expected["state_dict"].items() if not torch.equal(v, got["state_dict"][k])]
    assert not different, f"weights differ from the uninterrupted run: {different}"


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    full = tmp_path_factory.mktemp("full")
    done = run_cli("fit", "--config", str(_config(full)))
    assert done.returncode == 0, done.stderr[-3000:]
    return full


@pytest.mark.slow
@pytest.mark.parametrize("moment", SigintAt.MOMENTS)
def test_sigint_then_ckpt_path_last_is_the_uninterrupted_run(moment, uninterrupted, tmp_path):
    interrupt_then_resume(_config(tmp_path, moment), tmp_path)
    assert_same_run(uninterrupted, tmp_path)
    want, have = _rows(uninterrupted), _rows(tmp_path)
    val = lambda rows: [(r["step"], r["val_f1"]) for r in rows if "val_f1" in r]  # noqa: E731
    assert val(have) == val(want)
    train = lambda rows: {r["step"]: r["train_loss"] for r in rows if "train_loss" in r}  # noqa: E731
    lost = set(train(want)) - set(train(have))
    assert len(lost) <= 1 and all(train(have)[s] == train(want)[s] for s in train(have)), (lost, moment)


@pytest.mark.slow
def test_sigint_before_the_first_step_says_there_is_nothing_to_resume(tmp_path):
    interrupted = run_cli("fit", "--config", str(_config(tmp_path, "sanity")))
    assert interrupted.returncode != 0
    assert "before the first training step: nothing to resume" in interrupted.stderr, interrupted.stderr[-3000:]
    assert not (tmp_path / "ckpt" / "last.ckpt").exists()


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["step", "validation"])
def test_the_language_model_resumes_a_sigint_exactly(moment, tmp_path):
    """The bidirectional ON-LSTM language model (DropConnect, locked dropout: draws in every step), by
    ``ResumableCheckpoint``, interrupted inside a step or a validation: the same weights as an uninterrupted run."""
    from helpers.lm import text_data, tiny_lm_config, write_toy_corpus

    corpus = write_toy_corpus(tmp_path / "corpus", {"train": 80, "validation": 16, "test": 16})

    def config(folder, moment=None):
        path = tiny_lm_config(folder, text_data(corpus), max_epochs=EPOCHS, limit_train_batches=STEPS_PER_EPOCH,
                              limit_val_batches=1, model={"bidirectional": True}, encoder={
                                  "class_path": "onlstm_tasks.encoders.ONLSTM",
                                  "init_args": {"hidden_size": 16, "chunk_size": 4, "dropconnect": 0.3}})
        data = yaml.safe_load(path.read_text())
        data["trainer"]["callbacks"] = [{"class_path": "onlstm_tasks.callbacks.ResumableCheckpoint", "init_args": {
            "dirpath": str(folder / "ckpt"), "monitor": "val_ppl", "mode": "min", "filename": "best",
            "save_last": True}}]
        data["data"]["init_args"]["batch_size"] = 8
        path.write_text(yaml.safe_dump(data))
        if moment is not None:
            step = STEPS_PER_EPOCH - 1 if moment == "validation" else AT
            data["trainer"]["callbacks"].append({"class_path": "helpers.kill_callback.SigintAt",
                                                 "init_args": {"step": step, "moment": moment}})
            path = folder / "interrupt.yaml"
            path.write_text(yaml.safe_dump(data))
        return path

    full, cut = tmp_path / "full", tmp_path / "cut"
    assert run_cli("fit", "--config", str(config(full))).returncode == 0
    interrupt_then_resume(config(cut, moment), cut)
    assert_same_run(full, cut)
