"""Probing a task model's encoder: ``encode_words`` (NER, ABSA), :class:`EncoderProbe`, recomputed master gates,
checkpoint loading with the data module's word options."""

from __future__ import annotations

import functools
import logging

import pytest
import torch
from helpers.model_invariants import save_checkpoint

from onlstm_tasks.data.core.common import word_options_from_checkpoint
from onlstm_tasks.data.core.features import WordNormalizer, words_to_batch
from onlstm_tasks.data.ner.module import NERDataModule
from onlstm_tasks.embedders.word_char import WordCharEmbedder
from onlstm_tasks.encoders import LSTM, ONLSTM
from onlstm_tasks.probing.master_gates import master_gates
from onlstm_tasks.modules.aspect_heads import AspectAttentionHead, AspectPoolingHead, TargetDependentHead
from onlstm_tasks.probing.loading import load_probe
from onlstm_tasks.probing.probe import EncoderProbe
from onlstm_tasks.sample_data import sample_path
from onlstm_tasks.tasks.absa import AspectSentimentClassifier
from onlstm_tasks.tasks.loading import load_task_model
from onlstm_tasks.tasks.ner import NERTagger

EMBEDDER = functools.partial(WordCharEmbedder, word_dim=16, char_dim=8, char_features=8, dropout=0.0)
ONLSTM_2x2 = functools.partial(ONLSTM, hidden_size=16, chunk_size=4, num_layers=2, bidirectional=True)
SENTENCES = [["Peter", "lives", "in", "Berlin", "."], ["Hi"], ["The", "2", "clubs", "met", "in", "Paris", "in", "1998"],
             ["Unseenword", "here"]]


pytestmark = pytest.mark.usefixtures("one_thread")  # (conftest.py)


@pytest.fixture(scope="module")
def dm() -> NERDataModule:
    dm = NERDataModule(path=str(sample_path("ner")), data_dir=None, revision=None, format="columns",
                       reader_options={"scheme": "iob2"})
    dm.setup("fit")
    return dm


def ner_model(dm, encoder=ONLSTM_2x2) -> NERTagger:
    torch.manual_seed(0)
    return NERTagger(dm.word_vocab, dm.char_vocab, dm.labels, embedder=EMBEDDER, encoder=encoder, dropout=0.0).eval()


def test_ner_encode_words_equals_the_training_path(dm) -> None:
    model = ner_model(dm)
    examples = dm.examples("validation")[:4]
    batch = dm.val_dataloader().collate_fn([0, 1, 2, 3])
    with torch.no_grad():
        expected = model.net.emissions(batch.tokens)[1]
        got = model.encode_words([list(ex.words) for ex in examples], dm.normalizer)
    assert got.distances.shape == (2, 2, 4, batch.tokens.mask.size(1))
    torch.testing.assert_close(got.distances, expected.distances)
    torch.testing.assert_close(got.hidden, expected.hidden)


def test_probe_distances_are_per_sentence_and_independent_of_batching(dm) -> None:
    model = ner_model(dm).train()  # the probe switches to eval and back
    probe = EncoderProbe(model)
    batched = probe.distances(SENTENCES, batch_size=3)
    assert model.training
    assert [d.shape for d in batched] == [(2, 2, len(s)) for s in SENTENCES]
    for sentence, d in zip(SENTENCES, batched):
        torch.testing.assert_close(d, probe.distances([sentence])[0])
        assert ((d > 0) & (d < 1)).all()
    inputs = probe.distances(SENTENCES[:1], which="input")[0]
    assert not torch.allclose(inputs, batched[0])
    assert probe.shape() == (2, 2)


