"""A checkpoint is enough for prediction: the pretrained-vector file is not needed (nor read) when the weights come
from a checkpoint, and words are looked up with the word options of the data module the model was trained with,
whatever the prediction data config says."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
import yaml

from helpers.cli import tiny_ner_config
from onlstm_tasks.cli import main
from onlstm_tasks.data.core.common import data_from_checkpoint, prediction_word_options
from onlstm_tasks.data.core.features import TokenEncoder, WordNormalizer, words_to_batch
from onlstm_tasks.data.ner.module import NERDataModule
from onlstm_tasks.tasks.ner import NERTagger

EMBEDDING = "net.embedder.embed.parts.0.embedding.weight"  # the word rows of WordCharEmbedder
GLOVE = {"the": [0.25] * 16, "of": [-0.5] * 16, "Results": [float(i) for i in range(16)]}


pytestmark = pytest.mark.usefixtures("plain_argv")  # (conftest.py)


# ------------------------------------------------------------------------------- the vector file is not needed


def write_glove(path: Path) -> Path:
    path.write_text("".join(f"{w} {' '.join(map(str, v))}\n" for w, v in GLOVE.items()), encoding="utf-8")
    return path


def config_with_vectors(tmp_path: Path, glove: Path) -> Path:
    """The tiny CLI config (sample data) with frozen pretrained word vectors, so trained rows equal the file's."""
    path = tiny_ner_config(tmp_path, max_epochs=1, limit_train_batches=2)
    config = yaml.safe_load(path.read_text())
    config["model"]["init_args"]["embedder"]["init_args"].update(pretrained=str(glove), freeze=True)
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path, Path]:
    """``(config, best checkpoint, vector file)`` of a tiny fit with pretrained vectors."""
    tmp_path = tmp_path_factory.mktemp("fit")
    glove = write_glove(tmp_path / "glove.txt")
    config = config_with_vectors(tmp_path, glove)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "argv", ["onlstm-tasks"])
        main(["fit", "--config", str(config)])
    return config, tmp_path / "ckpt" / "best.ckpt", glove


def test_fit_reads_the_vectors(trained):
    _, best, _ = trained
    checkpoint = torch.load(best, weights_only=True)
    rows = checkpoint["state_dict"][EMBEDDING]
    vocab = checkpoint["hyper_parameters"]["word_vocab"]
    for word, vector in GLOVE.items():
        torch.testing.assert_close(rows[vocab.index(word)], torch.tensor(vector))


@pytest.mark.parametrize("file_state", ["deleted", "unreadable"])
def test_load_from_checkpoint_neither_needs_nor_reads_the_vector_file(trained, tmp_path, file_state, caplog):
    _, best, _ = trained
    moved = tmp_path / "best.ckpt"  # a copy whose config names a vector file we control
    checkpoint = torch.load(best, weights_only=True)
    checkpoint["hyper_parameters"]["embedder"]["init_args"]["pretrained"] = str(tmp_path / "glove.txt")
    torch.save(checkpoint, moved)
    if file_state == "unreadable":  # present, but reading it would fail: proves it is not read
        (tmp_path / "glove.txt").write_bytes(b"the 1 2\n\xff\n")
    with caplog.at_level(logging.INFO, logger="onlstm_tasks.embedders.word"):
        model = NERTagger.load_from_checkpoint(str(moved), map_location="cpu", weights_only=True).eval()
    assert "come from the loaded weights" in caplog.text
    torch.testing.assert_close(model.state_dict()[EMBEDDING], checkpoint["state_dict"][EMBEDDING])
    with torch.no_grad():
        model.encode_words([["Results", "of", "the", "day"]])  # a forward pass does not read the file either


def test_cli_predict_from_checkpoint_without_the_vector_file(trained, tmp_path):
    config, best, _ = trained
    config_copy = tmp_path / "config.yaml"
    settings = yaml.safe_load(config.read_text())
    missing = tmp_path / "no-such-glove.txt"  # the predict config names a file that is not there
    settings["model"]["init_args"]["embedder"]["init_args"]["pretrained"] = str(missing)
    settings["trainer"]["callbacks"][-1]["init_args"]["output"] = str(tmp_path / "predictions.jsonl")
    config_copy.write_text(yaml.safe_dump(settings))
    text = tmp_path / "input.txt"
    text.write_text("Results of the Thornmoor Open\n", encoding="utf-8")
    main(["predict", "--config", str(config_copy), "--ckpt_path", str(best), "--data.init_args.path", "null",
          "--data.init_args.predict_file", str(text)])
    rows = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert [r["tokens"] for r in rows] == [["Results", "of", "the", "Thornmoor", "Open"]]
    assert not missing.exists()


# --------------------------------------------------------------------- word options come from the checkpoint

TRAIN = [["Ada B-PER", "Lovelace I-PER", "visited O", "PARIS B-LOC", "in O", "1843 O", ". O"],
         ["Paris B-LOC", "welcomed O", "Ada B-PER", "Byron-Kingsley I-PER", ". O"]]
PREDICT = "ADA visited paris in 1843 with Byron-Kingsley\n"


