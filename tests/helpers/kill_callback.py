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


class SigintAt(Callback):
    """Sends SIGINT (a real Ctrl-C) to its own process once, at ``moment`` of the batch whose optimizer step is
    number ``step + 1``: ``batch_start`` (the batch fetched, nothing of it run: as an interrupt while the loader
    fetches), ``step`` (after its backward, before the optimizer's update), ``after_step`` (the update done, in the
    batch's end hooks) or ``validation`` (in the first validation batch after that step)."""

    MOMENTS = ("batch_start", "step", "after_step", "validation")  # and "sanity": in the sanity check

    def __init__(self, step: int, moment: str) -> None:
        assert moment in (*self.MOMENTS, "sanity"), moment
        self.step, self.moment, self.sent = step, moment, False

    def _send(self, moment: str, now: bool) -> None:
        if moment == self.moment and now and not self.sent:
            self.sent = True
            os.kill(os.getpid(), signal.SIGINT)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._send("batch_start", trainer.global_step == self.step)

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        self._send("step", trainer.global_step == self.step)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._send("after_step", trainer.global_step == self.step + 1)

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
        self._send("validation", not trainer.sanity_checking and trainer.global_step > self.step)
        self._send("sanity", trainer.sanity_checking)
