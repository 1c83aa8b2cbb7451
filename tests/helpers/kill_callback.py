"""A callback for the resume test: kills its own process (like an OOM kill or Ctrl-\\) after a given step."""

import os
import signal

from lightning.pytorch.callbacks import Callback


class KillAtStep(Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step >= self.step:
            os.kill(os.getpid(), signal.SIGKILL)


class RecordStartStep(Callback):
    """Writes the global step at which training (re)starts to ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path

    def on_train_start(self, trainer, pl_module) -> None:
        with open(self.path, "a") as f:
            f.write(f"{trainer.global_step}\n")


class TermAtStep(Callback):
    """Sends SIGTERM to its own process once ``step`` optimizer steps are done (a scheduler's preemption)."""

    def __init__(self, step: int) -> None:
        self.step = step
        self.sent = False

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step >= self.step and not self.sent:
            self.sent = True
            os.kill(os.getpid(), signal.SIGTERM)
