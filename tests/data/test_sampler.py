"""BucketBatchSampler: each index once per epoch, little padding, deterministic epochs, simulated DDP ranks."""

from __future__ import annotations

import random

import pytest

from onlstm_tasks.data.core.sampler import BucketBatchSampler
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
    monkeypatch.setattr("onlstm_tasks.data.core.sampler.process_world", lambda: (world, rank))


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


def rank_batches(monkeypatch, lengths: list[int], batch_size: int, world: int) -> list[list[list[int]]]:
    """Evaluation batches of every simulated rank, checking on each that ``len`` agrees with iteration."""
    per_rank = []
    for rank in range(world):
        use_world(monkeypatch, world, rank)
        sampler = BucketBatchSampler(lengths, batch_size, shuffle=False)
        batches = list(sampler)
        assert len(sampler) == len(batches), (rank, len(sampler), len(batches))
        per_rank.append(batches)
    return per_rank


@pytest.mark.parametrize(
    ("n_examples", "batch_size", "world"),
    [(2, 32, 2), (3, 32, 2), (3, 32, 3), (5, 32, 4), (9, 4, 4), (7, 3, 4), (8, 2, 5), (11, 4, 3), (12, 4, 2)],
)
def test_simulated_ddp_evaluation_gives_every_rank_a_batch(monkeypatch, n_examples, batch_size, world) -> None:
    # a rank without a batch skips its evaluation loop, and the others hang in the metrics' all-gather
    lengths = [(7 * i) % 5 + 1 for i in range(n_examples)]
    per_rank = rank_batches(monkeypatch, lengths, batch_size, world)
    assert all(per_rank), [len(b) for b in per_rank]
    flat = [i for batches in per_rank for b in batches for i in b]
    assert sorted(flat) == list(range(n_examples))  # each example exactly once
    assert all(1 <= len(b) <= batch_size for batches in per_rank for b in batches)
    full_batches = -(-n_examples // batch_size)
    total = sum(len(batches) for batches in per_rank)
    if full_batches >= world:  # enough batches already: the usual cut, untouched
        assert total == full_batches
    else:  # one batch per rank, as even as possible, each a run of the length-sorted order
        assert total == world and all(len(batches) == 1 for batches in per_rank)
        sizes = [len(batches[0]) for batches in per_rank]
        assert max(sizes) - min(sizes) <= 1
        ordered = [i for batches in per_rank for i in batches[0]]
        assert ordered == sorted(range(n_examples), key=lambda i: (lengths[i], i))


@pytest.mark.parametrize(("n_examples", "world"), [(1, 2), (2, 3), (3, 8)])
def test_simulated_ddp_evaluation_rejects_fewer_examples_than_processes(monkeypatch, n_examples, world) -> None:
    for rank in range(world):
        use_world(monkeypatch, world, rank)
        sampler = BucketBatchSampler([3] * n_examples, 32, shuffle=False)
        message = f"{n_examples} examples on {world} processes"
        with pytest.raises(ValueError, match=message):
            list(sampler)
        with pytest.raises(ValueError, match=message):
            len(sampler)
    # training repeats batches instead (every rank gets one), and a single process needs no second example
    assert len(list(BucketBatchSampler([3] * n_examples, 32, shuffle=True))) == 1
    use_world(monkeypatch, 1, 0)
    assert len(BucketBatchSampler([3] * n_examples, 32, shuffle=False)) == 1


def test_simulated_ddp_evaluation_of_an_empty_split_is_empty_on_every_rank(monkeypatch) -> None:
    assert rank_batches(monkeypatch, [], 32, 3) == [[], [], []]


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


def test_lightning_reaches_the_epoch_of_the_training_loader() -> None:
    """Lightning's fit loop calls ``set_epoch`` on a loader's ``sampler`` and ``batch_sampler.sampler`` only (not on
    a batch sampler): the loader of every training run must still see each new epoch, or every epoch shuffles
    alike."""
    from lightning.fabric.utilities.data import _set_sampler_epoch

    from onlstm_tasks.data.core.base import bucket_loader

    loader = bucket_loader([3, 5, 2, 7, 4, 6] * 5, 4, shuffle=True, seed=0, collate=lambda ids: ids)
    first = list(loader)
    _set_sampler_epoch(loader, 1)
    assert loader.batch_sampler.epoch == 1
    assert list(loader) != first


def test_batch_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        BucketBatchSampler([1, 2], 0, shuffle=False)


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("max_tokens", [8, 20, 64])
def test_a_token_budget_caps_padded_tokens_and_keeps_every_index_once(shuffle, max_tokens) -> None:
    sampler = BucketBatchSampler(SMALL * 3, batch_size=6, shuffle=shuffle, seed=1, max_tokens=max_tokens)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert sorted(i for b in batches for i in b) == list(range(len(SMALL) * 3))
        assert all(len(b) <= 6 and len(b) * max(SMALL[i % len(SMALL)] for i in b) <= max_tokens for b in batches)
        assert len(batches) == len(sampler)


def test_a_token_budget_gives_short_sentences_more_rows() -> None:
    lengths = [2] * 40 + [10] * 8
    sizes = {max(lengths[i] for i in b): len(b)
             for b in BucketBatchSampler(lengths, batch_size=32, shuffle=False, max_tokens=40)}
    assert sizes == {2: 20, 10: 4}  # 40 tokens: 20 rows of 2, 4 rows of 10 (batch_size 32 would allow more)


def test_a_token_budget_below_the_longest_sequence_is_refused() -> None:
    with pytest.raises(ValueError, match=r"max_tokens \(5\) must hold the longest sequence \(8 tokens\)"):
        BucketBatchSampler(SMALL, batch_size=4, shuffle=True, max_tokens=5)
