"""NERDataModule: vocabularies, labels, long sentences, carved validation, vocab_from, prediction files, batches,
gold heads from parse trees.

Expected values come from reading the column files independently here (``read_sentences``), not from the
package's readers.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from helpers.paths import FIXTURES
from helpers.shared_data import SHARED_DATA, requires_shared_data

from onlstm_tasks.data.core.examples import DataFormatError, Example
from onlstm_tasks.data.ner.module import NERDataModule, gold_heads, read_prediction_file, split_long
from onlstm_tasks.sample_data import sample_path

SAMPLE = sample_path("ner")
SPLITS = ("train", "validation", "test")
LOGGER = "onlstm_tasks.data.ner"


def columns_data(path, **options) -> NERDataModule:
    return NERDataModule(path=str(path), data_dir=None, revision=None, format="columns",
                         reader_options={"scheme": "iob2"}, **options)


def read_sentences(path: Path) -> list[tuple[list[str], list[str], int]]:
    """``(words, tags, line of the first token)`` of every sentence of a two-column file."""
    out, words, tags, first = [], [], [], 0
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if line.strip():
            word, tag = line.split()
            first = first or number
            words.append(word)
            tags.append(tag)
        elif words:
            out.append((words, tags, first))
            words, tags, first = [], [], 0
    if words:
        out.append((words, tags, first))
    return out


def write_columns(path: Path, sentences: Sequence[Sequence[str]]) -> Path:
    """Each sentence is a list of ``"word TAG"`` strings; blank lines between sentences."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n\n".join("\n".join(s) for s in sentences) + "\n", encoding="utf-8")
    return path


def digits_to_zero(word: str) -> str:
    return re.sub(r"\d", "0", word)


def to_iobes(tags: list[str]) -> list[str]:
    out = []
    for i, tag in enumerate(tags):
        continues = i + 1 < len(tags) and tags[i + 1] == "I-" + tag[2:]
        if tag == "O":
            out.append(tag)
        elif tag.startswith("B-"):
            out.append(("B-" if continues else "S-") + tag[2:])
        else:
            out.append(("I-" if continues else "E-") + tag[2:])
    return out


@pytest.fixture(scope="module")
def sample() -> dict[str, list[tuple[list[str], list[str], int]]]:
    return {split: read_sentences(SAMPLE / f"{split}.txt") for split in SPLITS}


@pytest.fixture(scope="module")
def dm() -> NERDataModule:
    data = columns_data(SAMPLE)
    data.setup()
    return data


# ---- vocabularies ------------------------------------------------------------------------------------------


def test_vocabularies_come_from_the_training_split_only(dm, sample) -> None:
    train_words = {digits_to_zero(w) for words, _, _ in sample["train"] for w in words}
    train_chars = {c for words, _, _ in sample["train"] for w in words for c in w}
    assert dm.word_vocab[:2] == ["<pad>", "<unk>"] and dm.char_vocab[:2] == ["<pad>", "<unk>"]
    assert sorted(dm.word_vocab[2:]) == sorted(train_words)  # no duplicates, nothing from other splits
    assert sorted(dm.char_vocab[2:]) == sorted(train_chars)

    index = {w: i for i, w in enumerate(dm.word_vocab)}
    loader = dm.test_dataloader()
    batch = loader.collate_fn(list(range(len(sample["test"]))))
    unknown = 0
    for b, (words, _, _) in enumerate(sample["test"]):
        expected = [index.get(digits_to_zero(w), 1) for w in words]
        assert batch.tokens.word_ids[b, : len(words)].tolist() == expected, words
        unknown += expected.count(1)
    assert unknown > 0, "test too weak: every test word also occurs in training"


