"""Where the time of a real ``onlstm-tasks fit`` step goes: the host's time in each phase of Lightning's step, against
the time the device's kernels take, per training step. On a GPU the host only queues kernels, so where a step's
wall time is far above its kernels' time, the host bounds training, and the phases say where its time goes.

    python scripts/step_anatomy.py --config configs/ner/ontonotes_onlstm_crf.yaml --steps 40 [--warmup 10] \\
        [-- EXTRA CLI ARGUMENTS]

Host phases (``time.perf_counter`` at Lightning's callback hooks, no device sync): the forward (``training_step``:
batch start to ``on_before_backward``), the backward, the optimizer's part (clipping, the step and ``zero_grad``: to
the batch end), and between steps (Lightning's loop and callbacks, the loader's next batch, its move to the
device). The four partition the step's wall time, batch start to batch start; on a GPU that is host time, as nothing
waits for the device unless the host must. The kernels' time: the sum of every CUDA kernel's duration in a
``torch.profiler`` trace of the same steps (only on a GPU; on a CPU the operations run on the host and the column
says so). Prints milliseconds per step, the mean over the measured steps (after ``--warmup`` steps). Validation,
checkpoints and the test after fit are off; the run writes into a temporary folder.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
from lightning.pytorch.callbacks import Callback

from short_fit import short_fit  # scripts/, beside this one

PHASES = ("forward", "backward", "optimizer", "between steps")


class StepClock(Callback):
    """Host time per phase of each measured step (steps ``warmup`` to ``steps - 2``: each up to the next batch's
    start; the last step has none), and a ``torch.profiler`` trace of CUDA kernels over steps ``warmup`` to
    ``steps - 1`` on a GPU."""

    def __init__(self, warmup: int, steps: int) -> None:
        self.warmup, self.steps = warmup, steps
        self.times: dict[str, list[float]] = {phase: [] for phase in PHASES}
        self.walls: list[float] = []  # batch start to the next batch start
        self.kernel_ms: float | None = None  # per step, on a GPU
        self._marks: dict[str, float] = {}
        self._step = -1
        self._profiler = None

    def _measured(self) -> bool:
        return self.warmup <= self._step < self.steps

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        now = time.perf_counter()
        if self._measured():  # the step before this one, whole: its phases partition its wall time
            marks = self._marks
            self.times["forward"].append(marks["backward"] - marks["start"])
            self.times["backward"].append(marks["optimizer"] - marks["backward"])
            self.times["optimizer"].append(marks["end"] - marks["optimizer"])
            self.times["between steps"].append(now - marks["end"])
            self.walls.append(now - marks["start"])
        self._step = trainer.global_step  # the step this batch takes
        if self._step == self.warmup and pl_module.device.type == "cuda":
            self._profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
            self._profiler.__enter__()
        self._marks = {"start": time.perf_counter()}

    def on_before_backward(self, trainer, pl_module, loss) -> None:
        self._marks["backward"] = time.perf_counter()

    def on_after_backward(self, trainer, pl_module) -> None:
        self._marks["optimizer"] = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._marks["end"] = time.perf_counter()
        if self._step == self.steps - 1 and self._profiler is not None:
            torch.cuda.synchronize()
            self._profiler.__exit__(None, None, None)
            kernels = [e for e in self._profiler.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            self.kernel_ms = sum(e.device_time_total for e in kernels) / 1e3 / (self.steps - self.warmup)
            self._profiler = None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("extra", nargs="*", help="more CLI arguments (after --)")
    args = parser.parse_args()
    if args.steps <= args.warmup + 1:
        parser.error("--steps must exceed --warmup by at least 2")
    clock = StepClock(args.warmup, args.steps)

    short_fit(args.config, args.steps, clock, ["--trainer.enable_progress_bar", "false", *args.extra])
    means = {phase: 1e3 * statistics.fmean(times) for phase, times in clock.times.items() if times}
    if len(means) < len(PHASES) or not clock.walls:
        print(f"step_anatomy {args.config}: too few measured steps ({dict(clock.times)})")
        return 1
    wall = 1e3 * statistics.fmean(clock.walls)
    kernels = f"{clock.kernel_ms:.2f}" if clock.kernel_ms is not None else "n/a (no GPU: the host runs the operations)"
    print(f"step_anatomy {args.config}: steps {args.warmup}-{args.steps - 2}, ms per step: wall {wall:.2f}; "
          + ", ".join(f"{phase} {ms:.2f}" for phase, ms in means.items())
          + f"; device kernels {kernels}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
