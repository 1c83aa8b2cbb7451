"""End-to-end training speed and memory: ON-LSTM-CRF vs LSTM-CRF configs on the OntoNotes kit.

    python scripts/benchmark_training.py [--data ../shared/data/conll2012_ontonotesv5] [--epochs 3]
        [--configs NAME=CONFIG ...]

``--configs`` compares other configs (default: the ON-LSTM-CRF and LSTM-CRF ones); speeds are then given relative
to the first, e.g. a recipe before and after a change:
``--configs before=configs/ner/ontonotes_onlstm_crf.yaml after=configs/ner/ontonotes_onlstm_crf_vectors.yaml``.
Configs of other data (e.g. the UNER ones, with ``--data ../shared/data/uner_en_ewt``) work too: the loader timing
uses the first config's data module.

Each config trains in its own process (so peak memory is its own) with validation off; per epoch it reports
training tokens/second and the process's peak RSS (flat across epochs means no leak). It also times one pass of
the training data loader alone (the data pipeline without the model), and prints Lightning's SimpleProfiler
totals for each run: how much of the training epochs went to waiting for the next batch, the forward pass (the
training step), the backward pass and the rest (optimizer, clipping, callbacks), to show whether loading is a
bottleneck.
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


def split_config(spec: str) -> tuple[str, list[str]]:
    """``CONFIG`` or ``CONFIG@KEY=VALUE@KEY=VALUE...``: the config file and its command-line overrides (for example
    ``configs/ner/ontonotes_onlstm_crf_gpu.yaml@data.init_args.max_tokens=8192``)."""
    config, *overrides = spec.split("@")
    return config, [part for item in overrides for part in (f"--{item.split('=', 1)[0]}", item.split("=", 1)[1])]


def train(config: str, data: str, epochs: int, out: Path) -> tuple[list[dict[str, float]], dict] | None:
    """Per-epoch figures and the profiler's totals of ``epochs`` of training, or None where the run failed (its
    error printed). ``config`` as :func:`split_config` reads it."""
    config, overrides = split_config(config)
    cmd = [sys.executable, "-m", "onlstm_tasks.cli", "fit", "--config", str(REPO / config), *data_args(data),
           "--trainer.max_epochs", str(epochs), "--trainer.limit_val_batches", "0", "--test_after_fit", "false",
           "--trainer.enable_checkpointing", "false", "--trainer.enable_progress_bar", "false",
           "--trainer.callbacks", "onlstm_tasks.callbacks.EpochResources",
           "--trainer.logger.init_args.save_dir", str(out), "--trainer.default_root_dir", str(out),
           "--trainer.profiler", "lightning.pytorch.profilers.SimpleProfiler",
           "--trainer.profiler.init_args.dirpath", str(out), "--trainer.profiler.init_args.filename", "profile",
           *overrides]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if proc.returncode:
        print(f"{config} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}", flush=True)
        return None
    (metrics,) = out.rglob("metrics.csv")
    rows = [r for r in csv.DictReader(metrics.open()) if r.get("train_tokens_per_second")]
    epochs = [{k: float(r[k]) for k in ("epoch", "step", "epoch_seconds", "train_tokens_per_second", "peak_rss_mb")}
              for r in rows]
    for before, row in zip([{"step": -1.0}] + epochs, epochs):  # the logged step is the epoch's last, 0-based
        row["ms_per_step"] = 1e3 * row["epoch_seconds"] / (row["step"] - before["step"])
    return epochs, profile_totals(out / "fit-profile.txt")


def profile_totals(report: Path) -> dict[str, float]:
    """Total seconds per action of a SimpleProfiler report (its table rows: | action | mean | calls | total | %)."""
    totals = {}
    for line in report.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] != "Action":
            try:
                totals[cells[0]] = float(cells[3])
            except ValueError:
                continue
    return totals


def phases(totals: dict[str, float]) -> dict[str, float]:
    """Seconds of the training epochs spent waiting for batches, in the forward pass, the backward pass, and the
    rest (optimizer, clipping, moving batches, callbacks). Action names as Lightning 2.x's SimpleProfiler writes
    them; the strategy's prefix varies (SingleDevice, DDP), so actions are matched by suffix."""
    def total(suffix: str) -> float:
        return sum(v for k, v in totals.items() if k.endswith(suffix))

    epochs = total("run_training_epoch")
    wait, forward, backward = total("train_dataloader_next"), total(".training_step"), total(".backward")
    return {"epochs": epochs, "loader wait": wait, "forward": forward, "backward": backward,
            "rest": epochs - wait - forward - backward}