def write_columns(path: Path, sentences: list[list[str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n\n".join("\n".join(s) for s in sentences) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def lowercased(tmp_path) -> tuple[NERDataModule, Path]:
    """A data module with lowercase=True, normalize_digits=False, max_word_length=5, and an untrained tagger's
    checkpoint saved with it (as ``Trainer.fit`` saves one: the data module's hyper-parameters included)."""
    write_columns(tmp_path / "data" / "train.txt", TRAIN)
    write_columns(tmp_path / "data" / "dev.txt", [["Ada B-PER", "left O"]])
    data = NERDataModule(path=str(tmp_path / "data"), data_dir=None, revision=None, format="columns",
                         reader_options={"scheme": "iob2"}, lowercase=True, normalize_digits=False, max_word_length=5)
    torch.manual_seed(0)
    model = NERTagger(data.word_vocab, data.char_vocab, data.labels)
    trainer = pl.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, max_epochs=0, num_sanity_val_steps=0, accelerator="cpu",
                         devices=1, default_root_dir=tmp_path)
    trainer.fit(model, datamodule=data)  # no training step: only attaches the data module
    path = tmp_path / "tagger.ckpt"
    trainer.save_checkpoint(path)
    return data, path


def expected_ids(data: NERDataModule, words: list[str]) -> list[int]:
    """The word ids the training data module gives ``words`` (independently: lowercase, digits kept)."""
    index = {w: i for i, w in enumerate(data.word_vocab)}
    return [index.get(w.lower(), 1) for w in words]


def test_checkpoint_holds_the_word_options(lowercased):
    _, path = lowercased
    saved = data_from_checkpoint(str(path), "an NERTagger")
    assert saved.word_options == (WordNormalizer(lowercase=True, normalize_digits=False), 5)
    # encoding with them gives the training ids, which the predict config's defaults do not
    words = PREDICT.split()
    with_saved = TokenEncoder(saved.words, saved.chars, *saved.word_options).encode(words)
    with_defaults = TokenEncoder(saved.words, saved.chars, WordNormalizer(), 30).encode(words)
    assert with_saved[0] == expected_ids(lowercased[0], words)
    assert with_saved[0] != with_defaults[0]  # ADA, paris and 1843 would be <unk>
    assert max(len(c) for c in with_saved[1]) == 5


def test_prediction_word_options_prefer_the_checkpoint_and_say_so(lowercased, caplog):
    _, path = lowercased
    saved = data_from_checkpoint(str(path), "an NERTagger").word_options
    configured = (WordNormalizer(), 30)
    with caplog.at_level(logging.INFO, logger="onlstm_tasks.data.core.common"):
        assert prediction_word_options(str(path), saved, configured) == saved
        assert prediction_word_options(str(path), None, configured) == configured
    info, warning = [r for r in caplog.records if r.name == "onlstm_tasks.data.core.common"]
    assert info.levelno == logging.INFO and "lowercase=True, normalize_digits=False, max_word_length=5" in \
        info.getMessage() and "the data config says lowercase=False" in info.getMessage()
    assert warning.levelno == logging.WARNING and "has no data-module hyper-parameters" in warning.getMessage()


def test_predict_data_module_uses_the_checkpoints_word_options(lowercased, tmp_path):
    data, path = lowercased
    text = tmp_path / "input.txt"
    text.write_text(PREDICT, encoding="utf-8")
    # the prediction data config says nothing about lowercase, normalize_digits or max_word_length
    predict = NERDataModule(path=None, vocab_from=str(path), predict_file=str(text), pretokenized=True)
    predict.setup("predict")
    batch = next(iter(predict.predict_dataloader()))
    words = PREDICT.split()
    assert batch.tokens.word_ids[0].tolist() == expected_ids(data, words)
    assert batch.tokens.char_ids.shape[-1] == 5  # Byron-Kingsley cut to its first 5 characters, as in training


def test_characters_beyond_max_word_length_are_counted_and_logged_words_kept(lowercased, caplog):
    data, _ = lowercased
    sentences = [["Byron-Kingsley", "visited", "Paris"], ["Ada"]]  # two words longer than 5 characters
    with caplog.at_level(logging.INFO, logger="onlstm_tasks.data.core.features"):
        batch = words_to_batch(sentences, data.word_vocab, data.char_vocab, WordNormalizer(lowercase=True), 5)
    assert batch.words == sentences  # every word is kept...
    assert batch.word_ids[0].tolist() == expected_ids(data, sentences[0])  # ...with its word id
    assert batch.char_ids.shape[-1] == 5 and (batch.char_ids[0, 0] != 0).all()  # only its characters are cut
    messages = [r.getMessage() for r in caplog.records if r.name == "onlstm_tasks.data.core.features"]
    assert messages == ["2 sentence(s): 2 word(s) longer than max_word_length=5 characters: their characters beyond "
                        "it are left out of the character features (the words, word ids and tags are kept)"]


def test_max_word_length_must_be_positive(lowercased):
    data, _ = lowercased
    with pytest.raises(ValueError, match="max_word_length must be at least 1, got 0"):
        words_to_batch([["Ada"]], data.word_vocab, data.char_vocab, max_word_length=0)
