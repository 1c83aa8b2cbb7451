"""The bundled aspect-sentiment sample (SemEval-2014 XML): reproducible from its generator, well-formed, loaded by
the project's readers, balanced as documented, and learnable from the words around the aspect."""

from __future__ import annotations

import math
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from helpers.paths import REPO
from onlstm_tasks.data.absa.module import AspectSentimentDataModule
from onlstm_tasks.data.absa.readers import read_semeval_xml
from onlstm_tasks.sample_data import available, sample_path

FILES = {"train": "Gadgets_Train.xml", "test": "Gadgets_Test.xml"}
SENTENCES = {"train": 300, "test": 100}
# aspects per polarity as written (conflict included): pinned, so a change to the generator shows up here
CLASSES = {
    "train": {"conflict": 10, "negative": 140, "neutral": 77, "positive": 181},
    "test": {"conflict": 3, "negative": 47, "neutral": 27, "positive": 59},
}
SHARES = {"positive": 0.45, "negative": 0.35, "neutral": 0.20}  # of the non-conflict aspects, +-0.05
SCRIPT = REPO / "scripts" / "make_absa_sample.py"

Aspect = tuple[str, str, int, int]  # term, polarity, from, to


def read(path: Path) -> list[tuple[str, str, list[Aspect]]]:
    """(id, text, aspects) of every sentence, read with the standard library (independently of the project)."""
    out = []
    for sentence in ET.parse(path).getroot().iter("sentence"):
        aspects = [(a.get("term"), a.get("polarity"), int(a.get("from")), int(a.get("to")))
                   for a in sentence.iter("aspectTerm")]
        out.append((sentence.get("id"), sentence.findtext("text"), aspects))
    return out


@pytest.fixture(scope="module")
def sample() -> dict[str, list[tuple[str, str, list[Aspect]]]]:
    return {split: read(sample_path("absa") / name) for split, name in FILES.items()}


def test_sample_path() -> None:
    assert "absa" in available()
    assert sorted(p.name for p in sample_path("absa").iterdir() if p.is_file()) == sorted(FILES.values())


@pytest.mark.skipif(not SCRIPT.exists(), reason="the generator script ships with the repository only")
def test_generator_reproduces_the_bundled_files(tmp_path) -> None:
    subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], check=True, capture_output=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(FILES.values())
    for name in FILES.values():
        assert (tmp_path / name).read_bytes() == (sample_path("absa") / name).read_bytes(), name


def test_offsets_match_terms(sample) -> None:
    for split, sentences in sample.items():
        ids = [sid for sid, _, _ in sentences]
        assert all(ids) and len(set(ids)) == len(ids), f"{split}: sentence ids must be unique"
        for sid, text, aspects in sentences:
            assert text and text == text.strip(), (split, sid)
            for term, polarity, start, end in aspects:
                assert polarity in ("positive", "negative", "neutral", "conflict"), (split, sid, polarity)
                assert 0 <= start < end <= len(text) and text[start:end] == term, (split, sid, term, start, end)
                assert term == term.strip()


def test_sizes_classes_and_content(sample) -> None:
    train_terms = {term.lower() for _, _, aspects in sample["train"] for term, *_ in aspects}
    for split, sentences in sample.items():
        assert len(sentences) == SENTENCES[split]
        aspects = [a for _, _, found in sentences for a in found]
        classes = Counter(polarity for _, polarity, _, _ in aspects)
        assert dict(sorted(classes.items())) == CLASSES[split], split
        kept = sum(n for label, n in classes.items() if label != "conflict")
        for label, share in SHARES.items():
            assert abs(classes[label] / kept - share) < 0.05, (split, label, classes)
        assert sum(not found for _, _, found in sentences) >= 3, f"{split}: needs sentences without aspects"
        assert sum(len(term.split()) > 1 for term, *_ in aspects) > 0.2 * len(aspects), f"{split}: multi-word terms"
        mixed = sum(len({p for _, p, _, _ in found}) > 1 for _, _, found in sentences)
        assert mixed > 0.15 * len(sentences), f"{split}: needs sentences with aspects of different polarity"
        assert any(len(found) == 3 for _, _, found in sentences)
        assert any("&" in text for _, text, _ in sentences) and any('"' in text for _, text, _ in sentences)
        if split == "test":  # terms never seen in training: the context must do the work
            unseen = sum(term.lower() not in train_terms for term, *_ in aspects)
            assert 0.3 < unseen / len(aspects) < 0.7, unseen


def test_project_reader_loads_it() -> None:
    for split, name in FILES.items():
        examples, stats = read_semeval_xml(sample_path("absa") / name)
        classes = CLASSES[split]
        assert stats["sentences"] == SENTENCES[split]
        assert stats["conflict_dropped"] == classes["conflict"]
        assert stats["aspects"] == len(examples) == sum(classes.values()) - classes["conflict"]
        assert stats["inside_token"] == 0  # every term starts and ends on token boundaries
        assert all("".join(ex.words[slice(*ex.aspect)]) == ex.meta["term"].replace(" ", "") for ex in examples)

    dm = AspectSentimentDataModule(path=str(sample_path("absa")))
    assert dm.labels == ["negative", "neutral", "positive"]
    splits = dm.splits()
    assert set(splits) == {"train", "validation", "test"}  # validation carved from train
    train = CLASSES["train"]
    assert len(splits["train"]) + len(splits["validation"]) == sum(train.values()) - train["conflict"]
    assert len(splits["test"]) == sum(CLASSES["test"].values()) - CLASSES["test"]["conflict"]
    assert {ex.label for ex in splits["test"]} == set(dm.labels)


def window(example, size: int = 3) -> list[str]:
    start, end = example.aspect
    words = [w.lower() for w in example.words]
    return words[max(0, start - size):start] + words[end:end + size]


def test_learnable_from_words_near_the_aspect() -> None:
    """Naive Bayes over the words next to the aspect clearly beats the majority class on the test file."""
    train, _ = read_semeval_xml(sample_path("absa") / FILES["train"])
    test, _ = read_semeval_xml(sample_path("absa") / FILES["test"])
    prior, counts = Counter(ex.label for ex in train), defaultdict(Counter)
    for ex in train:
        counts[ex.label].update(window(ex))
    vocab = {w for c in counts.values() for w in c}

    def predict(ex) -> str:
        def score(label: str) -> float:
            total = sum(counts[label].values()) + len(vocab)
            return math.log(prior[label]) + sum(math.log((counts[label][w] + 1) / total) for w in window(ex))
        return max(prior, key=score)

    majority = prior.most_common(1)[0][0]
    baseline = sum(ex.label == majority for ex in test) / len(test)
    accuracy = sum(predict(ex) == ex.label for ex in test) / len(test)
    assert baseline < 0.5 and accuracy > baseline + 0.3, (accuracy, baseline)
