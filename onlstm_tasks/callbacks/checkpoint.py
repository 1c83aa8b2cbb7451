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
      saved weights (``batch_progress.current.completed``): a Ctrl-C in the middle of a step redoes that batch.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._last_written_step = -1
        self._rng_to_restore: dict | None = None

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
            self._write_last(trainer)
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
        fit_state = checkpoint.get("loops", {}).get("fit_loop", {}).get("state_dict", {})
        for state in fit_state.get("combined_loader", []):
            if "batches_done" in state:
                state["batches_done"] = completed

    def on_load_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        super().on_load_checkpoint(trainer, pl_module, checkpoint)
        self._rng_to_restore = checkpoint.get(STATE_KEY, {}).get("rng")
        self._last_written_step = checkpoint.get("global_step", -1)
        csv_history.restore(trainer.loggers, checkpoint.get("global_step", 0))

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self._rng_to_restore is not None:
            _set_rng_states(self._rng_to_restore)
            self._rng_to_restore = None


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
