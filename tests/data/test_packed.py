"""Batches cut from a split packed into flat tensors (:class:`onlstm_tasks.data.core.packed.PackedTokens`) equal those
:func:`onlstm_tasks.data.core.features.pad_tokens` builds sentence by sentence (the oracle): word ids, character ids,
mask, raw words, singleton flags and per-token values, at the same shapes."""

from __future__ import annotations

import random

import torch

from onlstm_tasks.data.core.features import pad_tokens
from onlstm_tasks.data.core.packed import PackedTokens


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
    from onlstm_tasks.data.core.packed import padded_heads, tensor_form_heads
    from onlstm_tasks.trees.heads import heads_to_tensor

    trees = [[2, 0, 2], [0], [3, 3, 0, 3, 4]]
    sentences = [([1] * len(t), [[2]] * len(t), ["w"] * len(t)) for t in trees]
    packed = PackedTokens(sentences, {"heads": [tensor_form_heads(t, len(t)) for t in trees]})
    tokens, values = packed.batch([2, 0, 1])
    assert torch.equal(padded_heads(values["heads"], tokens.mask), heads_to_tensor([trees[2], trees[0], trees[1]]))


def test_padding_to_a_multiple_pads_and_changes_nothing_else():
    sentences, tags = random_split(30, seed=3)
    packed = PackedTokens(sentences, {"tags": tags})
    indices = [0, 4, 7, 9]
    plain, plain_values = packed.batch(indices)
    padded, padded_values = packed.batch(indices, pad_to=8)
    assert padded.word_ids.size(1) % 8 == 0 and padded.char_ids.size(2) % 8 == 0
    steps, width = plain.char_ids.shape[1:]
    assert torch.equal(padded.word_ids[:, :steps], plain.word_ids) and not padded.word_ids[:, steps:].any()
    assert torch.equal(padded.char_ids[:, :steps, :width], plain.char_ids) and padded.char_ids.sum() == \
        plain.char_ids.sum()
    assert torch.equal(padded.mask[:, :steps], plain.mask) and not padded.mask[:, steps:].any()
    assert torch.equal(padded_values["tags"][:, :steps], plain_values["tags"])


def test_a_tagger_scores_a_batch_padded_to_a_multiple_as_the_plain_one():
    """Padding invariance through the whole NER network (char CNN, ON-LSTM, CRF): the loss of a batch padded to a
    multiple of 8 (length and word width) equals the plain batch's."""
    import functools

    from onlstm_tasks.data.ner.module import NERDataModule
    from onlstm_tasks.embedders.word_char import WordCharEmbedder
    from onlstm_tasks.encoders import ONLSTM
    from onlstm_tasks.sample_data import sample_path
    from onlstm_tasks.tasks.ner import NERTagger

    losses = []
    for multiple in (1, 8):
        dm = NERDataModule(path=str(sample_path("ner")), data_dir=None, revision=None, format="columns",
                           reader_options={"scheme": "iob2"}, batch_size=8, pad_to_multiple_of=multiple)
        dm.setup("fit")
        batch = next(iter(dm.val_dataloader()))
        torch.manual_seed(0)
        model = NERTagger(dm.word_vocab, dm.char_vocab, dm.labels, encoder=functools.partial(
            ONLSTM, hidden_size=16, chunk_size=4, bidirectional=True),
            embedder=functools.partial(WordCharEmbedder, word_dim=8, char_dim=4, char_features=8)).eval()
        with torch.no_grad():
            losses.append(model.net.loss(batch.tokens, batch.tags))
    assert batch.tokens.word_ids.size(1) % 8 == 0
    torch.testing.assert_close(losses[0], losses[1])