@pytest.mark.parametrize(("lowercase", "normalize_digits", "words"), [
    (False, True, {"Paris", "paris", "PARIS", "0,000", "in", "00"}),
    (True, True, {"paris", "0,000", "in", "00"}),
    (False, False, {"Paris", "paris", "PARIS", "2,644", "in", "12"}),
    (True, False, {"paris", "2,644", "in", "12"}),
])
def test_lowercase_and_normalize_digits(tmp_path, lowercase, normalize_digits, words) -> None:
    write_columns(tmp_path / "train.txt", [["Paris B-LOC", "paris O", "PARIS B-LOC"], ["2,644 O", "in O", "12 O"]])
    write_columns(tmp_path / "validation.txt", [["in O"]])
    write_columns(tmp_path / "test.txt", [["pArIs B-LOC", "7,777 O", "12 O", "Rome B-LOC"]])
    data = columns_data(tmp_path, lowercase=lowercase, normalize_digits=normalize_digits)
    data.setup("test")
    assert set(data.word_vocab[2:]) == words and len(data.word_vocab) == len(words) + 2
    assert {"P", "A", "R", "I", "S", "a", "2", "6"} <= set(data.char_vocab)  # characters always see raw words

    index = {w: i for i, w in enumerate(data.word_vocab)}
    ids = next(iter(data.test_dataloader())).tokens.word_ids[0].tolist()
    assert ids[0] == (index["paris"] if lowercase else 1)
    assert ids[1] == (index["0,000"] if normalize_digits else 1)
    assert ids[2] == (index["00"] if normalize_digits else index["12"])
    assert ids[3] == 1  # Rome


def test_long_words_keep_their_word_id_and_lose_only_characters(tmp_path) -> None:
    write_columns(tmp_path / "train.txt", [["Abcdefgh O", "ab O"]])
    write_columns(tmp_path / "validation.txt", [["Abcdefgh O"]])
    data = columns_data(tmp_path, max_word_length=3)
    batch = next(iter(data.val_dataloader()))
    assert batch.tokens.word_ids[0, 0] == data.word_vocab.index("Abcdefgh")
    assert batch.tokens.char_ids.shape[-1] == 3
    assert batch.tokens.char_ids[0, 0].tolist() == [data.char_vocab.index(c) for c in "Abc"]


# ---- labels --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("scheme", "prefixes"), [("iob2", "BI"), ("iobes", "BIES")])
def test_labels_follow_the_scheme(sample, scheme, prefixes) -> None:
    data = columns_data(SAMPLE, tag_scheme=scheme)
    types = {t[2:] for _, tags, _ in sample["train"] for t in tags if t != "O"}
    assert types == {"PER", "ORG", "LOC", "MISC"}
    assert data.labels[0] == "O" and len(set(data.labels)) == len(data.labels)
    assert set(data.labels) == {"O"} | {f"{p}-{t}" for t in types for p in prefixes}
    assert data.tag_scheme == scheme


def test_every_prefix_of_a_type_seen_only_as_single_tokens(tmp_path) -> None:
    """Training has X only as one-token entities; longer X entities elsewhere still have labels."""
    write_columns(tmp_path / "train.txt", [["a B-X", "b O"]])
    write_columns(tmp_path / "validation.txt", [["a B-X", "a I-X", "a I-X", "b O"]])
    for scheme in ("iob2", "iobes"):
        data = columns_data(tmp_path, tag_scheme=scheme)
        data.setup("fit")
        batch = next(iter(data.val_dataloader()))
        expected = ["B-X", "I-X", "I-X", "O"] if scheme == "iob2" else ["B-X", "I-X", "E-X", "O"]
        assert [data.labels[i] for i in batch.tags[0].tolist()] == expected


@pytest.mark.parametrize(("split", "stage"), [("validation", "fit"), ("test", "test")])
def test_label_type_unseen_in_training_names_file_and_line(tmp_path, split, stage) -> None:
    write_columns(tmp_path / "train.txt", [["Ann B-PER", "ran O"]])
    other = "test" if split == "validation" else "validation"
    write_columns(tmp_path / f"{other}.txt", [["Ann B-PER"]])
    bad = write_columns(tmp_path / f"{split}.txt", [["Ann B-PER", "ran O"], ["in O", "Rome B-LOC"]])
    data = columns_data(tmp_path)
    # line 5 holds the label (its sentence starts on line 4)
    with pytest.raises(DataFormatError, match=rf"{re.escape(str(bad))}:5: .*'B-LOC'.*{split}"):
        data.setup(stage)


