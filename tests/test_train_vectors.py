"""scripts/train_vectors.py: gensim vectors written in the text format the pretrained embedder reads."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

pytest.importorskip("gensim", reason="gensim is not installed (pip install -e '.[vectors]')")

from helpers.scripts import SCRIPTS, load_script  # noqa: E402
from onlstm_tasks.data.core.features import WordNormalizer  # noqa: E402
from onlstm_tasks.data.core.vocab import PAD, UNK  # noqa: E402
from onlstm_tasks.embedders.word import WordEmbedding  # noqa: E402

tv = load_script("train_vectors")

SENTENCES = [
    "The river runs through Paris in 1999 .",
    "Paris is a city on the river .",
    "In 2001 the city of Berlin grew .",
    "The city and the river are old .",
    "Berlin and Paris are cities .",
    "the old river runs to the sea .",
]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(SENTENCES * 20) + "\n", encoding="utf-8")
    return path


def _args(**kw) -> argparse.Namespace:
    return tv.parse_args(["in", "out", "--dim", "12", "--min-count", "1", "--epochs", "2", "--workers", "1",
                          "--seed", "7", *kw.pop("extra", [])])


def test_round_trip_through_the_pretrained_embedder(corpus: Path, tmp_path: Path) -> None:
    args = _args()
    normalizer = WordNormalizer(lowercase=False, normalize_digits=True)
    wv = tv.train(tv.Corpus(corpus, normalizer), args)
    out = tmp_path / "vectors.txt"
    written = tv.write_vectors(wv, out)

    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0] == f"{written} 12" and len(lines) == written + 1
    # most frequent first, counted here independently of gensim
    counts = Counter(normalizer(w) for s in SENTENCES * 20 for w in s.split(" "))
    file_words = [line.split(" ")[0] for line in lines[1:]]
    assert sorted(file_words) == sorted(counts)
    assert [counts[w] for w in file_words] == sorted(counts.values(), reverse=True)
    # digits normalised as the data modules normalise them, case kept
    assert "0000" in file_words and "1999" not in file_words and "Paris" in file_words

    vocab = [PAD, UNK, "the", "Paris", "0000", "river", "unseen-word"]
    emb = WordEmbedding(vocab, dim=12, pretrained=str(out), lowercase_lookup=False)
    before = emb.embedding.weight.detach().clone()
    emb.load_pretrained()
    weight = emb.embedding.weight.detach()
    for i, word in enumerate(vocab[2:6], start=2):
        expected = torch.from_numpy(wv[word].copy())
        torch.testing.assert_close(weight[i], expected, atol=1e-5, rtol=0)
        assert torch.equal(weight[i], expected)  # 9 significant digits: float32 comes back exactly
    assert torch.equal(weight[6], before[6])  # a word missing from the file keeps its random row
    assert emb.coverage == pytest.approx(4 / 5)


def test_command_line_options(corpus: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    common = [str(corpus), "--dim", "8", "--min-count", "2", "--epochs", "1", "--workers", "1", "--seed", "3"]
    assert tv.main([common[0], str(a), *common[1:], "--lowercase", "--max-words", "5"]) == 0
    assert tv.main([common[0], str(b), *common[1:], "--lowercase", "--max-words", "5"]) == 0
    assert a.read_bytes() == b.read_bytes()  # one worker and one seed: the same file
    lines = a.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "5 8" and len(lines) == 6
    assert all(line.split(" ")[0] == line.split(" ")[0].lower() for line in lines[1:])
    assert lines[1].split(" ")[0] == "the"  # "The" and "the" merged by --lowercase: the most frequent word

    glove = tmp_path / "glove.txt.gz"
    assert tv.main([common[0], str(glove), *common[1:], "--no-header", "--model", "fasttext", "--cbow"]) == 0
    emb = WordEmbedding([PAD, UNK, "river", "Paris"], dim=8, pretrained=str(glove))
    emb.load_pretrained()
    assert emb.coverage == 1.0


def test_missing_gensim_is_one_clear_line(corpus: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "gensim", None)  # import gensim -> ImportError
    assert tv.main([str(corpus), str(tmp_path / "v.txt")]) == 2
    assert "pip install" in capsys.readouterr().err
    assert not (tmp_path / "v.txt").exists()


def test_script_usage_examples_write_inside_the_repository():
    """A usage line in a script's docstring names no absolute path (a newcomer copies it as it is; issue 34)."""
    bad = []
    for script in sorted(SCRIPTS.glob("*.py")):
        for number, line in enumerate(script.read_text().splitlines(), start=1):
            words = line.strip().split()
            if words[:1] == ["python"] and any(w.startswith("/") for w in words[2:]):
                bad.append(f"{script.name}:{number}: {line.strip()}")
    assert bad == []
