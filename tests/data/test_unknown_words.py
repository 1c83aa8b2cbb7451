"""Unknown-word training (``unk_replace``: singleton replacement, ``word_dropout``) and frozen pretrained rows
(``fine_tune='unfound'``) of the word embedding."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from onlstm_tasks.data.core.batching import TokenBatch
from onlstm_tasks.data.core.features import WordNormalizer, build_vocabularies, pad_tokens
from onlstm_tasks.data.core.examples import Example
from onlstm_tasks.data.ner.module import NERDataModule
from onlstm_tasks.embedders.word import WordEmbedding
from onlstm_tasks.embedders.word_char import WordCharEmbedder
from onlstm_tasks.sample_data import sample_path

VOCAB = ["<pad>", "<unk>", "the", "cat", "sat", "Zyx"]


def batch(ids: list[list[int]], singletons: list[list[bool]] | None = None) -> TokenBatch:
    word_ids = torch.tensor(ids)
    mask = word_ids != 0
    return TokenBatch(word_ids=word_ids, char_ids=torch.ones(*word_ids.shape, 1, dtype=torch.long), mask=mask,
                      words=[["w"] * int(m.sum()) for m in mask],
                      singletons=None if singletons is None else torch.tensor(singletons))


def unk_grad(embedding: WordEmbedding, tokens: TokenBatch) -> torch.Tensor:
    embedding.zero_grad()
    embedding(tokens).sum().backward()
    return embedding.embedding.weight.grad[1]


@pytest.mark.parametrize("option", ["word_dropout", "unk_replace"])
def test_unk_row_gets_gradient_in_training_and_none_in_evaluation(option):
    torch.manual_seed(0)
    embedding = WordEmbedding(VOCAB, dim=4, **{option: 0.5})
    tokens = batch([[2, 3, 4, 5] * 8, [2, 3, 0, 0] * 8], singletons=[[False, True, True, True] * 8] * 2)
    assert unk_grad(embedding.train(), tokens).abs().sum() > 0
    assert unk_grad(embedding.eval(), tokens).abs().sum() == 0
    # without the option, training never touches <unk> when no token is unknown
    assert unk_grad(WordEmbedding(VOCAB, dim=4).train(), tokens).abs().sum() == 0


def test_unk_replace_touches_only_singletons_and_never_padding():
    torch.manual_seed(0)
    embedding = WordEmbedding(VOCAB, dim=4, unk_replace=0.9).train()
    ids = [[2, 3, 4, 5, 0, 0]] * 50
    flags = [[False, True, False, True, True, True]] * 50  # padding flagged too: must stay padding
    replaced = embedding.unknown_words(batch(ids, flags))
    changed = replaced != torch.tensor(ids)
    assert changed[:, [1, 3]].float().mean().item() == pytest.approx(0.9, abs=0.08)
    assert not changed[:, [0, 2, 4, 5]].any()
    assert (replaced[changed] == 1).all()


def test_unk_replace_without_singleton_flags_warns_once(caplog):
    embedding = WordEmbedding(VOCAB, dim=4, unk_replace=0.5).train()
    for _ in range(2):
        embedding(batch([[2, 3]]))
    assert [r.getMessage() for r in caplog.records].count(
        "unk_replace=0.5 does nothing: the training batches do not flag singleton words (their data module has no "
        "training word counts, e.g. vocabularies from a checkpoint)") == 1


def test_characters_still_see_the_replaced_word():
    torch.manual_seed(0)
    embedder = WordCharEmbedder(VOCAB, ["<pad>", "<unk>", "a", "b"], word_dim=4, char_dim=3, char_features=4,
                                word_dropout=0.99, dropout=0.0).train()
    tokens = batch([[2, 3, 4]])
    tokens.char_ids = torch.tensor([[[2, 3], [3, 0], [2, 2]]])
    out = embedder(tokens)
    chars = embedder.embed.parts[1](tokens)
    torch.testing.assert_close(out[..., 4:], chars)


def test_options_are_checked():
    with pytest.raises(ValueError, match=r"word_dropout must be in \[0, 1\), got 1.0"):
        WordEmbedding(VOCAB, word_dropout=1.0)
    with pytest.raises(ValueError, match="fine_tune='unfound' freezes the rows found in the pretrained file"):
        WordEmbedding(VOCAB, fine_tune="unfound")
    with pytest.raises(ValueError, match="freeze=True contradicts fine_tune='all'"):
        WordEmbedding(VOCAB, freeze=True, fine_tune="all")


# ------------------------------------------------------------------------------- singletons from the data side


def test_vocabulary_counts_give_the_singleton_flags_of_training_batches():
    examples = [Example(words=("the", "cat", "sat")), Example(words=("the", "Zyx", "cat"))]
    words, _ = build_vocabularies(examples, WordNormalizer())
    assert [w for w, s in zip(words.itos, words.singletons()) if s] == ["Zyx", "sat"]
    table = torch.tensor(words.singletons())
    ids = [words.index(w) for w in ("the", "sat", "Zyx")]
    tokens = pad_tokens([(ids, [[1]] * 3, ["the", "sat", "Zyx"]), (ids[:1], [[1]], ["the"])], table)
    assert tokens.singletons.tolist() == [[False, True, True], [False, False, False]]


def test_ner_data_module_flags_singletons_in_training_batches_only():
    data = NERDataModule(path=str(sample_path("ner")), data_dir=None, revision=None, format="columns",
                         reader_options={"scheme": "iob2"}, batch_size=8)
    data.setup("fit")
    words, flagged = data._vocabularies()[0], 0
    for b in data.train_dataloader():
        expected = [[words.counts.get(words.itos[i], 0) == 1 for i in row] for row in b.tokens.word_ids.tolist()]
        assert b.tokens.singletons.tolist() == expected
        flagged += int(b.tokens.singletons.sum())
    assert flagged == sum(c == 1 for c in words.counts.values()) > 0
    assert next(iter(data.val_dataloader())).tokens.singletons is None


# ----------------------------------------------------------------------------------------- frozen found rows


def test_unfound_mode_keeps_found_rows_fixed_and_trains_the_others(tmp_path: Path):
    vectors = tmp_path / "vectors.txt"
    vectors.write_text("2 4\nthe 1 2 3 4\nZyx 4 3 2 1\n", encoding="utf-8")
    torch.manual_seed(0)
    embedding = WordEmbedding(VOCAB, dim=4, pretrained=str(vectors), fine_tune="unfound", word_dropout=0.3)
    optimizer = torch.optim.Adam(embedding.parameters(), lr=0.1, weight_decay=0.1)  # decay must not reach them
    tokens = batch([[2, 3, 4, 5, 2, 3]])
    before = embedding.eval()(tokens).detach()
    for _ in range(3):
        optimizer.zero_grad()
        embedding.train()(tokens).pow(2).sum().backward()
        optimizer.step()
    after = embedding.eval()(tokens).detach()
    found = torch.tensor([True, False, False, True, True, False])  # the, cat, sat, Zyx, the, cat
    torch.testing.assert_close(after[0, found], before[0, found])
    torch.testing.assert_close(after[0, 0], torch.tensor([1.0, 2.0, 3.0, 4.0]))
    assert (after[0, ~found] - before[0, ~found]).abs().min() > 0
    # the frozen rows are saved: a copy restored without the file gives the same output
    restored = WordEmbedding(VOCAB, dim=4, pretrained=str(tmp_path / "gone.txt"), fine_tune="unfound")
    restored.load_state_dict(embedding.state_dict())
    torch.testing.assert_close(restored.eval()(tokens), after)