def loader_shapes(data: str, config: str) -> int:
    """How many distinct (rows, steps, characters) shapes one training epoch of ``config``'s loader gives (each a
    first use on a GPU: kernel selection, allocator growth, autotuning)."""
    dm = data_module(data, config, workers=0)
    return len({tuple(batch.tokens.char_ids.shape) for batch in dm.train_dataloader()})


def data_module(data: str, config: str, workers: int | None = None):
    """``config``'s data module (its settings, with ``data`` as the path; ``workers``: its ``num_workers`` instead
    of the config's; gold trees only where the model reads them), set up for fit."""
    import importlib
    import inspect

    import yaml

    spec = yaml.safe_load((REPO / config).read_text())["data"]
    module, _, name = spec["class_path"].rpartition(".")
    init = {**spec.get("init_args", {}), "path": data, "revision": None}
    if workers is not None:
        init["num_workers"] = workers
    cls = getattr(importlib.import_module(module), name)
    reads_trees = "gold_trees" in inspect.signature(cls.__init__).parameters  # the NER data module's option
    if reads_trees and "kind: gold" not in (REPO / config).read_text():  # as in training: only a gold tree source
        init["gold_trees"] = False  #                                        reads trees
    dm = cls(**init)
    dm.setup("fit")
    return dm


def loader_seconds(data: str, config: str, workers: int | None = None, passes: int = 10) -> tuple[float, int]:
    """Seconds and tokens of one pass (the mean of ``passes``) of the training loader of ``config``'s data module
    (:func:`data_module`), tokens counted on the host."""
    import torch

    dm = data_module(data, config, workers)
    threads = torch.get_num_threads()
    if workers == 0:
        torch.set_num_threads(1)
    try:
        loader = dm.train_dataloader()
        start, tokens = time.perf_counter(), 0
        for _ in range(passes):  # an epoch of the kit is ~0.05 s: several, for a steady figure
            for batch in loader:
                tokens += sum(len(words) for words in batch.tokens.words)
        return (time.perf_counter() - start) / passes, tokens // passes
    finally:
        torch.set_num_threads(threads)


def loader_process_ms(data: str, config: str, workers: int, epochs: int = 3) -> float:
    """Milliseconds of the training process's CPU time per batch of ``config``'s training loader with ``workers``
    loader processes, in its last of ``epochs`` epochs (the processes started; with none, the batches are built in
    this process): what the loader costs the process that trains."""
    loader = data_module(data, config, workers).train_dataloader()
    for _ in range(epochs):
        cpu = time.process_time()
        batches = sum(1 for _ in loader)
    return 1e3 * (time.process_time() - cpu) / batches