@pytest.mark.parametrize("scheme", ["iob2", "iobes"])
def test_tag_ids_are_the_label_indices(sample, scheme) -> None:
    data = columns_data(SAMPLE, tag_scheme=scheme)
    data.setup()
    for split in SPLITS:
        loader = {"train": data.train_dataloader, "validation": data.val_dataloader,
                  "test": data.test_dataloader}[split]()
        for batch in loader:
            for b, i in enumerate(batch.index):
                words, tags, _ = sample[split][i]
                expected = tags if scheme == "iob2" else to_iobes(tags)
                n = len(words)
                assert batch.tokens.words[b] == words
                assert [data.labels[k] for k in batch.tags[b, :n].tolist()] == expected
                assert torch.all(batch.tags[b, n:] == 0)


# ---- long sentences ----------------------------------------------------------------------------------------


def example(tags: Sequence[str]) -> Example:
    return Example(words=tuple(f"w{i}" for i in range(len(tags))), tags=tuple(tags), source="mem", line=7)


@pytest.mark.parametrize(("tags", "max_length", "cuts"), [
    # the cut moves back before B-PER rather than cutting the entity
    ("O O B-PER I-PER I-PER O B-LOC I-LOC O O".split(), 4, [2, 6]),
    # a one-token first piece is still better than cutting the entity
    ("O B-PER I-PER I-PER".split(), 3, [1]),
    # an entity longer than max_length has to be cut
    ("B-PER I-PER I-PER I-PER I-PER O".split(), 3, [3]),
    ("O O O O O".split(), 2, [2, 4]),
    ("O O".split(), 5, []),
])
def test_split_long_hand_cases(tags, max_length, cuts) -> None:
    pieces = split_long(example(tags), max_length)
    bounds = [0, *cuts, len(tags)]
    assert [len(p) for p in pieces] == [b - a for a, b in zip(bounds, bounds[1:])]
    for piece, start in zip(pieces, bounds):
        assert piece.words == tuple(f"w{i}" for i in range(start, start + len(piece)))
        expected = list(tags[start: start + len(piece)])
        if expected[0].startswith("I-"):
            expected[0] = "B-" + expected[0][2:]
        assert list(piece.tags) == expected
        assert piece.source == "mem" and piece.line == 7 and piece.offsets is None


def test_split_long_random_tags_greedy_and_lossless() -> None:
    """Pieces are as long as possible without ending inside an entity, unless every allowed cut is inside one."""
    rng = random.Random(0)
    for _ in range(400):
        tags, n = [], rng.randint(1, 30)
        while len(tags) < n:
            if rng.random() < 0.5:
                tags.append("O")
            else:
                typ = rng.choice("XY")
                tags += [f"B-{typ}"] + [f"I-{typ}"] * rng.randint(0, 6)
        tags = tags[:n]
        max_length = rng.randint(1, 8)
        pieces = split_long(example(tags), max_length)
        assert [w for p in pieces for w in p.words] == [f"w{i}" for i in range(n)]
        start = 0
        for piece in pieces[:-1]:
            end = start + len(piece)
            outside = [c for c in range(start + 1, min(start + max_length, n) + 1)
                       if c == n or not tags[c].startswith("I-")]
            assert end == (max(outside) if outside else start + max_length), (tags, max_length, start)
            start = end
        assert 1 <= len(pieces[-1]) <= max_length


def test_long_sentences_are_split_and_counted(sample, caplog) -> None:
    limit = 10
    with caplog.at_level(logging.INFO, logger=LOGGER):
        data = columns_data(SAMPLE, max_length=limit)
        data.setup()
    for split in SPLITS:
        long = sum(len(words) > limit for words, _, _ in sample[split])
        assert long > 0
        assert f"{split}: {long} sentences longer than max_length={limit} were split" in caplog.text
        examples = data.examples(split)
        assert max(len(ex) for ex in examples) <= limit
        # nothing truncated or reordered: the token stream is unchanged
        assert [w for ex in examples for w in ex.words] == [w for words, _, _ in sample[split] for w in words]
        assert len(examples) >= len(sample[split]) + long


