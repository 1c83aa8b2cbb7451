"""Length-bucketed batching that stays correct under DDP."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import torch.distributed as dist


class BucketBatchSampler:
    """Yields batches of indices of similar length (little padding).

    Training (``shuffle=True``): indices are sorted by length with random tie-breaking, cut into batches, and
    the batch order is shuffled; :meth:`set_epoch` (called by Lightning) reseeds each epoch. Evaluation
    (``shuffle=False``): a fixed order, sorted by length.

    Under ``torch.distributed`` each process takes every ``world_size``-th batch. For training the batch list is
    padded (by repeating batches) to a multiple of the world size so every process runs the same number of
    steps; for evaluation nothing is repeated, so every example is scored exactly once across processes.
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, shuffle: bool, seed: int = 0) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.lengths = list(lengths)
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _all_batches(self) -> list[list[int]]:
        rng = random.Random(self.seed + self.epoch)
        keys = [(n, rng.random() if self.shuffle else i) for i, n in enumerate(self.lengths)]
        order = sorted(range(len(self.lengths)), key=keys.__getitem__)
        batches = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        if self.shuffle:
            rng.shuffle(batches)
        return batches

    @staticmethod
    def _world() -> tuple[int, int]:
        if dist.is_available() and dist.is_initialized():
            return dist.get_world_size(), dist.get_rank()
        return 1, 0

    def _my_batches(self) -> list[list[int]]:
        batches = self._all_batches()
        world, rank = self._world()
        if world > 1 and self.shuffle and batches and len(batches) % world:
            # cyclic: with fewer batches than processes, batches[:k] alone would leave some processes without any
            batches += [batches[i % len(batches)] for i in range(world - len(batches) % world)]
        return batches[rank::world]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self._my_batches())

    def __len__(self) -> int:
        world, rank = self._world()
        n = -(-len(self.lengths) // self.batch_size)
        if world == 1:
            return n
        if self.shuffle:
            return -(-n // world)
        return len(range(rank, n, world))
