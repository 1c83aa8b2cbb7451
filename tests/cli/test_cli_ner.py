"""The CLI end to end: fit/test/predict from one YAML, resume after a kill, DDP metrics, the shared kits."""

import json
import signal

import pytest
import torch

from helpers.cli import last_metrics, run_cli, single_and_ddp_test_metrics, tiny_ner_config
from onlstm_tasks.cli import main
from helpers.shared_data import SHARED_DATA, requires_shared_data


pytestmark = pytest.mark.usefixtures("plain_argv")  # (conftest.py)


def token_offsets(text: str, tokens: list[str]) -> list[tuple[int, int]]:
    """Character span of every token, found by searching the tokens in ``text`` in order (independent of the
    reader's offsets)."""
    offsets, pos = [], 0
    for token in tokens:
        start = text.index(token, pos)
        assert not text[pos:start].strip(), (text, token, pos)  # only spaces are skipped
        offsets.append((start, start + len(token)))
        pos = start + len(token)
    assert not text[pos:].strip()
    return offsets


def micro_avg(report: str) -> tuple[float, float, float, int]:
    """precision, recall, F1 and support of the ``micro avg`` row of a seqeval report."""
    row = next(line for line in report.splitlines() if line.strip().startswith("micro avg"))
    *scores, support = row.split()[2:]
    return (*map(float, scores), int(support))


# training-like sentences (the tiny model tags them) with odd spacing, so a span is not " ".join(tokens)
PREDICT_TEXT = [
    "Zoran Zamfirel, chief executive of Tarvik  Mining, said on Wednesday that the company would cut 34 jobs.",
    "FC Solvenna v  Hallowmere   Athletic",
    "Lena Brandt visited the Harwick Institute in Oslo.",
    "A quiet day.",
]


@pytest.mark.slow
def test_fit_test_and_predict_without_training_data(tmp_path, capsys):
    # two full epochs of the bundled sample (a few seconds) so that the scores and the predictions are not empty
    config = tiny_ner_config(tmp_path, limit_train_batches=1.0)
    lr = "--model.init_args.optimizer.init_args.lr=0.02"
    main(["fit", "--config", str(config), lr, "--test_after_fit", "true"])
    metrics = last_metrics(tmp_path / "logs")
    assert 0.0 < metrics["test_f1"] <= 1.0 and "val_f1" in metrics and "test_strict_f1" in metrics
    assert "micro avg" in capsys.readouterr().out  # the per-type report is printed...
    assert list(tmp_path.rglob("test_report.txt"))  # ...and saved

    best = tmp_path / "ckpt" / "best.ckpt"
    hparams = torch.load(best, weights_only=True)["hyper_parameters"]
    assert hparams["labels"][0] == "O" and "<unk>" in hparams["word_vocab"]
    # the test after fit scored the best checkpoint: testing it again gives the same numbers
    main(["test", "--config", str(config), lr, "--ckpt_path", str(best),
          "--trainer.logger.init_args.save_dir", str(tmp_path / "retest")])
    again = last_metrics(tmp_path / "retest")
    for key in ("test_f1", "test_loss", "test_strict_f1"):
        assert again[key] == pytest.approx(metrics[key], abs=1e-6), key

    text = tmp_path / "input.txt"
    text.write_text("\n\n".join(PREDICT_TEXT) + "\n", encoding="utf-8")
    # no training data at all: the vocabularies come from the checkpoint
    main(["predict", "--config", str(config), "--ckpt_path", str(best), "--data.init_args.path", "null",
          "--data.init_args.predict_file", str(text)])
    rows = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    # one record per line: the blank line between two sentences is an empty record
    assert [r["text"] for r in rows] == [line for text in PREDICT_TEXT for line in (text, "")][:-1]
    assert all(r["empty"] for r in rows[1::2]) and not any(r.get("empty") for r in rows[::2])
    rows = rows[::2]
    assert rows[0]["tokens"][:3] == ["Zoran", "Zamfirel", ","]  # punctuation is split off
    assert sum(len(r["entities"]) for r in rows) >= 2  # otherwise the span checks below check nothing
    for row in rows:
        assert len(row["tokens"]) == len(row["tags"])
        offsets = token_offsets(row["text"], row["tokens"])
        for e in row["entities"]:
            start, end = e["start"], e["end"]
            assert (e["char_start"], e["char_end"]) == (offsets[start][0], offsets[end - 1][1]), e
            assert e["text"] == row["text"][offsets[start][0]:offsets[end - 1][1]]
            assert e["tokens"] == row["tokens"][start:end]
            assert all(t.endswith(e["type"]) for t in row["tags"][start:end])


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
              "--trainer.callbacks+=helpers.kill_callback.RecordStartStep", f"--trainer.callbacks.path={record}",
              "--trainer.callbacks+=lightning.pytorch.callbacks.ModelCheckpoint",
              f"--trainer.callbacks.dirpath={tmp_path / 'ckpt'}", "--trainer.callbacks.every_n_train_steps=2",
              "--trainer.callbacks.save_last=true"]
    killed = run_cli("fit", *common, "--trainer.callbacks+=helpers.kill_callback.KillAtStep",
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
    main(["fit", "--config", str(config)])
    scores = single_and_ddp_test_metrics(config, tmp_path / "ckpt" / "best.ckpt", tmp_path,
                                         "--data.init_args.eval_batch_size", "7")
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
    # the saved seqeval report agrees with the logged scores, over entities that are there
    precision, recall, f1, support = micro_avg(next((tmp_path / "logs").rglob("test_report.txt")).read_text())
    assert support > 0
    assert (precision, recall, f1) == pytest.approx(
        (metrics["test_precision"], metrics["test_recall"], metrics["test_f1"]), abs=6e-5)
    labels = torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=True)["hyper_parameters"]["labels"]
    expected = {"B-PERSON", "B-GPE", "I-ORG"} if data["format"] == "ontonotes" else {"B-PER", "B-LOC", "I-ORG"}
    assert expected <= set(labels)
