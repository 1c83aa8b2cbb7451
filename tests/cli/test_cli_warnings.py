"""``fit``, ``test`` and ``predict`` print no warning a user cannot act on (issue 34): run as a user runs them, in a
fresh process, and every line of their stderr read."""

from __future__ import annotations

import re

import pytest

from helpers.cli import run_cli, tiny_ner_config

# what a Python warning (``path.py:LINE: message``), Lightning's advice and the known noise look like
NOISE = re.compile(r"\.py:\d+: |Tip:|[Dd]eprecat|won't be reloaded|custom batch sampler|It is recommended to use")


def noise(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if NOISE.search(line)]


@pytest.mark.slow
def test_fit_test_and_predict_print_no_warning(tmp_path):
    config = tiny_ner_config(tmp_path)
    fit = run_cli("fit", "--config", str(config), "--test_after_fit", "true")
    assert fit.returncode == 0, fit.stderr[-3000:]
    assert noise(fit.stderr) == []
    best = str(tmp_path / "ckpt" / "best.ckpt")
    test = run_cli("test", "--config", str(config), "--ckpt_path", best)
    assert test.returncode == 0, test.stderr[-3000:]
    assert noise(test.stderr) == []
    sentences = tmp_path / "input.txt"
    sentences.write_text("Anna Smith lives in Paris .\n\nBob works for Acme .\n")
    predict = run_cli("predict", "--config", str(config), "--ckpt_path", best, "--data.init_args.path", "null",
                      "--data.init_args.predict_file", str(sentences))
    assert predict.returncode == 0, predict.stderr[-3000:]
    assert noise(predict.stderr) == []
    assert len((tmp_path / "predictions.jsonl").read_text().splitlines()) == 3


@pytest.mark.slow
def test_a_run_by_steps_prints_no_zero_flops_no_version_no_negative_epochs_no_split_bars(tmp_path):
    """The language model's config on a toy corpus, by steps (``max_epochs: -1``): the model summary has no
    ``Total FLOPs: 0``, the bar no ``v_num`` and no ``Epoch 0/-2``, ``datasets`` no "Generating train split"
    lines; the bar shows the loss as logged."""
    from helpers.lm import write_toy_corpus
    from helpers.paths import REPO

    files = write_toy_corpus(tmp_path / "corpus", {"train": 200, "validation": 20, "test": 20})
    fit = run_cli("fit", "--config", str(REPO / "configs/lm/unlabelled_en_onlstm_bi.yaml"),
                  "--data.init_args.data_files", str(files).replace("'", '"'), "--data.init_args.batch_size", "8",
                  "--trainer.max_steps", "6", "--trainer.max_epochs", "-1", "--trainer.log_every_n_steps", "2",
                  "--trainer.limit_val_batches", "1", "--trainer.callbacks", "[]", "--test_after_fit", "false",
                  "--trainer.enable_checkpointing", "false", "--trainer.default_root_dir", str(tmp_path),
                  "--trainer.logger.init_args.save_dir", str(tmp_path))
    assert fit.returncode == 0, fit.stderr[-3000:]
    out = fit.stdout + fit.stderr
    for unwanted in ("Total FLOPs", "FLOPs", "v_num", "/-2", "Generating train split"):
        assert unwanted not in out, unwanted
    assert "train_nll" in out
