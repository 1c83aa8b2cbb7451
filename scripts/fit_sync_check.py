"""Host syncs of a real ``onlstm-tasks fit`` on a GPU: ``torch.cuda.set_sync_debug_mode("warn")`` from the end of
the warm-up steps to the end of training, every sync warning recorded with the global step it came in. Prints the
syncs per step, split into logging steps (every ``log_every_n_steps``, where Lightning hands the logged loss to the
loggers: a read by design) and the others (0 expected), with their sites; exit 1 if any other step synced.

    python scripts/fit_sync_check.py --config configs/ner/ontonotes_onlstm_crf.yaml --steps 40 \\
        [--warmup 5] [-- EXTRA CLI ARGUMENTS]

Validation, checkpoints and the test after fit are off; the run writes into a temporary folder. Needs CUDA."""

from __future__ import annotations

import argparse
import collections
import sys
import warnings
from pathlib import Path

import torch
from lightning.pytorch.callbacks import Callback

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # helpers.cuda_syncs: what counts as a sync
from helpers.cuda_syncs import is_sync  # noqa: E402
from short_fit import short_fit  # noqa: E402 - scripts/, beside this one


class SyncWarnings(Callback):
    def __init__(self, warmup: int) -> None:
        self.warmup = warmup
        self.by_step: collections.Counter = collections.Counter()
        self.sites: collections.Counter = collections.Counter()
        self.step = -1
        self._original = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.step = trainer.global_step
        if self.step == self.warmup and self._original is None:
            torch.cuda.synchronize()
            self._original = warnings.showwarning
            warnings.simplefilter("always")
            warnings.showwarning = self._record
            torch.cuda.set_sync_debug_mode("warn")

    def _record(self, message, category, filename, lineno, file=None, line=None) -> None:
        if is_sync(message):  # not torch's notice that the mode is a prototype (helpers.cuda_syncs)
            self.by_step[self.step] += 1
            self.sites[f"{filename}:{lineno}"] += 1
        else:
            self._original(message, category, filename, lineno, file, line)

    def on_train_end(self, trainer, pl_module) -> None:
        torch.cuda.set_sync_debug_mode("default")
        if self._original is not None:
            warnings.showwarning = self._original


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("extra", nargs="*", help="more CLI arguments (after --)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("fit_sync_check: no CUDA device (set_sync_debug_mode watches CUDA syncs only)")
        return 0
    counter = SyncWarnings(args.warmup)

    short_fit(args.config, args.steps, counter, ["--trainer.log_every_n_steps", str(args.log_every), *args.extra])
    measured = range(args.warmup, args.steps)
    logging = [s for s in measured if (s + 1) % args.log_every == 0]
    other = sum(counter.by_step[s] for s in measured if s not in logging)
    print(f"fit_sync_check {args.config}: {len(measured)} measured steps; syncs at the {len(logging)} logging steps "
          f"{sum(counter.by_step[s] for s in logging)}, at the other steps {other}; sites: {dict(counter.sites)}")
    return 1 if other else 0


if __name__ == "__main__":
    sys.exit(main())
