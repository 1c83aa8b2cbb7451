"""Start-up time of the ``onlstm-tasks`` command: wall seconds of ``--help``, ``fit --help`` (with a config, and
Lightning's ``--help-trainer``) and a ``predict`` of one sentence, beside the floor set by importing Lightning alone,
each the median of ``--repeats`` fresh processes.

    python scripts/benchmark_startup.py                       # this checkout
    git worktree add ../onlstm-before beca96a                 # another checkout of the project
    python scripts/benchmark_startup.py --repo ../onlstm-before

The predict runs the quickstart config on a checkpoint trained here first (one epoch of the bundled sample, in a
temporary folder; ``--ckpt`` gives one instead). Commands run as ``python -m onlstm_tasks.cli`` with the checkout on
``PYTHONPATH``, from the checkout's folder.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], repo: Path, repeats: int) -> float:
    """Median wall seconds of ``cmd`` over ``repeats`` runs (each must succeed)."""
    env = {**os.environ, "PYTHONPATH": str(repo)}
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return statistics.median(times)


def train_checkpoint(repo: Path, folder: Path) -> Path:
    cmd = [sys.executable, "-m", "onlstm_tasks.cli", "fit", "--config", "configs/quickstart.yaml",
           "--trainer.max_epochs", "1", "--test_after_fit", "false", "--trainer.default_root_dir", str(folder),
           "--trainer.logger.init_args.save_dir", str(folder)]
    subprocess.run(cmd, cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)}, check=True, capture_output=True)
    return next(folder.rglob("best.ckpt"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=REPO, help="checkout of the project to time (default: this one)")
    ap.add_argument("--ckpt", type=Path, help="quickstart checkpoint for predict (default: trained here first)")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    repo = args.repo.resolve()
    cli = [sys.executable, "-m", "onlstm_tasks.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ckpt = args.ckpt.resolve() if args.ckpt else train_checkpoint(repo, folder)
        sentence = folder / "one.txt"
        sentence.write_text("Anna Smith flew from Paris to Berlin .\n")
        rows = {
            "python -c 'import lightning.pytorch.cli' (the floor)": [sys.executable, "-c", "import lightning.pytorch.cli"],
            "onlstm-tasks --help": [*cli, "--help"],
            "onlstm-tasks fit --help": [*cli, "fit", "--help"],
            "onlstm-tasks fit --help --config configs/quickstart.yaml": [*cli, "fit", "--help", "--config",
                                                                          "configs/quickstart.yaml"],
            "onlstm-tasks fit --help-trainer (Lightning's)": [*cli, "fit", "--help-trainer"],
            "onlstm-tasks predict (one sentence)": [
                *cli, "predict", "--config", "configs/quickstart.yaml", "--ckpt_path", str(ckpt),
                "--data.init_args.path", "null", "--data.init_args.predict_file", str(sentence),
                "--trainer.default_root_dir", str(folder / "predict")],
        }
        print(f"# start-up of {repo} ({platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
              f"median of {args.repeats} runs)")
        for name, cmd in rows.items():
            print(f"{name:<55} {timed(cmd, repo, args.repeats):6.2f} s")


if __name__ == "__main__":
    main()
