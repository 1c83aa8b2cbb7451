"""BucketBatchSampler: each index once per epoch, little padding, deterministic epochs, simulated DDP ranks."""

from __future__ import annotations

import random

import pytest

from onlstm_tasks.data.sampler import BucketBatchSampler
from onlstm_tasks.sample_data import sample_path


def sample_lengths(split: str = "train") -> list[int]:
    """Sentence lengths of the bundled sample, counted here (blank line between sentences)."""
    lengths, n = [], 0
    for line in (sample_path("ner") / f"{split}.txt").read_text(encoding="utf-8").split("\n"):
        if line.strip():
            n += 1
        elif n:
            lengths.append(n)
            n = 0
    return lengths + ([n] if n else [])


LENGTHS = sample_lengths()
SMALL = [5, 1, 3, 3, 8, 2, 7, 1, 4, 6, 2]  # 11 items: batches of 4 leave a short last batch


def padding(batches: list[list[int]], lengths: list[int]) -> int:
    return sum(len(b) * max(lengths[i] for i in b) - sum(lengths[i] for i in b) for b in batches)


def use_world(monkeypatch, world: int, rank: int) -> None:
    monkeypatch.setattr(BucketBatchSampler, "_world", staticmethod(lambda: (world, rank)))


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize(("lengths", "batch_size"), [(LENGTHS, 32), (SMALL, 4), (SMALL, 1), (SMALL, 50), ([], 3)])
def test_every_index_once_per_epoch(lengths, batch_size, shuffle) -> None:
    sampler = BucketBatchSampler(lengths, batch_size, shuffle=shuffle, seed=3)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
        assert all(1 <= len(b) <= batch_size for b in batches)
        assert sum(len(b) < batch_size for b in batches) <= 1  # only one batch may be short
        assert len(sampler) == len(batches) == -(-len(lengths) // batch_size)


@pytest.mark.parametrize("shuffle", [False, True])
def test_batches_hold_similar_lengths(shuffle) -> None:
    sampler = BucketBatchSampler(LENGTHS, 32, shuffle=shuffle, seed=0)
    batches = list(sampler)
    # every batch is a run of the length-sorted order: ranges of different batches overlap at most at an end
    spans = sorted((min(LENGTHS[i] for i in b), max(LENGTHS[i] for i in b)) for b in batches)
    assert all(hi <= next_lo for (_, hi), (next_lo, _) in zip(spans, spans[1:])), spans
    if not shuffle:  # evaluation order: sorted by length, ties in index order
        flat = [i for b in batches for i in b]
        assert flat == sorted(range(len(LENGTHS)), key=lambda i: (LENGTHS[i], i))

    order = list(range(len(LENGTHS)))
    random.Random(0).shuffle(order)
    random_batches = [order[i: i + 32] for i in range(0, len(order), 32)]
    assert padding(batches, LENGTHS) < 0.2 * padding(random_batches, LENGTHS)


def test_set_epoch_changes_the_training_order_deterministically() -> None:
    def epoch_batches(epoch: int, seed: int = 0) -> list[list[int]]:
        sampler = BucketBatchSampler(LENGTHS, 16, shuffle=True, seed=seed)
        sampler.set_epoch(epoch)
        return list(sampler)

    first = epoch_batches(0)
    assert list(BucketBatchSampler(LENGTHS, 16, shuffle=True, seed=0)) == first  # epoch 0 without set_epoch
    assert epoch_batches(0) == first and epoch_batches(1) == epoch_batches(1)
    assert epoch_batches(1) != first
    assert epoch_batches(0, seed=1) != first
    # ties are broken differently too, not just the batch order
    assert {frozenset(b) for b in epoch_batches(1)} != {frozenset(b) for b in first}

    sampler = BucketBatchSampler(LENGTHS, 16, shuffle=True)
    sampler.set_epoch(1)
    again = list(sampler)
    assert list(sampler) == again  # iterating twice in one epoch gives the same batches

    evaluation = BucketBatchSampler(LENGTHS, 16, shuffle=False)
    before = list(evaluation)
    evaluation.set_epoch(5)
    assert list(evaluation) == before  # evaluation order never changes


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize(("lengths", "batch_size"), [(LENGTHS, 32), (LENGTHS, 50), (SMALL, 4), (SMALL, 3)])
def test_simulated_ddp_evaluation_scores_each_example_once(monkeypatch, world, lengths, batch_size) -> None:
    union = []
    for rank in range(world):
        use_world(monkeypatch, world, rank)
        sampler = BucketBatchSampler(lengths, batch_size, shuffle=False)
        batches = list(sampler)
        assert len(sampler) == len(batches)
        union += [i for b in batches for i in b]
    assert sorted(union) == list(range(len(lengths)))


@pytest.mark.parametrize("world", [2, 3, 4])
@pytest.mark.parametrize(("lengths", "batch_size"), [(LENGTHS, 32), (LENGTHS, 50), (SMALL, 4), (SMALL, 3),
                                                     (SMALL, 11), (SMALL, 20)])
def test_simulated_ddp_training_same_steps_on_every_rank(monkeypatch, world, lengths, batch_size) -> None:
    for epoch in (0, 1):
        per_rank = []
        for rank in range(world):
            use_world(monkeypatch, world, rank)
            sampler = BucketBatchSampler(lengths, batch_size, shuffle=True, seed=7)
            sampler.set_epoch(epoch)
            batches = list(sampler)
            assert len(sampler) == len(batches), (rank, len(sampler), len(batches))
            per_rank.append(batches)
        assert len({len(b) for b in per_rank}) == 1, [len(b) for b in per_rank]  # otherwise DDP hangs
        assert len(per_rank[0]) >= 1
        covered = {i for batches in per_rank for b in batches for i in b}
        assert covered == set(range(len(lengths)))
        # only padding batches repeat: at most world - 1 of them
        total = sum(len(batches) for batches in per_rank)
        assert total - -(-len(lengths) // batch_size) < world


def test_batch_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        BucketBatchSampler([1, 2], 0, shuffle=False)
