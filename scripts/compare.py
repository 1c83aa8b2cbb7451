"""Run configs x seeds through the ``onlstm-tasks`` CLI and tabulate mean ± std of their test metrics.

For every config and seed, in its own folder ``RUNS_DIR/LABEL/seed_S``:

1. ``python -m onlstm_tasks.cli fit --config C --seed_everything S ...`` with the CSV logger and the checkpoint
   directory moved into the run folder (``--trainer.logger`` / ``--trainer.callbacks`` given on the command line,
   the callbacks otherwise as in the config) and ``--test_after_fit false``;
2. ``python -m onlstm_tasks.cli test ... --ckpt_path BEST`` on the checkpoint the config's ``ModelCheckpoint``
   chose on validation (``monitor: val_f1`` / ``val_accuracy`` / ``val_ppl``), logging to its own CSV file;
3. the test metrics are read back from that run's own ``test/version_0/metrics.csv``.

Then it writes a Markdown table (one row per config: mean ± sample standard deviation over the seeds of each
test metric, then every seed's value, then the exact commands behind every cell) to ``--out`` and the same
numbers as JSON next to it (``.json``). Metrics shown: those of ``test_f1 test_precision test_recall`` (NER),
``test_accuracy test_macro_f1`` (ABSA) and ``test_ppl`` (LM) that the runs logged, or ``--metrics``.

Resuming: run it again with the same arguments. A run whose test metrics file exists is not rerun; a run whose
fit finished but whose test did not is only tested; a run interrupted during fit is deleted and restarted from
scratch in a fresh folder (not continued from its last checkpoint: a fit resumed mid-way is not bit-identical to
an uninterrupted one, so every cell of a table comes from one uninterrupted fit). A run folder made with other
settings (config file content, seed or overrides) is an error, never silently reused.

Usage::

    python scripts/compare.py --configs configs/ner/ontonotes_onlstm_crf.yaml configs/ner/ontonotes_lstm_crf.yaml \\
        --seeds 1 2 3 --out benchmarks/results/ontonotes_crf.md --runs-dir runs/compare/ontonotes_crf \\
        --override=--trainer.max_epochs=10 \\
        -- --data.init_args.path ../shared/data/conll2012_ontonotesv5 --data.init_args.revision null

Everything after ``--`` and every ``--override`` (split like a shell line; write ``--override=--x=1`` or
``--override "--x 1"``) is passed to both ``fit`` and ``test``, after the run-folder options.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import hashlib
import json
import math
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

KNOWN_METRICS = ("test_f1", "test_precision", "test_recall", "test_accuracy", "test_macro_f1", "test_ppl",
                 "best val_f1", "best val_accuracy", "best val_ppl")
FIT_METRICS = Path("fit") / "version_0" / "metrics.csv"
RUN_FILE = "run.json"  # written when a run folder is created: the settings it was made with
FIT_DONE = "fit.done"  # written after a fit that ended well: the chosen checkpoint
TEST_METRICS = Path("test") / "version_0" / "metrics.csv"
CLI = ["-m", "onlstm_tasks.cli"]


class CompareError(RuntimeError):
    pass


# ---- one run ------------------------------------------------------------------------------------------------------
@dataclass
class Run:
    label: str
    config: Path
    seed: int
    run_dir: Path
    overrides: list[str]
    config_sha256: str
    callbacks: list[dict] = field(default_factory=list)

    @property
    def settings(self) -> dict[str, Any]:
        return {"config": str(self.config), "config_sha256": self.config_sha256, "seed": self.seed,
                "overrides": self.overrides}

    def logger(self, name: str) -> str:
        return json.dumps({"class_path": "lightning.pytorch.loggers.CSVLogger",
                           "init_args": {"save_dir": str(self.run_dir), "name": name, "version": 0}})

    def _common(self, name: str) -> list[str]:
        args = ["--config", str(self.config), "--seed_everything", str(self.seed),
                "--trainer.default_root_dir", str(self.run_dir), "--trainer.logger", self.logger(name)]
        if self.callbacks:
            args += ["--trainer.callbacks", json.dumps(self.callbacks)]
        return args

    def fit_args(self) -> list[str]:
        return ["fit", *self._common("fit"), "--test_after_fit", "false", *self.overrides]

    def test_args(self, ckpt: str | Path) -> list[str]:
        return ["test", *self._common("test"), "--ckpt_path", str(ckpt), *self.overrides]

    @property
    def checkpoint_dir(self) -> Path:
        return self.run_dir / "checkpoints"

    @property
    def test_metrics(self) -> Path:
        return self.run_dir / TEST_METRICS


def shown(args: list[str]) -> str:
    """The command as a user types it."""
    return shlex.join(["python", *CLI, *args])


def run_cli(args: list[str], log_path: Path) -> int:
    """Runs ``python -m onlstm_tasks.cli ARGS`` (output to ``log_path``); the exit code. Tests replace it."""
    with open(log_path, "w", encoding="utf-8") as log:
        log.write(shown(args) + "\n\n")
        log.flush()
        return subprocess.run([sys.executable, *CLI, *args], stdout=log, stderr=subprocess.STDOUT).returncode


def _load_config(path: Path) -> dict:
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as err:
        raise CompareError(f"{path}: cannot read the config ({err})") from None
    if not isinstance(config, dict):
        raise CompareError(f"{path}: expected a YAML mapping")
    return config


def is_model_checkpoint(class_path: str) -> bool:
    """Whether a callback's class is Lightning's ModelCheckpoint or a subclass (the project's ResumableCheckpoint)."""
    import importlib

    module, _, name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return class_path.endswith("ModelCheckpoint")
    from lightning.pytorch.callbacks import ModelCheckpoint

    return isinstance(cls, type) and issubclass(cls, ModelCheckpoint)


def run_callbacks(config: dict, config_path: Path, run_dir: Path) -> list[dict]:
    """The config's callbacks with their output paths moved into ``run_dir``; checks that a ModelCheckpoint
    chooses checkpoints on a validation metric."""
    callbacks = (config.get("trainer") or {}).get("callbacks") or []
    if isinstance(callbacks, dict):
        callbacks = [callbacks]
    out, checkpoints = [], []
    for i, cb in enumerate(callbacks):
        if not isinstance(cb, dict) or "class_path" not in cb:
            raise CompareError(f"{config_path}: trainer.callbacks[{i}] is not a class_path/init_args mapping")
        cb = json.loads(json.dumps(cb))  # a deep copy
        init = cb["init_args"] = dict(cb.get("init_args") or {})
        if is_model_checkpoint(cb["class_path"]):
            init["dirpath"] = str(run_dir / ("checkpoints" if not checkpoints else f"checkpoints_{i}"))
            checkpoints.append(init)
        elif "output" in init:
            init["output"] = str(run_dir / Path(str(init["output"])).name)
        out.append(cb)
    if not checkpoints or not checkpoints[0].get("monitor"):
        raise CompareError(f"{config_path}: the first ModelCheckpoint in trainer.callbacks must have a monitor "
                           "(e.g. val_f1): compare.py tests the checkpoint chosen on validation")
    return out


def best_checkpoint(run: Run) -> Path:
    """The checkpoint the monitored ModelCheckpoint chose: its only non-``last`` file, else the
    ``best_model_path`` it saved in its state."""
    files = sorted(p for p in run.checkpoint_dir.glob("*.ckpt") if not p.name.startswith("last"))
    if len(files) == 1:
        return files[0]
    import torch  # only here: most runs have one best file

    for ckpt in sorted(run.checkpoint_dir.glob("*.ckpt"), key=lambda p: p.stat().st_mtime, reverse=True):
        state = torch.load(ckpt, map_location="cpu", weights_only=True).get("callbacks", {})
        for key, value in state.items():
            best = value.get("best_model_path") if key.startswith(("ModelCheckpoint", "ResumableCheckpoint")) else None
            if best and Path(best).parent == run.checkpoint_dir:
                return Path(best)
    raise CompareError(f"{run.run_dir}: fit ended but no best checkpoint was found in {run.checkpoint_dir}")


def read_test_metrics(path: Path) -> dict[str, float]:
    """Every ``test_*`` column of a CSVLogger ``metrics.csv`` (its last non-empty value)."""
    values: dict[str, float] = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            for key, value in row.items():
                if key and key.startswith("test_") and value not in ("", None):
                    values[key] = float(value)
    return values


def read_best_validation(path: Path) -> dict[str, float]:
    """``best val_X`` for the validation scores of a fit's ``metrics.csv`` (the highest, the lowest for ``val_ppl``,
    over the validations it logged): the dev score of the checkpoint chosen on it."""
    if not path.is_file():
        return {}
    seen: dict[str, list[float]] = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            for key in ("val_f1", "val_accuracy", "val_ppl"):
                if row.get(key) not in ("", None):
                    seen.setdefault(key, []).append(float(row[key]))
    return {f"best {key}": (min if key == "val_ppl" else max)(values) for key, values in seen.items()}


def _state(run: Run) -> str:
    """``new`` | ``done`` | ``test`` (fit finished, test missing) | ``restart`` (interrupted during fit)."""
    if not run.run_dir.exists():
        return "new"
    meta_path = run.run_dir / RUN_FILE
    if not meta_path.is_file():
        raise CompareError(f"{run.run_dir} exists but was not made by compare.py (no {RUN_FILE}); "
                           "choose another --runs-dir or remove it")
    made_with = json.loads(meta_path.read_text(encoding="utf-8")).get("settings")
    if made_with != run.settings:
        raise CompareError(f"{run.run_dir} was made with other settings:\n  {made_with}\nnot\n  {run.settings}\n"
                           "(config file changed, or other overrides): choose another --runs-dir or remove it")
    if run.test_metrics.is_file() and read_test_metrics(run.test_metrics):
        return "done"
    if (run.run_dir / FIT_DONE).is_file():
        return "test"
    return "restart"


def execute(run: Run, say) -> dict[str, Any]:
    """Brings ``run`` to done (fit and/or test as needed); its record for the JSON."""
    state = _state(run)
    name = f"{run.label} seed {run.seed}"
    if state == "restart":
        say(f"{name}: interrupted during fit: deleting {run.run_dir} and starting this run again from scratch")
        shutil.rmtree(run.run_dir)
        state = "new"
    if state == "new":
        run.run_dir.mkdir(parents=True)
        (run.run_dir / RUN_FILE).write_text(json.dumps({"settings": run.settings, "created": dt.datetime.now()
                                                        .isoformat(timespec="seconds")}, indent=1) + "\n")
        say(f"{name}: fit -> {run.run_dir / 'fit.log'}")
        start = time.perf_counter()
        code = run_cli(run.fit_args(), run.run_dir / "fit.log")
        if code != 0:
            raise CompareError(f"{name}: fit failed (exit code {code}); see {run.run_dir / 'fit.log'}")
        best = best_checkpoint(run)
        (run.run_dir / FIT_DONE).write_text(json.dumps({"best_checkpoint": str(best),
                                                        "fit_seconds": round(time.perf_counter() - start, 1)}) + "\n")
        state = "test"
    fit = json.loads((run.run_dir / FIT_DONE).read_text(encoding="utf-8"))
    best = fit["best_checkpoint"]
    if state == "test":
        shutil.rmtree(run.run_dir / "test", ignore_errors=True)  # a test interrupted before its metrics
        say(f"{name}: test {best} -> {run.run_dir / 'test.log'}")
        start = time.perf_counter()
        code = run_cli(run.test_args(best), run.run_dir / "test.log")
        if code != 0 or not run.test_metrics.is_file():
            raise CompareError(f"{name}: test failed (exit code {code}); see {run.run_dir / 'test.log'}")
        (run.run_dir / "test.done").write_text(json.dumps({"test_seconds": round(time.perf_counter() - start, 1)})
                                               + "\n")
    else:
        say(f"{name}: done before, not rerun ({run.test_metrics})")
    metrics = read_test_metrics(run.test_metrics)
    if not metrics:
        raise CompareError(f"{run.test_metrics}: no test_* metric in it")
    metrics.update(read_best_validation(run.run_dir / FIT_METRICS))
    test_done = run.run_dir / "test.done"
    return {
        "label": run.label, "config": str(run.config), "seed": run.seed, "run_dir": str(run.run_dir),
        "best_checkpoint": best, "metrics_file": str(run.test_metrics), "metrics": metrics,
        "fit_seconds": fit.get("fit_seconds"),
        "test_seconds": json.loads(test_done.read_text())["test_seconds"] if test_done.is_file() else None,
        "fit_command": shown(run.fit_args()), "test_command": shown(run.test_args(best)),
    }


# ---- the table ------------------------------------------------------------------------------------------------------
def summarise(records: list[dict], labels: list[str], metrics: list[str] | None) -> list[dict]:
    rows = []
    for label in labels:
        runs = [r for r in records if r["label"] == label]
        names = metrics or [m for m in KNOWN_METRICS if any(m in r["metrics"] for r in runs)]
        row = {"label": label, "config": runs[0]["config"], "seeds": [r["seed"] for r in runs], "metrics": {}}
        for m in names:
            values = {r["seed"]: r["metrics"][m] for r in runs if m in r["metrics"]}
            vs = list(values.values())
            row["metrics"][m] = {
                "mean": statistics.fmean(vs) if vs else None,
                "std": statistics.stdev(vs) if len(vs) > 1 else None,  # sample standard deviation (n - 1)
                "n": len(vs), "values": {str(s): v for s, v in values.items()},
            }
        rows.append(row)
    return rows


def _num(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.4f}"


def markdown(rows: list[dict], records: list[dict], title: str, seeds: list[int], overrides: list[str]) -> str:
    metrics = list(dict.fromkeys(m for row in rows for m in row["metrics"]))
    lines = [f"# {title}", "",
             f"Written by `scripts/compare.py` on {dt.date.today().isoformat()}: {len(seeds)} seed(s) "
             f"({', '.join(map(str, seeds))}) per config; each cell is the mean ± sample standard deviation "
             "(n - 1) over the seeds of the test metric of the checkpoint chosen on validation, as logged "
             "(fractions, not percent); `best val_X` is that checkpoint's validation score (the best the fit "
             "logged).", ""]
    if overrides:
        lines += ["Overrides given to every run: `" + shlex.join(overrides) + "`", ""]
    lines += ["| config | seeds | " + " | ".join(metrics) + " |",
              "|---|---|" + "---|" * len(metrics)]
    for row in rows:
        cells = []
        for m in metrics:
            s = row["metrics"].get(m)
            cells.append("" if s is None or not s["n"] else f"{_num(s['mean'])} ± {_num(s['std'])}"
                         + (f" (n={s['n']})" if s["n"] != len(row["seeds"]) else ""))
        lines.append(f"| {row['label']} | {len(row['seeds'])} | " + " | ".join(cells) + " |")
    lines += ["", "## Every seed", "", "| config | seed | " + " | ".join(metrics) + " |",
              "|---|---|" + "---|" * len(metrics)]
    for row in rows:
        for seed in row["seeds"]:
            cells = [_num(row["metrics"][m]["values"].get(str(seed))) if m in row["metrics"] else "" for m in metrics]
            lines.append(f"| {row['label']} | {seed} | " + " | ".join(cells) + " |")
    lines += ["", "## Commands", "",
              "Each seed's cells come from its `test` command's `metrics.csv` (folder in the command); the `fit` "
              "command before it made the checkpoint (its resolved configuration: `fit/version_0/config.yaml` in the "
              "run folder). Run from the repository root.", ""]
    for r in records:
        lines += [f"**{r['label']}, seed {r['seed']}** (`{r['metrics_file']}`)", "", "```bash",
                  r["fit_command"], r["test_command"], "```", ""]
    return "\n".join(lines)


# ---- command line ---------------------------------------------------------------------------------------------------
def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "config"


def parse_args(argv: list[str]) -> argparse.Namespace:
    passthrough: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, passthrough = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", nargs="+", required=True, type=Path, help="config YAML files")
    p.add_argument("--labels", nargs="+", help="one row label per config (default: the config's file name)")
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3], help="seeds (default: 1 2 3)")
    p.add_argument("--out", type=Path, required=True, help="Markdown table to write (JSON beside it)")
    p.add_argument("--runs-dir", type=Path, required=True, help="folder of the runs (one sub-folder per run)")
    p.add_argument("--override", action="append", default=[], metavar="ARGS",
                   help="CLI arguments for every fit and test, e.g. --override=--trainer.max_epochs=10 (repeatable)")
    p.add_argument("--metrics", nargs="+", help=f"metrics to tabulate (default: those of {' '.join(KNOWN_METRICS)} "
                                                "that were logged)")
    p.add_argument("--title", help="the table's heading (default: the --out file name)")
    args = p.parse_args(argv)
    args.overrides = [a for o in args.override for a in shlex.split(o)] + passthrough
    if args.labels is None:
        args.labels = [c.stem for c in args.configs]
    if len(args.labels) != len(args.configs):
        p.error(f"--labels: {len(args.labels)} label(s) for {len(args.configs)} config(s)")
    if len(set(args.labels)) != len(args.labels):
        p.error("two configs have the same label: give --labels")
    if len(set(args.seeds)) != len(args.seeds):
        p.error("--seeds: a seed is given twice")
    return args


