"""scripts/compare.py: the seed runner's table comes from the runs' own metric files, and it resumes."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import pytest
import yaml

from helpers.scripts import load_script
from helpers.cli import tiny_ner_config

compare = load_script("compare")


def _test_metrics(path: Path) -> dict[str, float]:
    """Read here independently of compare.py: the last non-empty test_* values of one metrics.csv."""
    values = {}
    with path.open() as f:
        for row in csv.DictReader(f):
            values.update({k: float(v) for k, v in row.items() if k.startswith("test_") and v})
    return values


def _no_runs(args, log_path):
    raise AssertionError(f"rerun although done: {args[0]} in {log_path.parent}")


@pytest.mark.slow
def test_two_tiny_runs_table_from_their_metric_files_and_resume(tmp_path: Path, monkeypatch) -> None:
    config = tiny_ner_config(tmp_path / "cfg", max_epochs=1, limit_train_batches=2, limit_val_batches=2)
    runs, out = tmp_path / "runs", tmp_path / "results" / "tiny.md"
    argv = ["--configs", str(config), "--labels", "tiny", "--seeds", "1", "2", "--out", str(out),
            "--runs-dir", str(runs), "--metrics", "test_f1", "test_loss", "--override=--trainer.limit_test_batches=2"]
    assert compare.main(argv) == 0

    files = {seed: runs / "tiny" / f"seed_{seed}" / "test" / "version_0" / "metrics.csv" for seed in (1, 2)}
    measured = {seed: _test_metrics(path) for seed, path in files.items()}
    losses = [measured[1]["test_loss"], measured[2]["test_loss"]]
    assert losses[0] != losses[1]  # two seeds, two models: the mean is not just a copy of one run

    result = json.loads(out.with_suffix(".json").read_text())
    (row,) = result["configs"]
    loss = row["metrics"]["test_loss"]
    assert loss["values"] == {"1": losses[0], "2": losses[1]}
    assert loss["mean"] == pytest.approx(statistics.fmean(losses), abs=1e-12)
    assert loss["std"] == pytest.approx(statistics.stdev(losses), abs=1e-12)
    f1 = [measured[1]["test_f1"], measured[2]["test_f1"]]
    assert row["metrics"]["test_f1"]["mean"] == pytest.approx(statistics.fmean(f1), abs=1e-12)

    table = out.read_text()
    assert f"| tiny | 2 | {statistics.fmean(f1):.4f} ± {statistics.stdev(f1):.4f} | " \
           f"{statistics.fmean(losses):.4f} ± {statistics.stdev(losses):.4f} |" in table
    assert f"| tiny | 2 | {f1[1]:.4f} | {losses[1]:.4f} |" in table
    # every run wrote into its own folder: checkpoints, logs, the checkpoint tested
    for seed in (1, 2):
        run = result["runs"][seed - 1]
        assert run["metrics_file"] == str(files[seed])
        assert Path(run["best_checkpoint"]).parent == runs / "tiny" / f"seed_{seed}" / "checkpoints"
        assert f"--seed_everything {seed}" in run["fit_command"] and "--trainer.limit_test_batches=2" in \
            run["test_command"]
        assert run["best_checkpoint"] in run["test_command"] and run["best_checkpoint"] in table
    assert not (tmp_path / "cfg" / "ckpt").exists()  # the config's own dirpath was moved into the run folders

    # resume: everything is done, nothing runs again, the same table comes out
    monkeypatch.setattr(compare, "run_cli", _no_runs)
    first = out.read_text()
    assert compare.main(argv) == 0
    assert out.read_text() == first


def _fake_cli(calls: list):
    """Stands in for the CLI: a fit writes a best checkpoint, a test writes a metrics.csv."""

    def run_cli(args, log_path):
        calls.append(args[0])
        run_dir = log_path.parent
        if args[0] == "fit":
            (run_dir / "checkpoints").mkdir()
            (run_dir / "checkpoints" / "best.ckpt").write_text("x")
        else:
            (run_dir / "test" / "version_0").mkdir(parents=True)
            (run_dir / "test" / "version_0" / "metrics.csv").write_text("test_f1,epoch\n0.5,0\n")
        return 0

    return run_cli


def test_resume_states(tmp_path: Path, monkeypatch) -> None:
    config = tiny_ner_config(tmp_path / "cfg")
    runs, out = tmp_path / "runs", tmp_path / "t.md"
    argv = ["--configs", str(config), "--seeds", "1", "2", "3", "--out", str(out), "--runs-dir", str(runs)]
    calls: list[str] = []
    monkeypatch.setattr(compare, "run_cli", _fake_cli(calls))
    seed = {s: runs / "config" / f"seed_{s}" for s in (1, 2, 3)}
    seed[1].mkdir(parents=True)  # seed 1: interrupted during fit (no fit.done), with a stale file
    (seed[1] / "run.json").write_text(json.dumps({"settings": compare.Run(
        "config", config, 1, seed[1], [], compare.hashlib.sha256(config.read_bytes()).hexdigest()).settings}))
    (seed[1] / "stale.txt").write_text("from the interrupted fit")
    assert compare.main(argv) == 0
    assert calls == ["fit", "test"] * 3
    assert not (seed[1] / "stale.txt").exists()  # restarted from scratch in a fresh folder

    # seed 2: fit finished, test interrupted -> only its test runs again
    (seed[2] / "test" / "version_0" / "metrics.csv").unlink()
    calls.clear()
    assert compare.main(argv) == 0
    assert calls == ["test"]

    # other overrides than the folder was made with: an error, not a silent reuse
    calls.clear()
    assert compare.main([*argv, "--", "--trainer.max_epochs=3"]) == 1
    assert calls == []


def test_config_without_a_monitored_checkpoint_is_refused(tmp_path: Path) -> None:
    config = tiny_ner_config(tmp_path / "cfg")
    data = yaml.safe_load(config.read_text())
    del data["trainer"]["callbacks"][0]["init_args"]["monitor"]
    config.write_text(yaml.safe_dump(data))
    argv = ["--configs", str(config), "--seeds", "1", "--out", str(tmp_path / "t.md"), "--runs-dir", str(tmp_path)]
    assert compare.main(argv) == 1


def test_a_tables_json_names_the_code_that_made_it():
    provenance = compare.code_provenance()
    assert provenance["commit"] is None or len(provenance["commit"]) == 40
    assert isinstance(provenance["dirty"], bool) and provenance["torch"] and provenance["lightning"]


def test_the_code_is_read_before_the_table_is_written(tmp_path: Path, monkeypatch) -> None:
    """Re-making a table rewrites its own tracked files: the commit and ``dirty`` flag are read before that, or every
    re-made table would call its code dirty."""
    config = tiny_ner_config(tmp_path / "cfg")
    out = tmp_path / "t.md"
    out.write_text("the old table\n")
    seen = []
    monkeypatch.setattr(compare, "run_cli", _fake_cli([]))
    monkeypatch.setattr(compare, "code_provenance", lambda: seen.append(out.read_text()) or {"commit": None})
    argv = ["--configs", str(config), "--seeds", "1", "--out", str(out), "--runs-dir", str(tmp_path / "runs")]
    assert compare.main(argv) == 0
    assert seen == ["the old table\n"]
    assert json.loads(out.with_suffix(".json").read_text())["code"] == {"commit": None}
