"""``ModelCheckpoint`` whose ``last.ckpt`` resumes exactly: written at every validation and on Ctrl-C / SIGTERM,
and carrying the RNG states and the logger's version folder."""

from __future__ import annotations

import logging
import random

import numpy as np
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities.exceptions import SIGTERMException

from . import csv_history

log = logging.getLogger(__name__)

STATE_KEY = "onlstm_tasks_resume"  # the checkpoint entry with the RNG states and the run's version folder


class ResumableCheckpoint(ModelCheckpoint):
    """Lightning's ``ModelCheckpoint`` (same arguments) with a ``last.ckpt`` a run can always resume from.

    - ``save_last`` writes ``last.ckpt`` at **every** validation (or training-epoch end). Lightning 2.6 writes it
      only when a top-k checkpoint was written at the same step, i.e. only when the monitored metric improved
      (and ``save_last="link"`` then points at that stale top-k file), so a run killed late resumed from its best
      epoch, not its last.
    - On ``KeyboardInterrupt`` and SIGTERM (Lightning turns SIGTERM into ``SIGTERMException`` after the current
      training batch) it writes ``last.ckpt`` only; Lightning's ``save_on_exception`` would write the interrupted
      state under the top-k name (``best.ckpt``) too.
    - The checkpoint carries the torch/CUDA/Python/NumPy RNG states, restored just before the first training
      batch after a resume (nothing draws on them in between, see ``data.base.bucket_loader``), and the logger's
      version, which ``--ckpt_path last`` (``callbacks/resume.py``) uses to continue in the same version folder.
    - The training loader's position (``ResumableDataLoader``) is set to the batches whose update is in the
      saved weights. A Ctrl-C in the middle of a batch settles it whole: before its optimizer step, the batch is
      redone from the RNG states it started with; after it (in the batch's callbacks, logging or the validation
      that follows), the loops' counters count it done, as an uninterrupted run does.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._last_written_step = -1
        self._rng_to_restore: dict | None = None
        # at the start of a batch: the RNG states, the global step, the batch's number (batches fetched) and the
        # batches that stepped (the logging step)
        self._batch_start: tuple[dict, int, int, int] | None = None
        self._interrupted = False

    # -- when last.ckpt is written --------------------------------------------------------------------------------
    def _save_last_checkpoint(self, trainer, monitor_candidates) -> None:
        if self.save_last == "link" and self._last_global_step_saved != trainer.global_step:
            # Lightning would link last.ckpt to the newest top-k file, which holds an older step: write it instead
            self.save_last = True
            try:
                super()._save_last_checkpoint(trainer, monitor_candidates)
            finally:
                self.save_last = "link"
        else:
            super()._save_last_checkpoint(trainer, monitor_candidates)
        self._last_written_step = trainer.global_step

    def _write_last(self, trainer) -> None:
        if (not self.save_last or trainer.fast_dev_run or trainer.sanity_checking
                or trainer.state.fn != TrainerFn.FITTING or self._last_written_step == trainer.global_step
                or trainer.global_step == 0):
            return
        self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))

    def on_validation_end(self, trainer, pl_module) -> None:
        super().on_validation_end(trainer, pl_module)
        if not self._should_save_on_train_epoch_end(trainer):
            self._write_last(trainer)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        super().on_train_epoch_end(trainer, pl_module)
        if self._should_save_on_train_epoch_end(trainer):
            self._write_last(trainer)

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        if isinstance(exception, (KeyboardInterrupt, SIGTERMException)):
            if trainer.global_step == 0:
                log.warning("%s before the first training step: nothing to resume (start the run again, without "
                            "--ckpt_path)", type(exception).__name__)
            self._interrupted = True
            try:
                self._write_last(trainer)
            finally:
                self._interrupted = False
            if self._last_written_step == trainer.global_step and self.last_model_path:
                log.warning("%s at global step %d: wrote %s (resume with --ckpt_path last)",
                            type(exception).__name__, trainer.global_step, self.last_model_path)
        super().on_exception(trainer, pl_module, exception)  # Lightning's save_on_exception, if asked for

    def setup(self, trainer, pl_module, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        self._fitting = stage == "fit"

    def load_state_dict(self, state_dict: dict) -> None:
        """Restores the top-k bookkeeping only when fitting (``fit --ckpt_path``): ``test``/``predict`` of a
        checkpoint use none of it, and Lightning would warn there that the run's folder has changed."""
        if getattr(self, "_fitting", True):
            super().load_state_dict(state_dict)

    # -- what else last.ckpt carries ------------------------------------------------------------------------------
    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        super().on_save_checkpoint(trainer, pl_module, checkpoint)
        logger = trainer.logger
        checkpoint[STATE_KEY] = {
            "rng": _rng_states(),
            "logger_version": None if logger is None else logger.version,
            "log_dir": None if logger is None or logger.log_dir is None else str(logger.log_dir),
        }
        completed = trainer.fit_loop.epoch_loop.batch_progress.current.completed
        fit_loop = checkpoint.get("loops", {}).get("fit_loop", {})
        if self._interrupted and self._batch_start is not None:
            completed = self._settle_interrupted_batch(trainer, checkpoint, fit_loop, completed)
        for state in fit_loop.get("state_dict", {}).get("combined_loader", []):
            if "batches_done" in state:
                state["batches_done"] = completed

    def _settle_interrupted_batch(self, trainer, checkpoint: dict, fit_loop: dict, completed: int) -> int:
        """A checkpoint written on an interrupt holds the interrupted batch whole or not at all, in the form of
        Lightning's loop counters that resumes as an uninterrupted run goes on. Returns the batches done in the
        epoch (the training loader's position).

        - No optimizer update yet (the batch's start, its step): the batch is not fetched yet in the counters, and
          is redone from the RNG states it started with (its dropout draws so far are undone).
        - The update is in the weights: the batch is done. Where a validation follows it (or was interrupted),
          the counters say "inside that validation, at its first batch", so the resumed run validates again from
          the start; elsewhere the next batch is the next to train.
        """
        rng_at_start, step_at_start, batch_number, stepped_batches = self._batch_start
        epoch_loop = trainer.fit_loop.epoch_loop
        progress = fit_loop.get("epoch_loop.batch_progress", {})
        loop_state = fit_loop.get("epoch_loop.state_dict", {})
        validating = trainer.state.stage is not None and trainer.state.stage.value == "validate"
        if batch_number != epoch_loop.batch_progress.total.ready and not validating:
            _set_counts(progress, "completed")  # interrupted before this batch's start reached us: nothing ran
            return completed
        if trainer.global_step == step_at_start:  # no update yet: the batch runs again, drawing the same numbers
            checkpoint[STATE_KEY]["rng"] = rng_at_start
            _set_counts(progress, "completed")
            return completed
        _set_counts(progress, "ready")
        done = progress.get("current", {}).get("completed", completed)
        if validating or _validation_due(trainer):
            loop_state["_batches_that_stepped"] = stepped_batches  # Lightning counts the batch after validating
            for part in ("total", "current"):
                counts = fit_loop.get("epoch_loop.val_loop.batch_progress", {}).get(part)
                if counts is not None:
                    counts.update(ready=1, started=1, processed=0, completed=0)
        else:
            loop_state["_batches_that_stepped"] = stepped_batches + 1
        return done

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        super().on_load_checkpoint(trainer, pl_module, checkpoint)
        self._rng_to_restore = checkpoint.get(STATE_KEY, {}).get("rng")
        self._last_written_step = checkpoint.get("global_step", -1)
        csv_history.restore(trainer.loggers, checkpoint.get("global_step", 0))

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self._rng_to_restore is not None:
            _set_rng_states(self._rng_to_restore)
            self._rng_to_restore = None
        if self.save_last:  # what an interrupt inside this batch writes instead of its half-drawn states
            epoch_loop = trainer.fit_loop.epoch_loop
            self._batch_start = (_rng_states(), trainer.global_step, epoch_loop.batch_progress.total.ready,
                                 epoch_loop._batches_that_stepped)


def _set_counts(progress: dict, to: str) -> None:
    """Every count of the loop's batch progress (ready, started, processed, completed; total and current) set to
    its ``to`` count: the interrupted batch undone (``completed``) or done (``ready``)."""
    for part in ("total", "current"):
        counts = progress.get(part)
        if counts:
            value = counts.get(to, 0)
            counts.update({key: value for key in ("ready", "started", "processed", "completed") if key in counts})


def _validation_due(trainer) -> bool:
    """Whether Lightning validates after the batch just trained (its own test, on the loop's data fetcher)."""
    fetcher = getattr(trainer.fit_loop, "_data_fetcher", None)
    try:
        return fetcher is not None and bool(trainer.fit_loop.epoch_loop._should_check_val_fx(fetcher))
    except Exception:  # noqa: BLE001 - a Lightning whose private test differs: no validation assumed
        return False


def _rng_states() -> dict:
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    states = {"torch": torch.get_rng_state(), "python": random.getstate(),
              "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss)}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def _set_rng_states(states: dict) -> None:
    torch.set_rng_state(states["torch"])
    version, internal, gauss = states["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, gauss = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
