"""End-to-end training speed and memory: ON-LSTM-CRF vs LSTM-CRF configs on the OntoNotes kit.

    python scripts/benchmark_training.py [--data ../shared/data/conll2012_ontonotesv5] [--epochs 3]

Each config trains in its own process (so peak memory is its own) with validation off; per epoch it reports
training tokens/second and the process's peak RSS (flat across epochs means no leak). It also times one pass of
the training data loader alone (the data pipeline without the model) to show whether loading is a bottleneck.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from benchmark_encoders import machine  # noqa: E402

CONFIGS = {"ON-LSTM-CRF": "configs/ner/ontonotes_onlstm_crf.yaml", "LSTM-CRF": "configs/ner/ontonotes_lstm_crf.yaml"}


def data_args(path: str) -> list[str]:
    return ["--data.init_args.path", path, "--data.init_args.revision", "null"]


def train(config: str, data: str, epochs: int, out: Path) -> list[dict[str, float]]:
    cmd = [sys.executable, "-m", "onlstm_tasks.cli", "fit", "--config", str(REPO / config), *data_args(data),
           "--trainer.max_epochs", str(epochs), "--trainer.limit_val_batches", "0", "--test_after_fit", "false",
           "--trainer.enable_checkpointing", "false", "--trainer.enable_progress_bar", "false",
           "--trainer.callbacks", "onlstm_tasks.callbacks.EpochResources",
           "--trainer.logger.init_args.save_dir", str(out), "--trainer.default_root_dir", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"{config} failed:\n{proc.stderr[-3000:]}")
    (metrics,) = out.rglob("metrics.csv")
    rows = [r for r in csv.DictReader(metrics.open()) if r.get("train_tokens_per_second")]
    return [{k: float(r[k]) for k in ("epoch", "epoch_seconds", "train_tokens_per_second", "peak_rss_mb")}
            for r in rows]


def loader_seconds(data: str) -> tuple[float, int]:
    from onlstm_tasks.data.ner import NERDataModule

    dm = NERDataModule(path=data, revision=None, format="ontonotes", batch_size=32)
    dm.setup("fit")
    start, tokens = time.perf_counter(), 0
    for batch in dm.train_dataloader():
        tokens += int(batch.tokens.mask.sum())
    return time.perf_counter() - start, tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(REPO / ".." / "shared" / "data" / "conll2012_ontonotesv5"))
    ap.add_argument("--epochs", type=int, default=3)
    args = ap.parse_args()
    print(f"machine: {machine()}")
    seconds, tokens = loader_seconds(args.data)
    print(f"data loader alone: one training epoch ({tokens} tokens) in {seconds:.2f} s = {tokens / seconds:,.0f} "
          "tokens/s")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, config in CONFIGS.items():
            results[name] = train(config, args.data, args.epochs, Path(tmp) / name.lower())
    print(f"\n{'config':<13}{'epoch':>6}{'seconds':>9}{'tokens/s':>10}{'peak MB':>9}{'loader share':>14}")
    for name, rows in results.items():
        for r in rows:
            share = seconds / r["epoch_seconds"]
            print(f"{name:<13}{int(r['epoch']):>6}{r['epoch_seconds']:>9.1f}{r['train_tokens_per_second']:>10,.0f}"
                  f"{r['peak_rss_mb']:>9.0f}{share:>13.1%}")
    # the first epoch includes warm-up (allocator, lazy inits): compare the rest
    speed = {n: sum(r["train_tokens_per_second"] for r in rows[1:] or rows) / len(rows[1:] or rows)
             for n, rows in results.items()}
    print(f"\ntraining tokens/s ON-LSTM-CRF / LSTM-CRF = {speed['ON-LSTM-CRF'] / speed['LSTM-CRF']:.2f}x "
          f"(epochs after the first; target >= 0.75x)")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
