"""Batches cut from a split packed into flat tensors (:class:`onlstm_tasks.data.packed.PackedTokens`) equal those
:func:`onlstm_tasks.data.features.pad_tokens` builds sentence by sentence (the oracle): word ids, character ids,
mask, raw words, singleton flags and per-token values, at the same shapes."""

from __future__ import annotations

import random

import torch

from onlstm_tasks.data.features import pad_tokens
from onlstm_tasks.data.packed import PackedTokens


def random_split(n: int, seed: int = 0):
    rng = random.Random(seed)
    sentences, tags = [], []
    for _ in range(n):
        length = rng.randint(1, 9)
        words = ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(1, 7))) for _ in range(length)]
        chars = [[rng.randint(2, 9) for _ in w] if rng.random() > 0.1 else [] for w in words]  # some without
        sentences.append(([rng.randint(1, 30) for _ in words], chars, words))
        tags.append([rng.randint(0, 4) for _ in words])
    return sentences, tags


def test_packed_batches_equal_the_padded_ones():
    sentences, tags = random_split(50)
    packed = PackedTokens(sentences, {"tags": tags})
    singletons = torch.rand(31) > 0.5
    rng = random.Random(1)
    for _ in range(20):
        indices = rng.sample(range(50), rng.randint(1, 12))
        tokens, values = packed.batch(indices, singletons)
        want = pad_tokens([sentences[i] for i in indices], singletons)
        for name in ("word_ids", "char_ids", "mask", "singletons"):
            got, expected = getattr(tokens, name), getattr(want, name)
            assert got.shape == expected.shape and got.dtype == expected.dtype, name
            assert torch.equal(got, expected), name
        assert tokens.words == want.words
        expected_tags = torch.zeros_like(want.word_ids)
        for b, i in enumerate(indices):
            expected_tags[b, : len(tags[i])] = torch.tensor(tags[i])
        assert torch.equal(values["tags"], expected_tags)


def test_a_split_of_one_sentence_without_characters():
    packed = PackedTokens([([3], [[]], ["x"])])
    tokens, _ = packed.batch([0])
    want = pad_tokens([([3], [[]], ["x"])])
    assert torch.equal(tokens.char_ids, want.char_ids) and torch.equal(tokens.word_ids, want.word_ids)


def test_packed_heads_equal_heads_to_tensor():
    from onlstm_tasks.data.packed import padded_heads, tensor_form_heads
    from onlstm_tasks.trees.heads import heads_to_tensor

    trees = [[2, 0, 2], [0], [3, 3, 0, 3, 4]]
    sentences = [([1] * len(t), [[2]] * len(t), ["w"] * len(t)) for t in trees]
    packed = PackedTokens(sentences, {"heads": [tensor_form_heads(t, len(t)) for t in trees]})
    tokens, values = packed.batch([2, 0, 1])
    assert torch.equal(padded_heads(values["heads"], tokens.mask), heads_to_tensor([trees[2], trees[0], trees[1]]))
