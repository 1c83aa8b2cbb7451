"""``train_sentences``: a language model can train on a seeded random subset of its training sentences."""

from __future__ import annotations

import pytest

from helpers.lm import text_data, write_toy_corpus
from onlstm_tasks.data.lm.module import LanguageModelDataModule


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, str]:
    return write_toy_corpus(tmp_path_factory.mktemp("toy"), {"train": 200, "validation": 20, "test": 20})


def train_of(corpus, **options) -> list[list[str]]:
    data = LanguageModelDataModule(**text_data(corpus, **options))
    return data.splits()["train"], data


def test_the_subset_is_seeded_in_corpus_order_and_gives_the_vocabulary(corpus, caplog):
    full, _ = train_of(corpus)
    subset, data = train_of(corpus, train_sentences=30, seed=3)
    assert len(subset) == 30 and len(full) > 30
    positions = [full.index(s) for s in subset]  # every subset sentence comes from the full split ...
    assert positions == sorted(positions)  # ... in corpus order
    assert train_of(corpus, train_sentences=30, seed=3)[0] == subset
    assert train_of(corpus, train_sentences=30, seed=4)[0] != subset
    assert set(data.vocabulary().itos[3:]) == {w for s in subset for w in s}
    assert data.splits()["validation"] == train_of(corpus)[1].splits()["validation"]  # other splits untouched


def test_a_subset_larger_than_the_split_keeps_it_all_and_bad_sizes_are_refused(corpus):
    full, _ = train_of(corpus)
    assert train_of(corpus, train_sentences=10 ** 6)[0] == full
    with pytest.raises(ValueError, match="train_sentences"):
        LanguageModelDataModule(**text_data(corpus, train_sentences=0))
