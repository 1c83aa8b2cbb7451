"""The vocabulary from a vectors file (``data.vectors``): its words join the training words, capped, normalised,
with a lowercase fallback; their vectors are in the checkpoint, so predicting needs no file."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
import torch
import yaml

from helpers.cli import tiny_ner_config
from onlstm_tasks.cli import main
from onlstm_tasks.data.core.common import data_from_checkpoint
from onlstm_tasks.data.core.features import TokenEncoder, WordNormalizer, extend_with_vectors
from onlstm_tasks.data.ner.module import NERDataModule
from onlstm_tasks.data.core.vector_file import read_vector_words
from onlstm_tasks.data.core.vocab import Vocabulary
from onlstm_tasks.sample_data import sample_path
from onlstm_tasks.tasks.ner import NERTagger

# "Quuxville" and "quuxtown" occur in no split of the bundled sample; "the" and "Results" are training words
VECTORS = {"the": 0.25, "Results": -0.5, "Quuxville": 0.75, "quuxtown": -0.125, "1999": 1.5, "2024": 2.0}
DIM = 16


def write_vectors(path: Path, header: bool = True) -> Path:
    lines = [f"{len(VECTORS)} {DIM}\n"] if header else []
    lines += [f"{w} {' '.join([str(v)] * DIM)}\n" for w, v in VECTORS.items()]
    path.write_text("".join(lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("header", [True, False])
def test_read_vector_words_in_file_order_with_a_cap(tmp_path, header):
    path = write_vectors(tmp_path / "v.txt", header)
    assert read_vector_words(path) == list(VECTORS)
    assert read_vector_words(path, 3) == ["the", "Results", "Quuxville"]
    assert read_vector_words(path, 0) == []
    with pytest.raises(FileNotFoundError, match="gone.txt: word vectors file not found"):
        read_vector_words(tmp_path / "gone.txt")


def test_extend_with_vectors_caps_normalises_and_counts(tmp_path):
    path = write_vectors(tmp_path / "v.txt")
    train = Vocabulary.from_iterable(["the", "the", "cat"])
    words, counts = extend_with_vectors(train, str(path), WordNormalizer(), max_words=None)
    # training words first, unchanged; then the file's new words in file order; 1999 and 2024 both become 0000
    assert words.itos == ["<pad>", "<unk>", "the", "cat", "Results", "Quuxville", "quuxtown", "0000"]
    assert counts == {"read": 6, "known": 1, "merged": 1, "added": 4}
    assert words.counts == train.counts and words.singletons()[3] and not words.singletons()[4]
    capped, counts = extend_with_vectors(train, str(path), WordNormalizer(), max_words=3)
    assert capped.itos[4:] == ["Results", "Quuxville"] and counts["added"] == 2


def test_lowercase_fallback_looks_up_the_lowercased_word():
    words = Vocabulary(["the", "quuxtown", "Paris"])
    chars = Vocabulary(list("abc"))
    sentence = ["THE", "Quuxtown", "Paris", "PARIS"]
    with_fallback = TokenEncoder(words, chars, WordNormalizer(lowercase_fallback=True)).encode(sentence)[0]
    without = TokenEncoder(words, chars, WordNormalizer()).encode(sentence)[0]
    assert with_fallback == [2, 3, 4, 1]  # an exact match wins; PARIS has no lowercase entry (paris) either
    assert without == [1, 1, 4, 1]


def test_data_module_extends_the_vocabulary_and_logs_it(tmp_path, caplog):
    path = write_vectors(tmp_path / "v.txt")
    kwargs = dict(path=str(sample_path("ner")), data_dir=None, revision=None, format="columns",
                  reader_options={"scheme": "iob2"})
    plain = NERDataModule(**kwargs)
    with caplog.at_level(logging.INFO, logger="onlstm_tasks.data.ner"):
        extended = NERDataModule(**kwargs, vectors=str(path), vectors_max_words=5)
        vocab = extended.word_vocab
    assert vocab[: len(plain.word_vocab)] == plain.word_vocab
    assert vocab[len(plain.word_vocab):] == ["Quuxville", "quuxtown"]  # 1999 -> 0000 is a training word
    assert extended.normalizer.lowercase_fallback and not plain.normalizer.lowercase_fallback
    expected = "5 words read (vectors_max_words=5): 2 added to the 525 training words, 3 already training words"
    assert any(expected in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------- end to end: fit, delete the file, predict


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path]:
    """``(config, best checkpoint)`` of a tiny fit with ``data.vectors`` and the same file as ``pretrained``, whose
    vectors file is deleted afterwards."""
    tmp_path = tmp_path_factory.mktemp("fit")
    vectors = write_vectors(tmp_path / "vectors.txt")
    config = tiny_ner_config(tmp_path, max_epochs=1, limit_train_batches=2)
    settings = yaml.safe_load(config.read_text())
    settings["model"]["init_args"]["embedder"]["init_args"].update(pretrained=str(vectors), unk_replace=0.5)
    settings["data"]["init_args"]["vectors"] = str(vectors)
    config.write_text(yaml.safe_dump(settings))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "argv", ["onlstm-tasks"])
        main(["fit", "--config", str(config)])
    vectors.unlink()
    return config, tmp_path / "ckpt" / "best.ckpt"


def test_a_vectors_only_word_keeps_its_vector_at_predict_time_without_the_file(trained, tmp_path, monkeypatch):
    config, best = trained
    saved = data_from_checkpoint(str(best), "an NERTagger")
    assert "Quuxville" in saved.words and saved.word_options[0].lowercase_fallback
    model = NERTagger.load_from_checkpoint(str(best), map_location="cpu", weights_only=True).eval()
    with torch.no_grad():
        x, _ = model.embed_words([["Quuxville", "Quuxtown", "Zorblat"]], saved.word_options[0])
    torch.testing.assert_close(x[0, 0, :DIM], torch.full((DIM,), 0.75))  # only in the vectors file
    torch.testing.assert_close(x[0, 1, :DIM], torch.full((DIM,), -0.125))  # through the lowercase fallback
    unk = model.net.embedder.embed.parts[0].embedding.weight[1]
    torch.testing.assert_close(x[0, 2, :DIM], unk)  # in neither
    # the CLI predicts from the checkpoint with the vectors file gone
    monkeypatch.setattr(sys, "argv", ["onlstm-tasks"])
    settings = yaml.safe_load(config.read_text())
    settings["trainer"]["callbacks"][-1]["init_args"]["output"] = str(tmp_path / "predictions.jsonl")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(settings))
    text = tmp_path / "input.txt"
    text.write_text("Results of the Quuxville Open\n", encoding="utf-8")
    main(["predict", "--config", str(tmp_path / "config.yaml"), "--ckpt_path", str(best),
          "--data.init_args.path", "null", "--data.init_args.predict_file", str(text)])
    rows = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert [r["tokens"] for r in rows] == [["Results", "of", "the", "Quuxville", "Open"]]
