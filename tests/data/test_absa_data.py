"""AspectSentimentDataModule: labels, carved validation, batches and aspect masks, vocab_from, prediction files,
the shared laptops kit in both of its formats, and the repairs of gold trees counted per split."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import pytest
import torch
from helpers.paths import FIXTURES as FIXTURE_ROOT
from helpers.shared_data import SHARED_DATA, requires_shared_data

from onlstm_tasks.data.absa.module import AspectBatch, AspectSentimentDataModule, read_aspect_prediction_file
from onlstm_tasks.data.absa.readers import read_semeval_xml
from onlstm_tasks.data.core.examples import DataFormatError

torch.set_num_threads(1)

FIXTURES = FIXTURE_ROOT / "absa"
LOGGER = "onlstm_tasks.data.absa"


def xml_data(**options) -> AspectSentimentDataModule:
    return AspectSentimentDataModule(path=str(FIXTURES / "xml"), **options)


def sentence(example) -> tuple[str, str]:
    return example.source, example.sentence_id


def key(example) -> tuple:
    return example.words, example.aspect, example.label


def test_labels_are_the_sorted_training_classes() -> None:
    files = {"train": "Gadgets_Train_v1.xml", "validation": "Gadgets_Test_Gold.xml"}
    assert xml_data(data_files=files).labels == ["negative", "neutral", "positive"]
    assert xml_data(data_files=files, keep_conflict=True).labels == ["conflict", "negative", "neutral", "positive"]
    # from the training part only: with seed 0 the one neutral sentence (107) is carved out for validation
    carved = xml_data()
    assert carved.labels == ["negative", "positive"]
    with pytest.raises(DataFormatError, match=r"Gadgets_Train_v1\.xml:42: label 'neutral' in the validation split"):
        carved.setup("validate")


def test_validation_is_carved_by_sentence_with_a_fixed_seed(caplog) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        data = xml_data(validation_ratio=0.5)
        train, validation = data.examples("train"), data.examples("validation")
    # fixture train: 8 aspects in 5 sentences (101, 103, 104, 105, 107) once the conflict one is dropped
    assert "2 of 5 training sentences" in caplog.text and "held out (seed 0)" in caplog.text
    assert not {sentence(e) for e in train} & {sentence(e) for e in validation}  # no sentence in both
    assert len({sentence(e) for e in validation}) == 2
    whole, _ = read_semeval_xml(FIXTURES / "xml" / "Gadgets_Train_v1.xml")
    assert sorted(e.line for e in train + validation) == [e.line for e in whole]  # together all of train
    assert [e.line for e in train] == sorted(e.line for e in train)  # file order kept
    again = xml_data(validation_ratio=0.5).examples("validation")
    assert [key(e) for e in again] == [key(e) for e in validation]
    others = {tuple(sorted({e.sentence_id for e in xml_data(validation_ratio=0.5, seed=s).examples("validation")}))
              for s in range(6)}
    assert len(others) > 1  # the seed chooses the held-out sentences
    # the vocabulary comes from what is left for training
    assert set(data.word_vocab[2:]) == {w for e in train for w in e.words}


def test_a_validation_split_of_the_source_is_used_as_is(caplog) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER):
        data = xml_data(data_files={"train": "Gadgets_Train_v1.xml", "dev": "Gadgets_Test_Gold.xml"})
        assert len(data.examples("train")) == 8 and len(data.examples("validation")) == 4
    assert "held out" not in caplog.text


def test_batches_mark_the_aspect_tokens() -> None:
    data = xml_data(keep_conflict=True, data_files={"train": "Gadgets_Train_v1.xml", "test": "Gadgets_Test_Gold.xml"},
                    validation_ratio=0.2)
    data.setup("test")
    examples = data.examples("test")
    batch = data.test_dataloader().collate_fn(list(range(len(examples))))
    assert isinstance(batch, AspectBatch) and batch.heads is None and batch.index == [0, 1, 2, 3]
    assert batch.labels.tolist() == [data.labels.index(e.label) for e in examples]
    assert batch.aspect_mask.dtype == torch.bool and batch.aspect_mask.shape == batch.tokens.mask.shape
    assert not (batch.aspect_mask & ~batch.tokens.mask).any()
    for b, e in enumerate(examples):
        start, end = e.aspect
        assert batch.aspect_mask[b].nonzero().flatten().tolist() == list(range(start, end))
        assert batch.tokens.words[b] == list(e.words)
    # the loaders cover every example once, in length buckets
    data.setup("fit")
    seen = [i for b in data.train_dataloader() for i in b.index]
    assert sorted(seen) == list(range(len(data.examples("train"))))
    assert [i for b in data.val_dataloader() for i in b.index] != []


def test_word_normalisation_options() -> None:
    assert "the" in xml_data(lowercase=True).word_vocab and "The" not in xml_data(lowercase=True).word_vocab
    assert "The" in xml_data().word_vocab


def test_a_test_label_unseen_in_training_is_an_error() -> None:
    # train on the test fixture (no conflict), evaluate on the train fixture, whose sentence 106 is conflict
    data = xml_data(keep_conflict=True, data_files={"train": "Gadgets_Test_Gold.xml", "test": "Gadgets_Train_v1.xml"})
    with pytest.raises(DataFormatError, match=r"Gadgets_Train_v1\.xml:36: label 'conflict' in the test split"):
        data.setup("test")


# ---- vocabularies from a checkpoint ----------------------------------------------------------------------------


def fake_checkpoint(path: Path, **hparams) -> Path:
    torch.save({"state_dict": {}, "hyper_parameters": hparams}, path)
    return path


def test_vocab_from_checkpoint_needs_no_training_data(tmp_path) -> None:
    trained = xml_data()
    ckpt = fake_checkpoint(tmp_path / "absa.ckpt", word_vocab=trained.word_vocab, char_vocab=trained.char_vocab,
                           labels=trained.labels)
    data = AspectSentimentDataModule(path=None, vocab_from=str(ckpt), predict_file=str(FIXTURES / "predict.jsonl"))
    assert (data.word_vocab, data.char_vocab, data.labels) == (trained.word_vocab, trained.char_vocab,
                                                               trained.labels)
    data.setup("predict")
    batch = next(iter(data.predict_dataloader()))
    assert (batch.labels == -100).all()
    assert batch.aspect_mask.sum().item() == sum(e.aspect[1] - e.aspect[0] for e in data.examples("predict"))
    with pytest.raises(ValueError, match="no 'train' split"):
        data.examples("train")


def test_vocab_from_a_non_absa_checkpoint_fails_clearly(tmp_path) -> None:
    ner = fake_checkpoint(tmp_path / "ner.ckpt", word_vocab=["<pad>", "<unk>"], char_vocab=["<pad>", "<unk>"],
                          labels=["O", "B-PER", "I-PER"])
    with pytest.raises(ValueError, match=r"ner\.ckpt: the checkpoint's labels .* are not polarities"):
        AspectSentimentDataModule(path=None, vocab_from=str(ner)).labels
    other = fake_checkpoint(tmp_path / "other.ckpt", hidden=3)
    with pytest.raises(ValueError, match=r"other\.ckpt.*lack \['word_vocab', 'char_vocab', 'labels'\]"):
        AspectSentimentDataModule(path=None, vocab_from=str(other)).labels


# ---- prediction files ------------------------------------------------------------------------------------------


def test_prediction_file_locates_aspects_by_ordinal_or_offsets() -> None:
    examples = read_aspect_prediction_file(str(FIXTURES / "predict.jsonl"))
    spans = [(e.words[e.aspect[0]:e.aspect[1]], e.line, e.label) for e in examples]
    assert spans == [
        (("hinge",), 1, None),  # no ordinal: the first occurrence
        (("hinge", "cover"), 2, None),
        (("fan",), 3, None),  # occurrence 0 of "fan" is inside "fans": ordinals count substrings, as the hub does
        (("Zorblax", "ports"), 5, None),  # blank line 4 skipped
    ]
    assert examples[2].aspect == (5, 6)
    assert all(e.text[a:b] == w for e in examples for w, (a, b) in zip(e.words, e.offsets))


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ('{"text": "Good keys.", "aspect": "keys", "ordinal": 1}', "expected occurrence 1 (0-based) of the aspect"),
        ('{"text": "Good keys.", "aspect": "keys", "from": 0, "to": 4}', "give 'Good' but the aspect is 'keys'"),
        ('{"text": "Good keys.", "aspect": "keys", "from": 5}', 'expected integer "from" and "to"'),
        ('{"text": "Good keys.", "aspect": "keys", "from": 5, "to": 9, "ordinal": 0}', "found both"),
        ('{"text": "Good keys."}', 'expected a non-empty string "aspect", found None'),
        ('{"aspect": "keys"}', 'expected a non-empty string "text"'),
        ('{"text": "Good keys.", "aspect": "keys"', "invalid JSON"),
        ('["Good keys.", "keys"]', "expected a JSON object, found list"),
        ('{"text": "Good keys.", "aspect": "keys", "ordinal": "0"}', '"ordinal" to be a 0-based occurrence'),
    ],
)
def test_bad_prediction_lines_name_file_and_line(tmp_path, row, expected) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"text": "Fine lid.", "aspect": "lid"}) + "\n" + row + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError) as err:
        read_aspect_prediction_file(str(path))
    assert str(err.value).startswith(f"{path}:2: ") and expected in str(err.value), str(err.value)


def test_predict_needs_a_file() -> None:
    with pytest.raises(ValueError, match="predict needs data.predict_file"):
        xml_data().examples("predict")


# ---- the shared kit ---------------------------------------------------------------------------------------------


@requires_shared_data
def test_shared_laptops_data_module_builds_on_parquet_and_xml() -> None:
    built = {}
    for kind, path in (("parquet", SHARED_DATA / "setfit-absa-semeval-laptops"),
                       ("xml", SHARED_DATA / "semeval2014_laptops")):
        data = AspectSentimentDataModule(path=str(path), batch_size=64)
        data.setup("fit")
        data.setup("test")
        assert data.labels == ["negative", "neutral", "positive"]
        batch = next(iter(data.train_dataloader()))
        assert batch.aspect_mask.any(1).all() and not (batch.aspect_mask & ~batch.tokens.mask).any()
        built[kind] = data
    parquet, xml = built["parquet"], built["xml"]
    assert parquet.word_vocab == xml.word_vocab and parquet.char_vocab == xml.char_vocab
    counts = {}
    for split in ("train", "validation", "test"):
        assert Counter(key(e) for e in parquet.examples(split)) == Counter(key(e) for e in xml.examples(split))
        counts[split] = dict(Counter(e.label for e in xml.examples(split)))
    # conflict dropped (45 train, 16 test); 146 of 1,462 training sentences carved out as validation
    assert counts == {"train": {"positive": 878, "negative": 776, "neutral": 406},
                      "validation": {"positive": 109, "negative": 90, "neutral": 54},
                      "test": {"positive": 341, "negative": 128, "neutral": 169}}


# ---- gold trees: repairs counted per split ---------------------------------------------------------------------

PARSES = FIXTURES / "parses"
SPLIT_FILES = {"train": "Gadgets_Train_v1.xml", "validation": "Gadgets_Test_Gold.xml", "test": "Gadgets_Test_Gold.xml"}


def test_gold_tree_repairs_are_counted_and_logged_per_split(tmp_path, caplog) -> None:
    (tmp_path / "Gadgets_Train_depparsed.json").write_text((PARSES / "Gadgets_Train_depparsed.json").read_text())
    rows = {row["sentence"]: row for row in json.loads((PARSES / "Gadgets_Test_Gold_depparsed.json").read_text())}
    charger, display = rows["The charger is bulky."], rows["Great display, weak hinges."]
    # a second "." the text does not have (dropped) ...
    charger["tokens"].append(".")
    charger["dependencies"].append(["punct", 4, 6])
    # ... no token for the final "." (the word is attached to its neighbour) ...
    display["tokens"].pop()
    display["dependencies"] = [arc for arc in display["dependencies"] if arc[2] != 6]
    # ... and a second, different parse of a sentence (ignored: the first one is kept)
    setup = rows["Setup took ten minutes with the wizard."]
    rerun = {**setup, "tokens": ["nothing", "matches"], "dependencies": [["root", 0, 1], ["dep", 1, 2]]}
    (tmp_path / "Gadgets_Test_Gold_depparsed.json").write_text(json.dumps([*rows.values(), rerun]))
    data = AspectSentimentDataModule(path=str(FIXTURES / "xml"), parses=str(tmp_path), data_files=SPLIT_FILES)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        data.setup("test")
    assert "gold trees of 9 sentences from" in caplog.text and "(1 texts parsed more than once" in caplog.text
    assert ("gold trees for split test: 3 sentences; 1 parser tokens without a match dropped; 1 words attached "
            "to a neighbour; 0 extra roots attached to the highest word; 0 flat fallbacks; 1 duplicate texts "
            "(first parse kept)") in caplog.text
    by_words = {tuple(words): heads[: len(words)] for batch in data.test_dataloader()
                for words, heads in zip(batch.tokens.words, batch.heads.tolist())}
    assert by_words[("Great", "display", ",", "weak", "hinges", ".")] == [1, 1, 1, 4, 1, 4]  # "." -> hinges
    assert by_words[("The", "charger", "is", "bulky", ".")] == [1, 3, 3, 3, 3]  # the parser's extra "." is gone
    assert by_words[("Setup", "took", "ten", "minutes", "with", "the", "wizard", ".")][1] == 1  # first parse


def test_a_parse_matching_no_word_gives_a_counted_flat_tree(tmp_path, caplog) -> None:
    (tmp_path / "Gadgets_Train_depparsed.json").write_text((PARSES / "Gadgets_Train_depparsed.json").read_text())
    rows = json.loads((PARSES / "Gadgets_Test_Gold_depparsed.json").read_text())
    rows[1] = {**rows[1], "tokens": ["zzz"], "dependencies": [["root", 0, 1]]}  # The charger is bulky.
    (tmp_path / "Gadgets_Test_Gold_depparsed.json").write_text(json.dumps(rows))
    data = AspectSentimentDataModule(path=str(FIXTURES / "xml"), parses=str(tmp_path), data_files=SPLIT_FILES)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        data.setup("test")
    assert "split test: 3 sentences; 1 parser tokens without a match dropped; 0 words attached" in caplog.text
    assert "1 flat fallbacks" in caplog.text
    batch = next(iter(data.test_dataloader()))
    heads = {tuple(w): h[: len(w)] for w, h in zip(batch.tokens.words, batch.heads.tolist())}
    assert heads[("The", "charger", "is", "bulky", ".")] == [0, 0, 0, 0, 0]  # every word under the first


def test_vocabulary_counts_each_training_sentence_once_however_many_aspects_it_has() -> None:
    data = xml_data(data_files={"train": "Gadgets_Train_v1.xml", "validation": "Gadgets_Test_Gold.xml"})
    data.setup("fit")
    words = data._vocabularies()[0]
    examples = data.examples("train")
    per_sentence: dict = {}
    for ex in examples:
        per_sentence.setdefault(ex.sentence_id, ex.words)
    assert len(per_sentence) < len(examples), "the fixture needs a sentence with several aspects"
    expected = Counter(data.normalizer(w) for ws in per_sentence.values() for w in ws)
    assert dict(words.counts) == dict(expected)
    multi = Counter(ex.sentence_id for ex in examples)
    only_in_multi = [w for w, c in expected.items() if c == 1
                     and any(multi[sid] > 1 and w in map(data.normalizer, ws) for sid, ws in per_sentence.items())]
    assert only_in_multi and all(words.counts[w] == 1 for w in only_in_multi)
