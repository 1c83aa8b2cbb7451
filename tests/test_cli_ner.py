"""The CLI end to end: fit/test/predict from one YAML, resume after a kill, DDP metrics, the shared kits."""

import json
import signal
import sys

import pytest
import torch

from cli_helpers import last_metrics, run_cli, tiny_ner_config
from onlstm_tasks.cli import main
from shared_data import SHARED_DATA, requires_shared_data


@pytest.fixture(autouse=True)
def _plain_argv(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["onlstm-tasks"])


def test_fit_test_and_predict_without_training_data(tmp_path, capsys):
    config = tiny_ner_config(tmp_path)
    main(["fit", "--config", str(config), "--test_after_fit", "true"])
    metrics = last_metrics(tmp_path / "logs")
    assert 0.0 <= metrics["test_f1"] <= 1.0 and "val_f1" in metrics and "test_strict_f1" in metrics
    assert "micro avg" in capsys.readouterr().out  # the per-type report is printed...
    assert list(tmp_path.rglob("test_report.txt"))  # ...and saved

    best = tmp_path / "ckpt" / "best.ckpt"
    hparams = torch.load(best, weights_only=True)["hyper_parameters"]
    assert hparams["labels"][0] == "O" and "<unk>" in hparams["word_vocab"]

    text = tmp_path / "input.txt"
    text.write_text("Lena Brandt visited the Harwick Institute in Oslo.\n\nA quiet day.\n", encoding="utf-8")
    # no training data at all: the vocabularies come from the checkpoint
    main(["predict", "--config", str(config), "--ckpt_path", str(best), "--data.init_args.path", "null",
          "--data.init_args.predict_file", str(text)])
    rows = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert [r["text"] for r in rows] == ["Lena Brandt visited the Harwick Institute in Oslo.", "A quiet day."]
    for row in rows:
        assert len(row["tokens"]) == len(row["tags"])
        for e in row["entities"]:
            assert row["text"][e["char_start"]:e["char_end"]] == e["text"] == " ".join(e["tokens"]) or \
                row["text"][e["char_start"]:e["char_end"]] == e["text"]
            assert all(t.endswith(e["type"]) for t in row["tags"][e["start"]:e["end"]])


def test_print_config_resolves_the_encoder_block(tmp_path, capsys):
    config = tiny_ner_config(tmp_path)
    with pytest.raises(SystemExit):
        main(["fit", "--config", str(config), "--print_config"])
    out = capsys.readouterr().out
    assert "onlstm_tasks.encoders.ONLSTM" in out and "chunk_size: 4" in out


@pytest.mark.slow
def test_killed_fit_resumes_from_the_saved_step(tmp_path):
    config = tiny_ner_config(tmp_path, max_epochs=-1, max_steps=10)
    record = tmp_path / "starts.txt"
    common = ["--config", str(config),
              "--trainer.callbacks+=kill_callback.RecordStartStep", f"--trainer.callbacks.path={record}",
              "--trainer.callbacks+=lightning.pytorch.callbacks.ModelCheckpoint",
              f"--trainer.callbacks.dirpath={tmp_path / 'ckpt'}", "--trainer.callbacks.every_n_train_steps=2",
              "--trainer.callbacks.save_last=true"]
    killed = run_cli("fit", *common, "--trainer.callbacks+=kill_callback.KillAtStep",
                     "--trainer.callbacks.step=5")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    saved_step = torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=False)["global_step"]
    assert 2 <= saved_step <= 5

    resumed = run_cli("fit", *common, "--ckpt_path", "last")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    starts = [int(s) for s in record.read_text().split()]
    assert starts == [0, saved_step]
    assert torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=False)["global_step"] == 10


@pytest.mark.slow
def test_ddp_two_processes_give_the_same_test_scores_as_one(tmp_path):
    config = tiny_ner_config(tmp_path)
    fit = run_cli("fit", "--config", str(config))
    assert fit.returncode == 0, fit.stderr[-2000:]
    best = str(tmp_path / "ckpt" / "best.ckpt")
    scores = {}
    for devices, strategy in ((1, "auto"), (2, "ddp")):
        root = tmp_path / f"test_{devices}"
        proc = run_cli("test", "--config", str(config), "--ckpt_path", best, "--trainer.devices", str(devices),
                       "--trainer.strategy", strategy, "--trainer.logger.init_args.save_dir", str(root),
                       "--data.init_args.eval_batch_size", "7")
        assert proc.returncode == 0, proc.stderr[-3000:]
        scores[devices] = last_metrics(root)
    for key in ("test_f1", "test_precision", "test_recall", "test_strict_f1"):
        assert scores[2][key] == pytest.approx(scores[1][key], abs=1e-6), key


@requires_shared_data
@pytest.mark.slow
@pytest.mark.parametrize(
    "data",
    [
        {"path": str(SHARED_DATA / "conll2012_ontonotesv5"), "data_dir": "english_v12", "revision": None,
         "format": "ontonotes"},
        {"path": str(SHARED_DATA / "uner_en_ewt"), "data_dir": None, "revision": None, "format": "conllx",
         "data_files": {"train": "en_ewt-uner-dev.conllx", "test": "en_ewt-uner-test.conllx"}},
    ],
    ids=["ontonotes", "uner"],
)
def test_fit_and_test_on_the_shared_kits(tmp_path, data):
    config = tiny_ner_config(tmp_path, data={**data, "batch_size": 32}, limit_val_batches=2)
    main(["fit", "--config", str(config), "--test_after_fit", "true", "--trainer.limit_test_batches", "3"])
    metrics = last_metrics(tmp_path / "logs")
    assert 0.0 <= metrics["test_f1"] <= 1.0
    labels = torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=True)["hyper_parameters"]["labels"]
    expected = {"B-PERSON", "B-GPE", "I-ORG"} if data["format"] == "ontonotes" else {"B-PER", "B-LOC", "I-ORG"}
    assert expected <= set(labels)