def test_long_sentences_can_be_rejected(tmp_path) -> None:
    write_columns(tmp_path / "validation.txt", [["a O"]])
    train = write_columns(tmp_path / "train.txt", [["a O", "b O"], ["a O", "b O", "c O", "d O", "e O"]])
    data = columns_data(tmp_path, max_length=4, long_sentences="reject")
    with pytest.raises(DataFormatError, match=rf"{re.escape(str(train))}:4: sentence of 5 tokens exceeds max_length=4"):
        data.setup("fit")


# ---- carving a validation split -------------------------------------------------------------------------------


def carved(seed: int = 0, ratio: float = 0.1) -> NERDataModule:
    return NERDataModule(path=str(SAMPLE), data_dir=None, revision=None, format="columns",
                         reader_options={"scheme": "iob2"}, data_files={"train": "train.txt", "test": "test.txt"},
                         seed=seed, validation_ratio=ratio)


def test_missing_validation_split_is_carved_from_train(sample, caplog) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        data = carved()
        train, validation = data.examples("train"), data.examples("validation")
    assert "40 of 400 training sentences held out (seed 0)" in caplog.text
    assert (len(train), len(validation)) == (360, 40)
    lines = [ex.line for ex in train] + [ex.line for ex in validation]
    assert sorted(lines) == sorted(first for _, _, first in sample["train"])  # disjoint, together all of train
    assert [ex.line for ex in train] == sorted(ex.line for ex in train)  # file order kept
    # the vocabulary comes from what is left for training
    assert set(data.word_vocab[2:]) == {digits_to_zero(w) for ex in train for w in ex.words}

    again = carved()
    assert [ex.line for ex in again.examples("validation")] == [ex.line for ex in validation]
    other = carved(seed=1)
    assert [ex.line for ex in other.examples("validation")] != [ex.line for ex in validation]
    assert len(carved(ratio=0.25).examples("validation")) == 100


# ---- vocabularies from a checkpoint ----------------------------------------------------------------------------


def tagger_checkpoint(data: NERDataModule, path: Path) -> Path:
    from helpers.model_invariants import save_checkpoint

    from onlstm_tasks.tasks.ner import NERTagger

    torch.manual_seed(0)
    return save_checkpoint(NERTagger(data.word_vocab, data.char_vocab, data.labels), path)


def test_vocab_from_checkpoint_needs_no_training_data(dm, tmp_path) -> None:
    ckpt = tagger_checkpoint(dm, tmp_path / "tagger.ckpt")
    text = tmp_path / "input.txt"
    text.write_text("Thornmoor Athletic beat Zzyzx 2,644 to 3 .\n", encoding="utf-8")
    data = NERDataModule(path=None, vocab_from=str(ckpt), predict_file=str(text), pretokenized=True)
    assert data.word_vocab == dm.word_vocab and data.char_vocab == dm.char_vocab and data.labels == dm.labels
    data.setup("predict")
    with pytest.raises(ValueError, match="no 'train' split"):
        data.examples("train")
    batch = next(iter(data.predict_dataloader()))
    words = text.read_text(encoding="utf-8").split()
    assert batch.tokens.words == [words]
    index = {w: i for i, w in enumerate(dm.word_vocab)}
    assert batch.tokens.word_ids[0].tolist() == [index.get(digits_to_zero(w), 1) for w in words]
    assert batch.tokens.word_ids[0, 3] == 1  # Zzyzx


def test_vocab_from_iobes_checkpoint_encodes_gold_tags_in_its_labels_scheme(sample, tmp_path) -> None:
    ckpt = tagger_checkpoint(columns_data(SAMPLE, tag_scheme="iobes"), tmp_path / "iobes.ckpt")
    data = columns_data(SAMPLE, vocab_from=str(ckpt))  # tag_scheme left at its default
    assert any(label.startswith("S-") for label in data.labels)
    data.setup("test")
    assert data.tag_scheme == "iobes"
    batch = data.test_dataloader().collate_fn(list(range(len(sample["test"]))))
    for b, (words, tags, _) in enumerate(sample["test"]):
        assert [data.labels[k] for k in batch.tags[b, : len(words)].tolist()] == to_iobes(tags)


