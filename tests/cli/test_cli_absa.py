"""Aspect sentiment through the CLI: fit/test/predict, DDP metrics, and the shared laptops kit in two formats."""

import json
from collections import Counter

import pytest
import torch

from helpers.paths import FIXTURES as FIXTURE_ROOT
from helpers.cli import last_metrics, single_and_ddp_test_metrics, tiny_absa_config
from onlstm_tasks.cli import main
from onlstm_tasks.data.absa.module import AspectSentimentDataModule
from onlstm_tasks.sample_data import sample_path
from helpers.shared_data import SHARED_DATA, requires_shared_data

FIXTURES = FIXTURE_ROOT / "absa"


# per line of fixtures/absa/predict.jsonl, counted by hand: the term, its token span and its character span
FIXTURE_ASPECTS = [
    ("hinge", [1, 2], [4, 9]),  # ordinal 0 (default): the first "hinge"
    ("hinge cover", [5, 7], [26, 37]),
    ("fan", [5, 6], [19, 22]),  # ordinal 1: occurrences count as str.count does, so "fans" is occurrence 0
    ("Zorblax ports", [0, 2], [0, 13]),  # from/to
]


def report_rows(report: str) -> dict[str, list[float]]:
    """The rows of a :func:`format_report` table by their first column (``macro avg`` included)."""
    rows = {}
    for line in report.splitlines()[1:]:
        if line.strip():
            label = "macro avg" if line.startswith("macro avg") else line.split()[0]
            rows[label] = [float(v) for v in line[len(label):].split()]
    return rows


pytestmark = pytest.mark.usefixtures("plain_argv")  # (conftest.py)


@pytest.mark.slow
@pytest.mark.parametrize("head", ["TargetDependentHead", "TargetConnectionHead", "AspectAttentionHead",
                                  "AspectPoolingHead"])
def test_fit_test_predict_with_every_head(tmp_path, capsys, head):
    config = tiny_absa_config(tmp_path, {"path": str(sample_path("absa"))}, head=head)
    main(["fit", "--config", str(config), "--test_after_fit", "true"])
    metrics = last_metrics(tmp_path / "logs")
    assert 0.0 <= metrics["test_accuracy"] <= 1.0 and 0.0 <= metrics["test_macro_f1"] <= 1.0
    assert "macro avg" in capsys.readouterr().out

    best = tmp_path / "ckpt" / "best.ckpt"
    main(["predict", "--config", str(config), "--ckpt_path", str(best), "--data.init_args.path", "null",
          "--data.init_args.predict_file", str(FIXTURES / "predict.jsonl")])
    rows = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    inputs = [json.loads(line) for line in (FIXTURES / "predict.jsonl").read_text().splitlines() if line.strip()]
    assert [r["text"] for r in rows] == [i["text"] for i in inputs]
    labels = torch.load(best, weights_only=True)["hyper_parameters"]["labels"]
    for row in rows:
        assert row["polarity"] in labels and set(row["probabilities"]) == set(labels)
        assert sum(row["probabilities"].values()) == pytest.approx(1.0, abs=1e-4)
    for row, (term, span, char_span) in zip(rows, FIXTURE_ASPECTS, strict=True):
        assert (row["term"], row["aspect"], row["span"], row["char_span"]) == (term, term, span, char_span)
        assert row["text"][char_span[0]:char_span[1]] == term


@pytest.mark.slow
def test_ddp_two_processes_give_the_same_test_scores_as_one(tmp_path):
    config = tiny_absa_config(tmp_path, {"path": str(sample_path("absa"))})
    main(["fit", "--config", str(config)])
    scores = single_and_ddp_test_metrics(config, tmp_path / "ckpt" / "best.ckpt", tmp_path,
                                         "--data.init_args.eval_batch_size", "9")
    for key in ("test_accuracy", "test_macro_f1"):
        assert scores[2][key] == pytest.approx(scores[1][key], abs=1e-6), key


@requires_shared_data
@pytest.mark.slow
def test_laptops_kit_from_parquet_and_xml(tmp_path):
    sources = {"parquet": str(SHARED_DATA / "setfit-absa-semeval-laptops"),
               "xml": str(SHARED_DATA / "semeval2014_laptops")}
    counts, reports = {}, {}
    for name, path in sources.items():
        dm = AspectSentimentDataModule(path=path)
        counts[name] = {split: Counter(e.label for e in dm.splits()[split]) for split in ("train", "test")}
        config = tiny_absa_config(tmp_path / name, {"path": path, "batch_size": 32}, limit_val_batches=2)
        main(["fit", "--config", str(config), "--test_after_fit", "true"])  # the whole test split (cheap)
        accuracy = last_metrics(tmp_path / name / "logs")["test_accuracy"]
        reports[name] = report_rows(next((tmp_path / name / "logs").rglob("test_report.txt")).read_text())
        assert reports[name]["accuracy"] == pytest.approx([accuracy, 638], abs=6e-5)
    assert counts["parquet"] == counts["xml"]
    assert counts["xml"]["test"] == {"positive": 341, "negative": 128, "neutral": 169}
    # what the CLI actually scored, class by class: the same supports from both readers
    supports = {name: {label: int(row[-1]) for label, row in rows.items() if label not in ("accuracy", "macro avg")}
                for name, rows in reports.items()}
    assert supports["parquet"] == supports["xml"] == counts["xml"]["test"]
