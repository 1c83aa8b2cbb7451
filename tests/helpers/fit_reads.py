"""Host reads per training step of a real ``Trainer.fit``: :class:`StepHostReads` counts, with
:func:`helpers.host_reads.count_host_reads` (``tests/helpers``), every read between one training batch's start and the next's (the
step, its backward, the optimiser, every callback, logging and the progress bar), leaving out the data loader's
fetch (CPU work on CPU tensors before the batch goes to the device: no wait on a GPU) and the intervals that hold a
validation or an epoch's end (once per validation or epoch, not per step)."""

from __future__ import annotations

import contextlib

from lightning.pytorch.callbacks import Callback
from torch.utils.data import dataloader

from helpers.host_reads import count_host_reads


class StepHostReads(Callback):
    current = None  # the counting instance, for the loader's pause

    def __init__(self) -> None:
        self.steps: list = []  # (global step, HostReads) of each complete step interval
        self._open = None

    def _close(self, keep: bool) -> None:
        if self._open is not None:
            context, reads, clean, step = self._open
            context.__exit__(None, None, None)
            if keep and clean:
                self.steps.append((step, reads))
        self._open = None
        StepHostReads.current = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._close(keep=True)
        context = count_host_reads()
        self._open = [context, context.__enter__(), True, trainer.global_step]
        StepHostReads.current = self

    def _spoil(self, *args) -> None:
        if self._open is not None:
            self._open[2] = False

    on_validation_start = on_train_epoch_end = _spoil

    def on_train_end(self, trainer, pl_module) -> None:
        self._close(keep=False)  # the last interval runs into the end of training

    @contextlib.contextmanager
    def paused(self):
        reads = self._open[1] if self._open is not None else None
        if reads is not None:
            reads.paused = True
        try:
            yield
        finally:
            if reads is not None:
                reads.paused = False


def pause_during_loader_fetch(monkeypatch) -> None:
    """The data loader's ``__next__`` (collate included) is not counted."""
    original = dataloader._BaseDataLoaderIter.__next__

    def fetch(self):
        counter = StepHostReads.current
        with counter.paused() if counter is not None else contextlib.nullcontext():
            return original(self)

    monkeypatch.setattr(dataloader._BaseDataLoaderIter, "__next__", fetch)
