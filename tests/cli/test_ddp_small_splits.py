"""DDP evaluation of a split with fewer sentences than one batch: every process must still get a batch, or the
process without one skips its evaluation loop and the others hang in the metrics' all-gather."""

import sys
from pathlib import Path

import pytest

from helpers.cli import last_metrics, run_cli, tiny_ner_config
from onlstm_tasks.cli import main
from onlstm_tasks.sample_data import sample_path


def first_sentences(source: Path, n: int) -> str:
    """The first ``n`` sentences (blank-line separated column blocks) of a column file."""
    blocks = [b for b in source.read_text(encoding="utf-8").split("\n\n") if b.strip()]
    assert len(blocks) >= n
    return "\n\n".join(blocks[:n]) + "\n"


@pytest.mark.slow
def test_ddp_test_split_smaller_than_one_batch(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["onlstm-tasks"])
    sample = sample_path("ner")
    tiny_test = tmp_path / "tiny_test.txt"
    tiny_test.write_text(first_sentences(sample / "test.txt", 3), encoding="utf-8")
    data = {"path": str(sample), "data_dir": None, "revision": None, "format": "columns",
            "data_files": {"train": "train.txt", "validation": "validation.txt", "test": str(tiny_test)},
            "batch_size": 16, "eval_batch_size": 32}  # 3 test sentences: one batch for two processes
    config = tiny_ner_config(tmp_path, data=data, max_epochs=1, limit_val_batches=1)
    main(["fit", "--config", str(config)])
    best = str(tmp_path / "ckpt" / "best.ckpt")

    def tested(devices: int, strategy: str, run) -> tuple[dict[str, float], str]:
        root = tmp_path / f"test_{devices}"
        run("test", "--config", str(config), "--ckpt_path", best, "--trainer.devices", str(devices),
            "--trainer.strategy", strategy, "--trainer.logger.init_args.save_dir", str(root))
        return last_metrics(root), next(root.rglob("test_report.txt")).read_text()

    def ddp(*args: str) -> None:  # a subprocess (DDP re-launches the command; gloo on CPU); a hang fails here
        proc = run_cli(*args, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "It is recommended to use `self.log(" not in proc.stderr  # the scores are gathered, not averaged

    scores, reports = {}, {}
    scores[1], reports[1] = tested(1, "auto", lambda *args: main(list(args)))
    scores[2], reports[2] = tested(2, "ddp", ddp)
    for key in ("test_f1", "test_precision", "test_recall", "test_strict_f1"):
        assert scores[2][key] == pytest.approx(scores[1][key], abs=1e-6), key
    # same per-type supports (every gold entity counted exactly once) and scores, not just the same headline
    assert reports[2] == reports[1]
    assert "ORG" in reports[1]  # the three sentences do hold entities to score