def config_workers(config: str) -> int:
    import yaml

    return int(yaml.safe_load((REPO / config).read_text())["data"].get("init_args", {}).get("num_workers", 0) or 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(REPO / ".." / "shared" / "data" / "conll2012_ontonotesv5"))
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--loader-only", action="store_true", help="only the data loader's two lines")
    ap.add_argument("--configs", nargs="+", metavar="NAME=CONFIG", help="configs to compare (default: "
                    + ", ".join(f"{n}={c}" for n, c in CONFIGS.items()) + ")")
    args = ap.parse_args()
    configs = CONFIGS
    if args.configs:
        if any("=" not in item for item in args.configs):
            ap.error("--configs takes NAME=CONFIG pairs")
        configs = dict(item.split("=", 1) for item in args.configs)
    print(f"machine: {machine()}")
    first = split_config(next(iter(configs.values())))[0]
    alone, tokens = loader_seconds(args.data, first, workers=0)
    print(f"data loader alone, 0 workers, 1 thread: one training epoch ({tokens} tokens) in {alone:.2f} s = "
          f"{tokens / alone:,.0f} tokens/s")
    seconds, tokens = loader_seconds(args.data, first, passes=1)
    print(f"data loader as training runs it ({config_workers(first)} workers, their start included): one training "
          f"epoch in {seconds:.2f} s = {tokens / seconds:,.0f} tokens/s")
    costs = {workers: loader_process_ms(args.data, first, workers) for workers in (0, 4)}
    print(f"the training process's CPU time per batch: {costs[0]:.2f} ms building it, {costs[4]:.2f} ms receiving it "
          f"from 4 loader processes ({costs[4] / costs[0]:.1f}x)")
    for name, spec in configs.items():
        config = split_config(spec)[0]
        print(f"distinct batch shapes in one training epoch, {name}: {loader_shapes(args.data, config)}")
    if args.loader_only:
        return
    header = (f"{'config':<13}{'epoch':>6}{'seconds':>9}{'tokens/s':>10}{'ms/step':>9}{'peak MB':>9}"
              f"{'loader share':>14}")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, config in configs.items():  # each config's rows as soon as it ends (a later one may time out)
            result = train(config, args.data, args.epochs, Path(tmp) / name.lower())
            if result is None:
                continue
            results[name] = result
            print(f"\n{header}")
            for r in result[0]:
                share = seconds / r["epoch_seconds"]
                print(f"{name:<13}{int(r['epoch']):>6}{r['epoch_seconds']:>9.1f}"
                      f"{r['train_tokens_per_second']:>10,.0f}{r['ms_per_step']:>9.1f}{r['peak_rss_mb']:>9.0f}"
                      f"{share:>13.1%}", flush=True)
    if len(results) < len(configs):
        sys.exit(f"{len(configs) - len(results)} of {len(configs)} configs failed")
    # the first epoch includes warm-up (allocator, lazy inits): compare the rest
    speed = {n: sum(r["train_tokens_per_second"] for r in rows[1:] or rows) / len(rows[1:] or rows)
             for n, (rows, _) in results.items()}
    if configs is CONFIGS:
        print(f"\ntraining tokens/s ON-LSTM-CRF / LSTM-CRF = {speed['ON-LSTM-CRF'] / speed['LSTM-CRF']:.2f}x "
              f"(epochs after the first; target >= 0.75x)")
    else:
        first = next(iter(configs))
        for name in list(configs)[1:]:
            print(f"\ntraining tokens/s {name} / {first} = {speed[name] / speed[first]:.3f}x (epochs after the first)")
    print("\nthe first epoch against the later ones (a fixed start-up cost shows as seconds, whatever the epoch's "
          "size):")
    for name, (rows, _) in results.items():
        if len(rows) > 1:
            later = sum(r["epoch_seconds"] for r in rows[1:]) / len(rows[1:])
            print(f"{name:<13}first {rows[0]['epoch_seconds']:.2f} s, later {later:.2f} s: "
                  f"{rows[0]['epoch_seconds'] / later:.2f}x, +{rows[0]['epoch_seconds'] - later:.2f} s")
    print("\nwhere the training epochs' time went (Lightning SimpleProfiler, all epochs):")
    print(f"{'config':<13}{'epochs s':>9}{'loader wait':>13}{'forward':>9}{'backward':>10}{'rest':>7}")
    for name, (_, totals) in results.items():
        p = phases(totals)
        shares = "".join(f"{100 * p[k] / p['epochs']:>{w - 1}.1f}%" for k, w in
                         (("loader wait", 13), ("forward", 9), ("backward", 10), ("rest", 7)))
        print(f"{name:<13}{p['epochs']:>9.1f}{shares}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
