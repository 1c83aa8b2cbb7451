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
    steps; for evaluation nothing is repeated, so every example is scored exactly once across processes. With
    fewer evaluation batches than processes the examples are instead cut into ``world_size`` smaller batches, one per
    process: a process without any batch would skip its whole evaluation loop and leave the others waiting for it
    in the metrics' all-gather. Evaluation therefore needs at least as many examples as processes (or none).

    An item of length 0 (an empty input line of ``predict``, kept so that output record N is input line N) is in
    no batch: there is nothing to run the model on.

    Resumable: the order is a pure function of ``(seed, epoch)`` and is computed when iteration starts (after
    Lightning's ``set_epoch``), so :meth:`load_state_dict` (``{"epoch": e, "batches_done": n}``) makes the next
    iteration continue epoch ``e`` at its batch ``n``: a run resumed mid-epoch sees the batches an
    uninterrupted run would have seen (:class:`~onlstm_tasks.data.resumable_loader.ResumableDataLoader`).
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, shuffle: bool, seed: int = 0) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.lengths = list(lengths)
        self._items = [i for i, n in enumerate(self.lengths) if n > 0]  # what is batched
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed
        self.epoch = 0
        self._skip = 0  # batches of ``self.epoch`` already done before a restore; used by the next iteration only

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self._skip = 0
        self.epoch = epoch

    def state_dict(self, batches_done: int) -> dict[str, int]:
        """Where training is: ``batches_done`` batches of epoch :attr:`epoch` (counted by the caller)."""
        return {"epoch": self.epoch, "batches_done": batches_done}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continues epoch ``state["epoch"]`` after its first ``state["batches_done"]`` batches (an epoch
        finished completely continues with the next epoch)."""
        self.epoch, self._skip = int(state["epoch"]), int(state["batches_done"])
        if self._skip >= len(self):
            self.epoch, self._skip = self.epoch + 1, 0

    @property
    def skipped(self) -> int:
        """How many batches the current (or next) iteration leaves out because a restored run had done them."""
        return self._skip

    def _all_batches(self, world: int) -> list[list[int]]:
        rng = random.Random(self.seed + self.epoch)
        keys = {i: (self.lengths[i], rng.random() if self.shuffle else i) for i in self._items}
        order = sorted(self._items, key=keys.__getitem__)
        if self._needs_one_batch_per_process(world):
            # contiguous runs of the sorted order, sizes differing by at most one, none empty (len(order) >= world)
            return [order[r * len(order) // world : (r + 1) * len(order) // world] for r in range(world)]
        batches = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        if self.shuffle:
            rng.shuffle(batches)
        return batches

    def _needs_one_batch_per_process(self, world: int) -> bool:
        """Evaluation under DDP with fewer batches than processes (but some examples): cut one batch per process."""
        n = len(self._items)
        if self.shuffle or world == 1 or n == 0 or -(-n // self.batch_size) >= world:
            return False
        if n < world:
            raise ValueError(
                f"cannot evaluate {n} examples on {world} processes: every process needs at least one example "
                f"(a process without a batch skips its evaluation loop and the others hang); use at most {n} "
                f"devices for this split"
            )
        return True

    def _my_batches(self) -> list[list[int]]:
        world, rank = process_world()
        batches = self._all_batches(world)
        if world > 1 and self.shuffle and batches and len(batches) % world:
            # cyclic: with fewer batches than processes, batches[:k] alone would leave some processes without any
            batches += [batches[i % len(batches)] for i in range(world - len(batches) % world)]
        return batches[rank::world]

    def __iter__(self) -> Iterator[list[int]]:
        # a generator: the order is computed at the first batch, after Lightning's set_epoch
        skip, self._skip = self._skip, 0
        yield from self._my_batches()[skip:]

    def __len__(self) -> int:
        world, rank = process_world()
        n = world if self._needs_one_batch_per_process(world) else -(-len(self._items) // self.batch_size)
        if world == 1:
            return n
        if self.shuffle:
            return -(-n // world)
        return len(range(rank, n, world))


def process_world() -> tuple[int, int]:
    """``(world size, rank)`` under ``torch.distributed``, else ``(1, 0)``."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0