def test_vocab_from_something_else_fails_clearly(tmp_path) -> None:
    path = tmp_path / "other.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {"hidden": 3}}, path)
    with pytest.raises(ValueError, match=r"other\.ckpt.*lack \['word_vocab', 'char_vocab', 'labels'\]"):
        NERDataModule(path=None, vocab_from=str(path)).labels


# ---- prediction files ----------------------------------------------------------------------------------------


def test_raw_prediction_file_offsets_slice_the_text(tmp_path) -> None:
    path = tmp_path / "raw.txt"
    lines = ["Dr. Ann Lee visited the U.S. on 3.5 days' notice.", "", "  (Quandor Bank) said: \"no\"  ", "Ok"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    examples = read_prediction_file(str(path), pretokenized=False)
    assert [ex.line for ex in examples] == [1, 2, 3, 4]  # every line, the empty one too (no words)
    assert examples[1].words == () and examples[1].text == ""
    for ex in examples:
        assert ex.source == str(path) and ex.text == lines[ex.line - 1]
        assert [ex.text[a:b] for a, b in ex.offsets] == list(ex.words)
        # no character lost: the non-space characters of the line are exactly those of the tokens
        assert "".join(ex.words) == "".join(ex.text.split())
    assert examples[0].words[:3] == ("Dr.", "Ann", "Lee") and examples[0].words[-1] == "."


def test_pretokenized_prediction_file(tmp_path) -> None:
    path = tmp_path / "tokens.txt"
    path.write_text("New  York\tis a a city .\n\nx\n", encoding="utf-8")
    examples = read_prediction_file(str(path), pretokenized=True)
    assert [ex.words for ex in examples] == [("New", "York", "is", "a", "a", "city", "."), (), ("x",)]
    assert [ex.line for ex in examples] == [1, 2, 3]
    for ex in examples:
        assert [ex.text[a:b] for a, b in ex.offsets] == list(ex.words)
    assert examples[0].offsets[3:5] == ((13, 14), (15, 16))  # a repeated token gets its own position


def test_prediction_file_unicode_lines_and_bom(tmp_path) -> None:
    """A BOM is not a token; only \\n ends a line (U+2028 or a form feed inside a sentence does not split it); a
    non-breaking space inside a pre-tokenised token does not split the token (as in the column readers)."""
    path = tmp_path / "bom.txt"
    path.write_text("Hello world\u2028again\x0cnow\nTen\u00a0000 people\n", encoding="utf-8-sig")
    raw = read_prediction_file(str(path), pretokenized=False)
    assert raw[0].words == ("Hello", "world", "again", "now") and [ex.line for ex in raw] == [1, 2]
    pre = read_prediction_file(str(path), pretokenized=True)
    assert pre[0].words[0] == "Hello" and pre[1].words == ("Ten\u00a0000", "people")
    for ex in raw + pre:
        assert [ex.text[a:b] for a, b in ex.offsets] == list(ex.words)


@pytest.mark.parametrize("content", [b"", b"\n\n  \n", b"\t\r\n"])
def test_empty_prediction_file_is_an_error(tmp_path, content) -> None:
    path = tmp_path / "empty.txt"
    path.write_bytes(content)
    for pretokenized in (False, True):
        with pytest.raises(DataFormatError, match=re.escape(str(path))):
            read_prediction_file(str(path), pretokenized)


def test_non_utf8_prediction_file_is_an_error(tmp_path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes("fine line\ncaf\u00e9 au lait\n".encode("latin-1"))
    with pytest.raises(DataFormatError, match=rf"{re.escape(str(path))}.*UTF-8"):
        read_prediction_file(str(path), pretokenized=False)


def test_predict_loader_reads_the_prediction_file(dm, tmp_path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("Thornmoor Athletic won.\nShe left Ostervale on Saturday!\n", encoding="utf-8")
    data = columns_data(SAMPLE, predict_file=str(path))
    data.setup("predict")
    batches = list(data.predict_dataloader())
    got = {i: words for batch in batches for i, words in zip(batch.index, batch.tokens.words)}
    assert got == {0: ["Thornmoor", "Athletic", "won", "."], 1: ["She", "left", "Ostervale", "on", "Saturday", "!"]}
    assert all(torch.all(batch.tags == 0) for batch in batches)
    with pytest.raises(ValueError, match="predict_file"):
        columns_data(SAMPLE).examples("predict")


# ---- batches ------------------------------------------------------------------------------------------------


def test_batch_tensors(dm, sample) -> None:
    for split, loader in (("train", dm.train_dataloader()), ("validation", dm.val_dataloader()),
                          ("test", dm.test_dataloader())):
        seen = []
        for batch in loader:
            tokens = batch.tokens
            lengths = torch.tensor([len(sample[split][i][0]) for i in batch.index])
            B, T = tokens.mask.shape
            assert tokens.word_ids.shape == batch.tags.shape == (B, T) and len(tokens.words) == B
            assert T == int(lengths.max())
            assert torch.equal(tokens.mask, torch.arange(T)[None, :] < lengths[:, None])  # prefix masks
            assert torch.equal(tokens.word_ids != 0, tokens.mask)  # 0 exactly at padding
            assert torch.all(tokens.char_ids[~tokens.mask] == 0)
            n_chars = (tokens.char_ids != 0).sum(dim=-1)
            for b, i in enumerate(batch.index):
                words = sample[split][i][0]
                assert tokens.words[b] == words
                assert n_chars[b, : len(words)].tolist() == [min(len(w), 30) for w in words]
            seen += batch.index
        assert sorted(seen) == list(range(len(sample[split]))), split


# ---- gold trees from parse trees ------------------------------------------------------------------------------

CONLL2012 = FIXTURES / "ner" / "conll2012"
# train/nw/toy_0001 sentence 1: (TOP(S(NP Clara Mendes)(VP left (NP Porto)(PRN -LRB- (ADVP twice) -RRB-))(. .)))
# Collins rules by hand: NP -> its last NNP (Mendes); VP -> VBD (left); PRN -> first non-punctuation child
# (twice); S -> VP. So left is the root; Clara -> Mendes -> left; Porto, twice, "." -> left; the brackets -> twice.
CLARA = ("Clara", "Mendes", "left", "Porto", "(", "twice", ")", ".")
CLARA_HEADS = [2, 3, 0, 3, 6, 3, 6, 3]


def conll2012_data(path=CONLL2012, **options) -> NERDataModule:
    dm = NERDataModule(path=str(path), data_dir=None, revision=None, format="conll2012", batch_size=2,
                       eval_batch_size=2, **options)
    dm.setup("fit")
    return dm


def test_gold_heads_from_parse_trees_reach_the_batches() -> None:
    from onlstm_tasks.data.core.gold_trees import example_heads
    from onlstm_tasks.trees.heads import heads_to_tensor

    dm = conll2012_data()
    examples = dm.examples("train")
    assert all(ex.heads is None and ex.parse_tree for ex in examples)  # no heads column: trees only
    i = [ex.words for ex in examples].index(CLARA)
    batch = dm.train_dataloader().collate_fn([i])
    assert batch.heads.tolist() == [[t if h == 0 else h - 1 for t, h in enumerate(CLARA_HEADS)]]
    for split, loader in (("train", dm.train_dataloader()), ("validation", dm.val_dataloader())):
        for batch in loader:
            expected = [example_heads(dm.examples(split)[i]) for i in batch.index]
            assert torch.equal(batch.heads, heads_to_tensor(expected, batch.tokens.mask.size(1)))


def test_long_sentences_cut_the_parse_tree_heads_to_each_piece() -> None:
    dm = conll2012_data(max_length=4)
    pieces = [ex for ex in dm.examples("train") if ex.sentence_id.startswith("nw/toy/00/toy_0001/0/0[")]
    assert [p.words for p in pieces] == [CLARA[:4], CLARA[4:]]
    # ( twice ) . -> "(" and ")" keep twice (piece token 2); twice and "." lose their head (left) and become roots
    # cut when asked for (the data module reads trees only for models that read them)
    assert [tuple(gold_heads(p)) for p in pieces] == [(2, 3, 0, 3), (2, 0, 2, 0)]
    assert all(p.parse_tree is None for p in pieces)
    assert [p.heads for p in split_long(pieces[0].meta["cut_from"][0], 4)] == [(2, 3, 0, 3),
                                                                                           (2, 0, 2, 0)]


CONLL2012_ROWS = """#begin document (nw/x/00/x_0001); part 000
nw/x/00/x_0001 0 0 Kim NNP (TOP(S(NP*) - - - - (PERSON) -
nw/x/00/x_0001 0 1 sleeps VBZ (VP*) - - - - * -
nw/x/00/x_0001 0 2 . . *)) - - - - * -

nw/x/00/x_0001 0 0 Th- XX * - - - - * -
nw/x/00/x_0001 0 1 , , * - - - - * -

#end document
"""


def test_sentences_without_a_parse_tree_get_no_arcs_and_are_counted(tmp_path, caplog) -> None:
    path = tmp_path / "x.gold_conll"
    path.write_text(CONLL2012_ROWS, encoding="utf-8")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        dm = conll2012_data(tmp_path, data_files={"train": str(path), "validation": str(path)})
    assert [ex.parse_tree is None for ex in dm.examples("train")] == [False, True]  # "XX": no parse information
    assert "train: 1 of 2 sentences have no gold tree" in caplog.text and "its own root (no arcs)" in caplog.text
    batch = dm.train_dataloader().collate_fn([0, 1])
    assert batch.heads.tolist() == [[1, 1, 1], [0, 1, 2]]  # Kim -> sleeps <- . ; Th- and "," point to themselves


def test_a_parse_tree_that_does_not_fit_the_words_names_the_sentence() -> None:
    tree = "(TOP(S(NP (NNP Kim) )(VP (VBZ sleeps) ) (. .) ))"
    where = r"on/train:3 \(sentence doc/0/1\)"
    for words, message in ((("Kim", "snores", "."), "the parse tree's leaf 2 is 'sleeps' but word 2 is 'snores'"),
                           (("Kim", "sleeps"), "the parse tree has 3 tokens but the sentence has 2 words")):
        example = Example(words=words, tags=("O",) * len(words), parse_tree=tree, source="on/train", line=3,
                          sentence_id="doc/0/1")
        with pytest.raises(DataFormatError, match=f"{where}: {message}"):
            split_long(example, 1)
    broken = Example(words=("Kim",), parse_tree="(TOP (NNP Kim)", source="on/train", line=3, sentence_id="doc/0/1")
    with pytest.raises(DataFormatError, match=f"{where}: the parse tree cannot be read: .*unbalanced brackets"):
        split_long(broken, 1)


@requires_shared_data
def test_shared_ontonotes_batches_carry_heads_from_the_parse_trees(caplog) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        dm = NERDataModule(path=str(SHARED_DATA / "conll2012_ontonotesv5"), format="ontonotes", max_length=40)
        dm.setup("fit")
    for loader in (dm.train_dataloader(), dm.val_dataloader()):
        assert all(batch.heads is not None for batch in loader)
    # 23 disfluent training sentences ("XX" tokens) have no parse tree in OntoNotes
    assert re.search(r"train: 2\d of [\d,]+ sentences have no gold tree", caplog.text)


def test_unset_workers_build_batches_in_the_training_process_on_a_gpu_too(monkeypatch) -> None:
    """No loader process unless asked for, on a GPU as on the CPU (receiving a batch from one costs the training
    process several times building it: ``scripts/benchmark_training.py --loader-only``); batches come pinned there."""
    data = columns_data(SAMPLE)
    data.setup("fit")
    monkeypatch.setattr(type(data), "_on_gpu", lambda self: True)
    loader = data.train_dataloader()
    assert loader.num_workers == 0 and loader.pin_memory
    assert columns_data(SAMPLE, num_workers=2).train_dataloader().num_workers == 2