def code_provenance() -> dict:
    """The code that made a table: the git commit of this checkout (``dirty`` where files differ from it) and the
    versions of torch and Lightning, written into the table's JSON so a fresh table can be told from a stale one."""
    import lightning
    import torch

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    return {"commit": git("rev-parse", "HEAD") or None, "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
            "torch": torch.__version__, "lightning": lightning.__version__}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)

    def say(message: str) -> None:
        print(f"[compare] {message}", flush=True)

    code = code_provenance()  # before anything is written: the code the runs (and this table) are made by
    try:
        runs = []
        for config, label in zip(args.configs, args.labels):
            if not config.is_file():
                raise CompareError(f"{config}: config file not found")
            loaded = _load_config(config)
            digest = hashlib.sha256(config.read_bytes()).hexdigest()
            for seed in args.seeds:
                run_dir = args.runs_dir / _slug(label) / f"seed_{seed}"
                runs.append(Run(label, config, seed, run_dir, args.overrides, digest,
                                run_callbacks(loaded, config, run_dir)))
        records = [execute(run, say) for run in runs]
    except CompareError as err:
        sys.stderr.write(f"compare.py: {err}\n")
        return 1
    rows = summarise(records, args.labels, args.metrics)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(markdown(rows, records, args.title or args.out.stem, args.seeds, args.overrides) + "\n",
                        encoding="utf-8")
    json_path = args.out.with_suffix(".json")
    json_path.write_text(json.dumps({"code": code, "seeds": args.seeds, "overrides": args.overrides,
                                     "configs": rows, "runs": records}, indent=1) + "\n", encoding="utf-8")
    say(f"wrote {args.out} and {json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
