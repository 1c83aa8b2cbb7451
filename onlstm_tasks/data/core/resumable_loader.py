"""A training DataLoader that Lightning can checkpoint and restore mid-epoch (its ``_Stateful`` interface)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from torch.utils.data import DataLoader

from .sampler import BucketBatchSampler

log = logging.getLogger(__name__)


class ResumableDataLoader(DataLoader):
    """A DataLoader over a :class:`BucketBatchSampler` with ``state_dict``/``load_state_dict``.

    Lightning saves the state of a training loader that has both methods in every checkpoint (``loops.fit_loop
    .state_dict.combined_loader``) and loads it before iterating again. The state is the sampler's epoch and the
    number of batches this loader has handed out in it; restored, the sampler skips those batches, so a run
    resumed mid-epoch continues with the very batch an uninterrupted run would have trained next.
    """

    batch_sampler: BucketBatchSampler

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.batches_done = 0

    def __iter__(self) -> Iterator:
        self.batches_done = self.batch_sampler.skipped
        if self.batches_done:
            log.debug("sampler epoch %d: skipping its first %d batches", self.batch_sampler.epoch, self.batches_done)
        for batch in super().__iter__():
            self.batches_done += 1
            yield batch

    def state_dict(self) -> dict[str, int]:
        return self.batch_sampler.state_dict(self.batches_done)

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.batch_sampler.load_state_dict(state)
