"""The bundled NER sample: reproducible from its generator, well-formed, and sized as documented."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers.paths import REPO
from onlstm_tasks.sample_data import available, sample_path

SPLITS = ("train", "validation", "test")
SIZES = {"train": 400, "validation": 100, "test": 100}
TYPES = {"PER", "ORG", "LOC", "MISC"}
SCRIPT = REPO / "scripts" / "make_sample_data.py"


def read(path: Path) -> list[list[tuple[str, str]]]:
    """Sentences of a two-column file, checking the format line by line."""
    sentences, current = [], []
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n") and not text.endswith("\n\n"), f"{path}: one final newline"
    for lineno, line in enumerate(text.split("\n")[:-1], start=1):
        if not line:
            assert current, f"{path}:{lineno}: empty sentence"
            sentences.append(current)
            current = []
            continue
        fields = line.split(" ")
        assert len(fields) == 2 and all(fields), f"{path}:{lineno}: expected 'token TAG', got {line!r}"
        current.append((fields[0], fields[1]))
    assert current, f"{path}: ends with a blank line"
    sentences.append(current)
    return sentences


def entities(sentence: list[tuple[str, str]]) -> list[tuple[str, str]]:
    out, i = [], 0
    while i < len(sentence):
        tag = sentence[i][1]
        if tag.startswith("B-"):
            j = i + 1
            while j < len(sentence) and sentence[j][1] == "I-" + tag[2:]:
                j += 1
            out.append((tag[2:], " ".join(w for w, _ in sentence[i:j])))
            i = j
        else:
            i += 1
    return out


@pytest.fixture(scope="module")
def sample() -> dict[str, list[list[tuple[str, str]]]]:
    return {split: read(sample_path("ner") / f"{split}.txt") for split in SPLITS}


def test_sample_path() -> None:
    assert {"absa", "ner"} <= set(available())
    assert sorted(p.name for p in sample_path("ner").glob("*.txt")) == ["test.txt", "train.txt", "validation.txt"]
    for bad in ("nope", "", "__pycache__", "../sample_data"):
        with pytest.raises(ValueError, match="available: absa, ner"):
            sample_path(bad)


@pytest.mark.skipif(not SCRIPT.exists(), reason="the generator script ships with the repository only")
def test_generator_reproduces_the_bundled_files(tmp_path) -> None:
    subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], check=True, capture_output=True)
    for split in SPLITS:
        assert (tmp_path / f"{split}.txt").read_bytes() == (sample_path("ner") / f"{split}.txt").read_bytes(), split


def test_tags_are_valid_iob2(sample) -> None:
    for split, sentences in sample.items():
        for n, sentence in enumerate(sentences):
            previous = "O"
            for token, tag in sentence:
                assert tag == "O" or (tag[:2] in ("B-", "I-") and tag[2:] in TYPES), (split, n, tag)
                if tag.startswith("I-"):
                    assert previous in ("B-" + tag[2:], tag), f"{split} sentence {n}: {tag} after {previous}"
                previous = tag


def test_sizes_and_content(sample) -> None:
    assert {split: len(s) for split, s in sample.items()} == SIZES
    train_entities = {e for s in sample["train"] for e in entities(s)}
    for split, sentences in sample.items():
        found = [e for s in sentences for e in entities(s)]
        assert {kind for kind, _ in found} == TYPES, split
        assert any(not entities(s) for s in sentences), f"{split}: needs sentences without entities"
        assert any(s[0][1] != "O" for s in sentences) and any(s[-1][1] != "O" for s in sentences)
        assert any(len(text.split()) > 1 for _, text in found), f"{split}: needs multi-token entities"
        if split != "train":  # names never seen in training, so spelling and context must do the work
            unseen = sum(e not in train_entities for e in found)
            assert unseen / len(found) > 0.3, split
