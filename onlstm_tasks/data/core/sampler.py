"""Length-bucketed batching that stays correct under DDP."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import torch.distributed as dist


class EpochSetter:
    """A batch sampler's ``sampler`` attribute for Lightning's ``_set_sampler_epoch``, which calls ``set_epoch`` on
    a loader's ``sampler`` and its ``batch_sampler.sampler``, never on the batch sampler: without it every epoch
    would shuffle alike."""

    def __init__(self, owner: BucketBatchSampler) -> None:
        self.owner = owner

    def set_epoch(self, epoch: int) -> None:
        self.owner.set_epoch(epoch)


class BucketBatchSampler:
    """Yields batches of indices of similar length (little padding): ``batch_size`` rows at most and, with
    ``max_tokens`` (a token budget: rows times the batch's longest length), no more padded tokens than that, so that
    batches of short sentences hold more rows (the size a GPU wants) and batches of long ones fewer.

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
    uninterrupted run would have seen (:class:`~onlstm_tasks.data.core.resumable_loader.ResumableDataLoader`).
    """

    def __init__(self, lengths: Sequence[int], batch_size: int, shuffle: bool, seed: int = 0,
                 max_tokens: int | None = None) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if max_tokens is not None and max_tokens < max(lengths, default=0):
            raise ValueError(f"max_tokens ({max_tokens}) must hold the longest sequence ({max(lengths)} tokens)")
        self.lengths = list(lengths)
        self._items = [i for i, n in enumerate(self.lengths) if n > 0]  # what is batched
        self.batch_size, self.shuffle, self.seed = batch_size, shuffle, seed
        self.max_tokens = max_tokens
        self.epoch = 0
        self._skip = 0  # batches of ``self.epoch`` already done before a restore; used by the next iteration only
        self.sampler = EpochSetter(self)  # where Lightning calls set_epoch (it never calls a batch sampler's own)

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
        batches = [order[start:stop] for start, stop in self._cuts()]
        if self.shuffle:
            rng.shuffle(batches)
        return batches

    def _cuts(self) -> list[tuple[int, int]]:
        """``(start, stop)`` of each batch in the length-sorted order: ``batch_size`` rows at most, and with
        ``max_tokens`` at most that many padded tokens (rows times the batch's longest length). A function of the
        sorted lengths alone, so the same in every epoch and on every process."""
        ordered = sorted(self.lengths[i] for i in self._items)
        if self.max_tokens is None:
            return [(i, min(i + self.batch_size, len(ordered))) for i in range(0, len(ordered), self.batch_size)]
        cuts, start = [], 0
        for stop, length in enumerate(ordered):  # ascending: each new row is the batch's longest
            if stop - start == self.batch_size or (stop - start + 1) * length > self.max_tokens:
                cuts.append((start, stop))
                start = stop
        return cuts + ([(start, len(ordered))] if ordered else [])

    def _needs_one_batch_per_process(self, world: int) -> bool:
        """Evaluation under DDP with fewer batches than processes (but some examples): cut one batch per process."""
        n = len(self._items)
        if self.shuffle or world == 1 or n == 0 or len(self._cuts()) >= world:
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
        n = world if self._needs_one_batch_per_process(world) else len(self._cuts())
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
