"""Running the ``onlstm-tasks`` CLI from tests, in-process or as a subprocess, on small configs."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from helpers.paths import REPO
from onlstm_tasks.sample_data import sample_path



def tiny_ner_config(tmp_path: Path, data: dict | None = None, encoder: dict | None = None, **trainer) -> Path:
    """A small NER config writing everything under ``tmp_path``; returns its path."""
    config = {
        "seed_everything": 1,
        "trainer": {
            "max_epochs": 2, "limit_train_batches": 3, "accelerator": "cpu", "devices": 1, "log_every_n_steps": 1,
            "enable_progress_bar": False, "enable_model_summary": False, "default_root_dir": str(tmp_path),
            "logger": {"class_path": "lightning.pytorch.loggers.CSVLogger",
                       "init_args": {"save_dir": str(tmp_path), "name": "logs"}},
            "callbacks": [
                {"class_path": "onlstm_tasks.callbacks.ResumableCheckpoint",
                 "init_args": {"dirpath": str(tmp_path / "ckpt"), "monitor": "val_f1", "mode": "max",
                               "filename": "best", "save_last": True}},
                {"class_path": "onlstm_tasks.callbacks.JsonlPredictionWriter",
                 "init_args": {"output": str(tmp_path / "predictions.jsonl")}},
            ],
            **trainer,
        },
        "model": {
            "class_path": "onlstm_tasks.tasks.ner.NERTagger",
            "init_args": {
                "embedder": {"class_path": "onlstm_tasks.embedders.word_char.WordCharEmbedder",
                             "init_args": {"word_dim": 16, "char_features": 8, "char_dim": 8, "dropout": 0.1}},
                "encoder": encoder or {"class_path": "onlstm_tasks.encoders.ONLSTM",
                                       "init_args": {"hidden_size": 16, "chunk_size": 4, "bidirectional": True}},
                "optimizer": {"class_path": "torch.optim.Adam", "init_args": {"lr": 0.01}},
            },
        },
        "data": {
            "class_path": "onlstm_tasks.data.ner.NERDataModule",
            "init_args": data or {"path": str(sample_path("ner")), "data_dir": None, "revision": None,
                                  "format": "columns", "reader_options": {"scheme": "iob2"}, "batch_size": 16},
        },
    }
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _default_sigint() -> None:
    """SIGINT back to its default in the child: a suite started in the background (``cmd &``, ``nohup``) ignores
    SIGINT, the child would inherit that, and Python then never turns a Ctrl-C into KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(*args: str, cwd: Path | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """Runs ``python -m onlstm_tasks.cli ARGS`` in a subprocess (needed for DDP, which re-launches itself), with
    SIGINT handled as in a terminal however the suite was started."""
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'tests'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.run([sys.executable, "-m", "onlstm_tasks.cli", *args], cwd=cwd or REPO, env=env,
                          capture_output=True, text=True, timeout=timeout,
                          preexec_fn=_default_sigint if os.name == "posix" else None)
    return proc


def single_and_ddp_test_metrics(config: Path, ckpt: str | Path, root: Path, *args: str) -> dict[int, dict[str, float]]:
    """The test metrics of ``ckpt`` on one process (run here, in-process) and on two DDP processes (a subprocess:
    DDP re-launches the command), keyed 1 and 2. The DDP run must print no warning about unsynchronised logging
    (the task metrics are gathered from every process before they are logged)."""
    from onlstm_tasks.cli import main

    common = ["test", "--config", str(config), "--ckpt_path", str(ckpt), *args]
    main([*common, "--trainer.devices", "1", "--trainer.logger.init_args.save_dir", str(root / "test_1")])
    proc = run_cli(*common, "--trainer.devices", "2", "--trainer.strategy", "ddp",
                   "--trainer.logger.init_args.save_dir", str(root / "test_2"), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "It is recommended to use `self.log(" not in proc.stderr
    return {1: last_metrics(root / "test_1"), 2: last_metrics(root / "test_2")}


def last_metrics(log_root: Path) -> dict[str, float]:
    """Merged last non-empty value of every column of the newest CSVLogger ``metrics.csv`` under ``log_root``."""
    files = sorted(log_root.rglob("metrics.csv"), key=lambda p: p.stat().st_mtime)
    assert files, f"no metrics.csv under {log_root}"
    values: dict[str, float] = {}
    with files[-1].open() as f:
        for row in csv.DictReader(f):
            values.update({k: float(v) for k, v in row.items() if v not in ("", None)})
    return values


def tiny_absa_config(tmp_path: Path, data: dict, head: str = "TargetDependentHead", **trainer) -> Path:
    """A small aspect-sentiment config writing everything under ``tmp_path``; returns its path."""
    path = tiny_ner_config(tmp_path, **trainer)
    config = yaml.safe_load(path.read_text())
    config["trainer"]["callbacks"][0]["init_args"]["monitor"] = "val_accuracy"
    config["model"] = {
        "class_path": "onlstm_tasks.tasks.absa.AspectSentimentClassifier",
        "init_args": {
            "embedder": {"class_path": "onlstm_tasks.embedders.word_char.WordCharEmbedder",
                         "init_args": {"word_dim": 16, "char_encoder": "none", "dropout": 0.1}},
            "head": {"class_path": f"onlstm_tasks.modules.aspect_heads.{head}",
                     "init_args": {"encoder": {"class_path": "onlstm_tasks.encoders.ONLSTM",
                                               "init_args": {"hidden_size": 16, "chunk_size": 4}}}},
            "optimizer": {"class_path": "torch.optim.Adam", "init_args": {"lr": 0.01}},
        },
    }
    config["data"] = {"class_path": "onlstm_tasks.data.absa.AspectSentimentDataModule",
                      "init_args": {"batch_size": 8, **data}}
    path.write_text(yaml.safe_dump(config))
    return path