def test_probe_master_gates_match_the_fast_distances(dm) -> None:
    probe = EncoderProbe(ner_model(dm))
    words = SENTENCES[2]
    distances = probe.distances([words])[0]
    for layer in range(2):
        for direction in range(2):
            gates = probe.master_gates(words, layer, direction)
            assert gates.forget.shape == gates.input.shape == (len(words), 4)
            torch.testing.assert_close(gates.distances(), distances[layer, direction], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("master_input", ["paper", "symmetric"])
def test_master_gates_on_a_padded_batch(master_input) -> None:
    torch.manual_seed(1)
    encoder = ONLSTM(5, hidden_size=12, chunk_size=3, num_layers=2, bidirectional=True, dropout=0.3,
                     dropconnect=0.3, master_input=master_input).eval()
    x = torch.randn(3, 6, 5)
    mask = torch.arange(6)[None] < torch.tensor([6, 2, 4])[:, None]
    with torch.no_grad():
        out = encoder(x, mask)
        for layer, direction in [(0, 0), (0, 1), (-1, 0), (1, 1)]:
            gates = master_gates(encoder, x, mask, layer, direction)
            torch.testing.assert_close(gates.distances()[mask], out.distances[layer, direction][mask], atol=1e-5,
                                       rtol=1e-4)
            torch.testing.assert_close(gates.input_distances()[mask], out.input_distances[layer, direction][mask],
                                       atol=1e-5, rtol=1e-4)
            assert (gates.forget.diff(dim=-1)[mask] >= -1e-6).all()  # f~ non-decreasing over levels
            assert (gates.input.diff(dim=-1)[mask] <= 1e-6).all()  # i~ non-increasing
            assert (gates.forget[~mask] == 0).all() and (gates.input[~mask] == 0).all()


def test_master_gates_errors() -> None:
    encoder = ONLSTM(5, hidden_size=8, chunk_size=4)
    x = torch.randn(1, 3, 5)
    with pytest.raises(ValueError, match="eval mode"):
        master_gates(encoder, x)
    encoder.eval()
    with pytest.raises(ValueError, match="direction must be 0"):
        master_gates(encoder, x, direction=1)
    with pytest.raises(ValueError, match="layer must be in"):
        master_gates(encoder, x, layer=1)
    with pytest.raises(TypeError, match="only in ON-LSTM"):
        master_gates(LSTM(5, hidden_size=8).eval(), x)


def test_encoder_without_distances_is_a_clear_error(dm) -> None:
    probe = EncoderProbe(ner_model(dm, functools.partial(LSTM, hidden_size=8, bidirectional=True)), name="lstm.ckpt")
    with pytest.raises(ValueError, match=r"lstm\.ckpt: the model's encoder \(LSTM\) returns no distances"):
        probe.distances(SENTENCES)
    with pytest.raises(ValueError, match=r"lstm\.ckpt: per-level master gates .* ONLSTM encoders only"):
        probe.master_gates(SENTENCES[0])
    with pytest.raises(TypeError, match="no encode_words"):
        EncoderProbe(torch.nn.Linear(2, 2))


# ---- aspect sentiment ------------------------------------------------------------------------------------------

WORDS = ["<pad>", "<unk>", "the", "food", "was", "great", "but", "service", "slow", "."]
CHARS = ["<pad>", "<unk>", *sorted(set("".join(WORDS[2:])))]


def absa_model(head) -> AspectSentimentClassifier:
    torch.manual_seed(0)
    embedder = functools.partial(WordCharEmbedder, word_dim=8, char_encoder="none", dropout=0.0)
    return AspectSentimentClassifier(WORDS, CHARS, ["negative", "neutral", "positive"], embedder=embedder,
                                     head=head, dropout=0.0).eval()


def test_absa_encode_words_uses_the_whole_sentence_encoder() -> None:
    model = absa_model(functools.partial(AspectPoolingHead, encoder=functools.partial(ONLSTM, hidden_size=8,
                                                                                      chunk_size=2)))
    sentences = [["the", "food", "was", "great", "."], ["service", "slow"]]
    tokens = words_to_batch(sentences, WORDS, CHARS)
    with torch.no_grad():
        got = model.encode_words(sentences)
        expected = model.net.head.encoder(model.net.embedder(tokens), tokens.mask)
    assert got.distances.shape == (1, 1, 2, 5)
    torch.testing.assert_close(got.distances, expected.distances)
    assert [d.shape for d in EncoderProbe(model).distances(sentences)] == [(1, 1, 5), (1, 1, 2)]


@pytest.mark.parametrize(("head", "why"), [
    (functools.partial(TargetDependentHead, encoder=functools.partial(ONLSTM, hidden_size=8, chunk_size=2)),
     "no `encoder` attribute"),
    (functools.partial(AspectAttentionHead, encoder=functools.partial(ONLSTM, hidden_size=8, chunk_size=2)),
     r"reads \[word; aspect\] vectors"),
])
def test_absa_heads_without_a_sentence_encoder(head, why) -> None:
    model = absa_model(head)
    with pytest.raises(ValueError, match=f"no encoder over the whole sentence alone.*{why}"):
        model.encode_words([["the", "food"]])


def test_words_to_batch_checks_its_input() -> None:
    with pytest.raises(ValueError, match="list of token lists"):
        words_to_batch("the food", WORDS, CHARS)
    with pytest.raises(ValueError, match="sentence 1 must be"):
        words_to_batch([["the"], "food"], WORDS, CHARS)
    lowered = words_to_batch([["The", "FOOD"]], WORDS, CHARS, WordNormalizer(lowercase=True))
    assert lowered.word_ids.tolist() == [[2, 3]]
    assert words_to_batch([["The", "FOOD"]], WORDS, CHARS).word_ids.tolist() == [[1, 1]]


# ---- checkpoints ---------------------------------------------------------------------------------------------


def test_load_probe_from_a_python_built_checkpoint(dm, tmp_path, caplog) -> None:
    model = ner_model(dm)
    path = save_checkpoint(model, tmp_path / "python.ckpt")
    with pytest.raises(ValueError, match="trust=True"):
        load_task_model(path)
    with caplog.at_level(logging.WARNING):
        probe = load_probe(path, trust=True)
    assert "no data-module hyper-parameters" in caplog.text
    assert isinstance(probe.model, NERTagger) and probe.normalizer == WordNormalizer()
    torch.testing.assert_close(probe.distances(SENTENCES[:1])[0], EncoderProbe(model).distances(SENTENCES[:1])[0])

    checkpoint = torch.load(path, weights_only=False)
    checkpoint["datamodule_hyper_parameters"] = {"lowercase": True, "normalize_digits": False, "max_word_length": 12}
    torch.save(checkpoint, tmp_path / "with_dm.ckpt")
    assert word_options_from_checkpoint(str(tmp_path / "with_dm.ckpt"), weights_only=False) == (
        WordNormalizer(True, False), 12)
    probe = load_probe(tmp_path / "with_dm.ckpt", trust=True)
    assert (probe.normalizer, probe.max_word_length) == (WordNormalizer(True, False), 12)
    assert word_options_from_checkpoint(str(path), weights_only=False) is None
