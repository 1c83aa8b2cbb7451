"""A self-written toy corpus and small language-model configs for the language-model tests."""

from __future__ import annotations

import random
from pathlib import Path

import yaml

from helpers.cli import tiny_ner_config

NOUNS = ["cat", "dog", "bird", "child", "teacher", "farmer", "river", "house", "garden", "letter"]
VERBS = ["saw", "found", "liked", "followed", "painted", "visited"]
ADJECTIVES = ["small", "old", "green", "quiet", "happy"]
PLACES = ["near the house", "in the garden", "by the river", "at noon"]


def toy_sentence(rng: random.Random) -> str:
    """Subject verb object (optional adjectives and a place): a tiny grammar a language model can learn."""
    def phrase() -> str:
        words = [rng.choice(["the", "a"])]
        if rng.random() < 0.4:
            words.append(rng.choice(ADJECTIVES))
        return " ".join(words + [rng.choice(NOUNS)])

    tail = f" {rng.choice(PLACES)}" if rng.random() < 0.5 else ""
    return f"{phrase()} {rng.choice(VERBS)} {phrase()}{tail} ."


def write_toy_corpus(folder: Path, sizes: dict[str, int] | None = None, seed: int = 0) -> dict[str, str]:
    """train/validation/test text files (one sentence per line, a blank line now and then); returns data_files."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for split, n in (sizes or {"train": 300, "validation": 40, "test": 40}).items():
        lines = []
        for i in range(n):
            lines.append(toy_sentence(rng))
            if i % 25 == 24:
                lines.append("")
        path = folder / f"{split}.txt"
        path.write_text("\n".join(lines) + "\n")
        files[split] = str(path)
    return files


def tiny_lm_config(tmp_path: Path, data: dict, encoder: dict | None = None, model: dict | None = None,
                   **trainer) -> Path:
    """A small LanguageModel config writing everything under ``tmp_path``."""
    path = tiny_ner_config(tmp_path, **trainer)
    config = yaml.safe_load(path.read_text())
    config["trainer"]["callbacks"] = [{"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                                       "init_args": {"dirpath": str(tmp_path / "ckpt"), "monitor": "val_ppl",
                                                     "mode": "min", "filename": "best", "save_last": True}}]
    config["model"] = {
        "class_path": "onlstm_tasks.tasks.language_model.LanguageModel",
        "init_args": {
            "embedding_dim": 16,
            "encoder": encoder or {"class_path": "onlstm_tasks.encoders.ONLSTM",
                                   "init_args": {"hidden_size": [16, 16], "chunk_size": 4, "num_layers": 2}},
            "input_dropout": 0.1, "output_dropout": 0.1,
            "optimizer": {"class_path": "torch.optim.Adam", "init_args": {"lr": 0.01}},
            **(model or {}),
        },
    }
    config["data"] = {"class_path": "onlstm_tasks.data.lm.LanguageModelDataModule",
                      "init_args": {"batch_size": 16, "eval_batch_size": 16, **data}}
    path.write_text(yaml.safe_dump(config))
    return path


def text_data(files: dict[str, str], **extra) -> dict:
    """Data-module arguments for local text files through ``datasets``' text builder."""
    return {"path": "text", "name": None, "data_files": files, "format": "text", **extra}


def fit_tiny_bidirectional_lm(folder: Path, train: int, max_epochs: int, seed: int = 1) -> Path:
    """Fits a tiny bidirectional 2-layer ON-LSTM language model on a toy corpus of ``train`` training sentences (and
    a sixth as many for validation and test) with ``onlstm-tasks fit`` and seed ``seed``; returns its best
    checkpoint."""
    from onlstm_tasks.cli import main

    held_out = max(1, train // 6)
    corpus = write_toy_corpus(folder / "toy", {"train": train, "validation": held_out, "test": held_out})
    config = tiny_lm_config(folder, text_data(corpus), model={"bidirectional": True}, max_epochs=max_epochs,
                            limit_train_batches=1.0)
    main(["fit", "--config", str(config), "--seed_everything", str(seed)])
    return folder / "ckpt" / "best.ckpt"


# a tiny vocabulary of the toy sentences, for models built in Python
WORDS = ["<pad>", "<unk>", "the", "cat", "saw", "a", "dog", "."]
CHARS = ["<pad>", "<unk>", *"thecasdog."]


def toy_sentences(n: int, seed: int = 3) -> list[list[str]]:
    rng = random.Random(seed)
    sentences = [toy_sentence(rng).split() for _ in range(n)]
    sentences[0] = ["the", "Zebra", "saw", "42", "unknownword", "."]  # unknown words and digits too
    return sentences
