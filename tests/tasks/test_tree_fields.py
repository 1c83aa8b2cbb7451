"""The induced tree in predict output: hand-made distances, and both tasks' predict_step against encode_words."""

from __future__ import annotations

import functools

import pytest
import torch

from onlstm_tasks.data.absa.module import AspectSentimentDataModule
from onlstm_tasks.data.ner.module import NERDataModule
from onlstm_tasks.embedders.word_char import WordCharEmbedder
from onlstm_tasks.encoders import LSTM, ONLSTM
from onlstm_tasks.encoders.base import EncoderOutput, ONLSTMOutput
from onlstm_tasks.modules.aspect_heads import AspectPoolingHead, TargetDependentHead
from onlstm_tasks.sample_data import sample_path
from onlstm_tasks.tasks.absa import AspectSentimentClassifier
from onlstm_tasks.tasks.ner import NERTagger
from onlstm_tasks.tasks.tree_fields import induced_tree_fields
from onlstm_tasks.trees import distances_to_heads

EMBEDDER = functools.partial(WordCharEmbedder, word_dim=12, char_dim=6, char_features=6, dropout=0.0)


def output_with(distances: torch.Tensor) -> EncoderOutput:
    """An EncoderOutput whose only meaningful field is ``distances`` [layers, directions, B, T]."""
    hidden = torch.zeros(*distances.shape[2:], 4)
    return ONLSTMOutput(hidden=hidden, layers=(hidden,), distances=distances, input_distances=distances)


def test_hand_made_distances_give_the_known_tree_and_heads() -> None:
    # sentence 0: distances [2, 0, 3, 1] -> ((0 1) (2 3)), root 2; sentence 1 (3 real tokens): [0, 5, 1] -> (0 (1 2))
    d = torch.tensor([[2.0, 0.0, 3.0, 1.0], [0.0, 5.0, 1.0, 9.0]])
    mask = torch.tensor([[True] * 4, [True, True, True, False]])
    fields = induced_tree_fields(output_with(d[None, None]), mask, [["a", "b", "c", "d"], ["x", "(", "z"]])
    assert fields[0] == {"tree": "((a b) (c d))", "heads": [3, 1, 0, 3]}
    # the padded value 9 is never read; brackets in words are escaped so the tree string still parses
    assert fields[1] == {"tree": "(x (-LRB- z))", "heads": [2, 0, 2]}


def test_layer_and_direction_choice() -> None:
    forward = torch.tensor([[0.0, 0.0, 1.0]])  # split at token 2: ((a b) c)
    backward = torch.tensor([[1.0, 0.0, 0.0]])  # as a forward pass: (a (b c)); as a backward one, aligned: [0, 1, 0]
    d = torch.stack([torch.stack([forward, backward]), torch.stack([backward, forward])])  # [2 layers, 2 dirs]
    mask = torch.ones(1, 3, dtype=torch.bool)
    words = [["a", "b", "c"]]
    assert induced_tree_fields(output_with(d), mask, words, layer=0, directions="forward")[0]["tree"] == "((a b) c)"
    assert induced_tree_fields(output_with(d), mask, words, layer=-1, directions="forward")[0]["tree"] == "(a (b c))"
    assert induced_tree_fields(output_with(d), mask, words, layer=0, directions="backward")[0]["tree"] == "(a (b c))"


def test_encoders_without_distances_add_no_fields() -> None:
    hidden = torch.zeros(2, 3, 4)
    fields = induced_tree_fields(EncoderOutput(hidden=hidden, layers=(hidden,)), torch.ones(2, 3, dtype=torch.bool),
                                 [["a"] * 3] * 2)
    assert fields == [{}, {}]


@pytest.fixture(scope="module")
def ner_data() -> NERDataModule:
    dm = NERDataModule(path=str(sample_path("ner")), data_dir=None, revision=None, format="columns",
                       reader_options={"scheme": "iob2"}, batch_size=8)
    dm.setup("fit")
    return dm


def first_batch(dm, split: str = "validation"):
    return next(iter(dm.val_dataloader() if split == "validation" else dm.train_dataloader()))


def test_ner_predict_step_adds_the_induced_tree(ner_data) -> None:
    torch.manual_seed(0)
    model = NERTagger(ner_data.word_vocab, ner_data.char_vocab, ner_data.labels, embedder=EMBEDDER,
                      encoder=functools.partial(ONLSTM, hidden_size=8, chunk_size=2, bidirectional=True)).eval()
    batch = first_batch(ner_data)
    with torch.no_grad():
        rows = model.predict_step(batch, 0)
    words = [list(w) for w in batch.tokens.words]
    with torch.no_grad():
        distances = model.encode_words(words).combined_distances("mean")[-1]
    for k, row in enumerate(rows):
        n = len(words[k])
        assert row["heads"] == distances_to_heads(distances[k, :n].tolist())
        assert row["tree"].count("(") == row["tree"].count(")") == n - 1  # a binary tree over n leaves
        assert row["tree"].replace("(", "").replace(")", "").split() == [
            {"(": "-LRB-", ")": "-RRB-"}.get(w, w) for w in words[k]]


def test_ner_predict_step_with_an_lstm_has_no_tree(ner_data) -> None:
    model = NERTagger(ner_data.word_vocab, ner_data.char_vocab, ner_data.labels, embedder=EMBEDDER,
                      encoder=functools.partial(LSTM, hidden_size=8, bidirectional=True)).eval()
    with torch.no_grad():
        rows = model.predict_step(first_batch(ner_data), 0)
    assert rows and all("tree" not in row and "heads" not in row for row in rows)


@pytest.fixture(scope="module")
def absa_data() -> AspectSentimentDataModule:
    dm = AspectSentimentDataModule(path=str(sample_path("absa")), eval_batch_size=8)
    dm.setup("fit")
    return dm


def test_absa_predict_step_adds_the_tree_of_a_sentence_encoder(absa_data) -> None:
    torch.manual_seed(0)
    head = functools.partial(AspectPoolingHead, encoder=functools.partial(ONLSTM, hidden_size=8, chunk_size=2))
    model = AspectSentimentClassifier(absa_data.word_vocab, absa_data.char_vocab, absa_data.labels,
                                      embedder=EMBEDDER, head=head).eval()
    batch = first_batch(absa_data)
    with torch.no_grad():
        rows = model.predict_step(batch, 0)
        distances = model.encode_words([list(w) for w in batch.tokens.words]).combined_distances("mean")[-1]
    for k, row in enumerate(rows):
        n = len(batch.tokens.words[k])
        assert row["heads"] == distances_to_heads(distances[k, :n].tolist())
        assert row["tree"].count("(") == n - 1


def test_absa_heads_without_a_sentence_encoder_add_no_tree(absa_data) -> None:
    head = functools.partial(TargetDependentHead, encoder=functools.partial(ONLSTM, hidden_size=8, chunk_size=2))
    model = AspectSentimentClassifier(absa_data.word_vocab, absa_data.char_vocab, absa_data.labels,
                                      embedder=EMBEDDER, head=head).eval()
    with torch.no_grad():
        rows = model.predict_step(first_batch(absa_data), 0)
    assert rows and all("tree" not in row for row in rows)
