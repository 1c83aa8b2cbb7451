"""Aspect-sentiment readers (onlstm_tasks.data.absa.readers): hand-written fixtures in the three formats, bad
inputs, and the shared laptops kit (hub parquet vs organisers' XML)."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import datasets
import pytest
from datasets import ClassLabel, Dataset, Features, Value
from helpers.paths import FIXTURES as FIXTURE_ROOT
from helpers.shared_data import SHARED_DATA, requires_shared_data

from onlstm_tasks.data.absa.readers import (
    READERS,
    file_format,
    load_absa_splits,
    nth_occurrence,
    read_semeval_xml,
    read_seg,
    read_setfit_rows,
    token_span,
)
from onlstm_tasks.data.core.examples import DataFormatError

FIXTURES = FIXTURE_ROOT / "absa"
BAD = FIXTURES / "bad"

# (words of the aspect, label, sentence id) of every aspect in fixtures/absa/xml/Gadgets_Train_v1.xml, in order
TRAIN_ASPECTS = [
    (("keyboard",), "positive", "101"),
    (("battery", "life"), "negative", "101"),
    (("fan",), "negative", "103"),
    (("fan",), "negative", "103"),
    (('"', "quick", "start", '"', "guide"), "negative", "104"),
    (("price",), "positive", "104"),
    (("trackpad's",), "positive", "105"),  # the term "trackpad" ends inside the token
    (("speakers",), "conflict", "106"),
    (("webcam",), "neutral", "107"),
]


def aspect_words(example) -> tuple[str, ...]:
    start, end = example.aspect
    return example.words[start:end]


def key(example) -> tuple:
    return example.words, example.aspect, example.label


def assert_points_at(err: pytest.ExceptionInfo, source: Path | str, line: int | None, *expected: str) -> None:
    message = str(err.value)
    prefix = f"{source}:{line}: " if line is not None else f"{source}: "
    assert message.startswith(prefix), message
    for part in expected:
        assert part in message, message


# ------------------------------------------------------------------------------------------------ helpers


@pytest.mark.parametrize(
    ("text", "term", "ordinal", "start"),
    [("a fan and a fan", "fan", 0, 2), ("a fan and a fan", "fan", 1, 12), ("a fan", "fan", 1, None),
     ("aaaa", "aa", 1, 2), ("aaa", "aa", 1, None)],  # counted without overlaps, as str.count does
)
def test_nth_occurrence(text, term, ordinal, start):
    assert nth_occurrence(text, term, ordinal) == start
    if start is not None:
        assert text[:start].count(term) == ordinal


def test_token_span_exact_and_inside_a_token():
    offsets = [(0, 3), (4, 14), (15, 23)]  # "The trackpad's gestures"
    assert token_span(offsets, 4, 14) == (1, 2, True)
    assert token_span(offsets, 4, 12) == (1, 2, False)
    assert token_span(offsets, 0, 23) == (0, 3, True)
    assert token_span(offsets, 3, 4) is None  # only the space


# --------------------------------------------------------------------------------------------- SemEval XML


def test_xml_one_example_per_aspect_and_conflict_dropped(caplog):
    path = FIXTURES / "xml" / "Gadgets_Train_v1.xml"
    with caplog.at_level(logging.INFO, logger="onlstm_tasks.data.absa.readers.semeval_xml"):
        examples, stats = read_semeval_xml(path)
    expected = [a for a in TRAIN_ASPECTS if a[1] != "conflict"]
    assert [(aspect_words(e), e.label, e.sentence_id) for e in examples] == expected
    assert stats == {"sentences": 7, "aspects": 8, "conflict_dropped": 1, "sentences_without_aspects": 1,
                     "inside_token": 1}
    assert "conflict dropped: 1" in caplog.text and "sentences without aspects: 1" in caplog.text
    assert "term boundary inside a token: 1" in caplog.text
    first = examples[0]
    assert first.words == ("The", "keyboard", "is", "comfy", "but", "the", "battery", "life", "is", "awful", ".")
    assert first.text == "The keyboard is comfy but the battery life is awful."
    assert all(first.text[a:b] == w for w, (a, b) in zip(first.words, first.offsets))
    assert (first.source, first.line) == (str(path), 6)  # the <aspectTerm>'s line
    assert first.meta == {"term": "keyboard", "char_span": (4, 12)}
    # the two "fan"s of sentence 103 are different tokens; the entity &amp; is decoded
    assert [e.aspect for e in examples if e.sentence_id == "103"] == [(1, 2), (6, 7)]
    assert "useless & the" in examples[4].text


def test_xml_keep_conflict():
    examples, stats = read_semeval_xml(FIXTURES / "xml" / "Gadgets_Train_v1.xml", keep_conflict=True)
    assert [(aspect_words(e), e.label, e.sentence_id) for e in examples] == TRAIN_ASPECTS
    assert stats["conflict_dropped"] == 0 and stats["aspects"] == 9


@pytest.mark.parametrize(
    ("name", "line", "expected"),
    [
        ("offsets_mismatch.xml", 12, ["sentence 302", "offsets from=5 to=11 give 'creen ' but the term is 'screen'"]),
        ("unknown_polarity.xml", 12, ["sentence 312", "expected a polarity", "found 'mixed'"]),
        ("missing_text.xml", 6, ["sentence 322", "expected a non-empty <text> element, found none"]),
        ("not_well_formed.xml", 4, ["expected well-formed XML"]),
        ("no_aspects.xml", None, ["found 1 sentence(s) and no aspect term"]),
    ],
)
def test_xml_bad_input_names_file_line_and_sentence(name, line, expected):
    with pytest.raises(DataFormatError) as err:
        read_semeval_xml(BAD / name)
    assert_points_at(err, BAD / name, line, *expected)


@pytest.mark.parametrize(
    ("attributes", "expected"),
    [
        ('term="lid" polarity="negative" from="4"', "expected a character offset to=\"N\""),
        ('term="lid" polarity="negative" from="x" to="7"', "expected a character offset from=\"N\""),
        ('term="lid" polarity="negative" from="4" to="99"', "give nothing (out of range)"),
        ('term="" polarity="negative" from="4" to="4"', "expected a non-empty term"),
        ('term="lid" from="4" to="7"', "expected a polarity"),
    ],
)
def test_xml_bad_aspect_attributes(tmp_path, attributes, expected):
    path = tmp_path / "bad.xml"
    path.write_text(f'<sentences>\n<sentence id="s9">\n<text>The lid is thin.</text>\n<aspectTerms>\n'
                    f"<aspectTerm {attributes}/>\n</aspectTerms>\n</sentence>\n</sentences>\n", encoding="utf-8")
    with pytest.raises(DataFormatError) as err:
        read_semeval_xml(path)
    assert_points_at(err, path, 5, "sentence s9", expected)


# ------------------------------------------------------------------------------------------------- .seg


def test_seg_rebuilds_the_text_and_matches_the_xml():
    path = FIXTURES / "seg" / "Gadgets_Train.xml.seg"
    examples, stats = read_seg(path)
    xml, _ = read_semeval_xml(FIXTURES / "xml" / "Gadgets_Train_v1.xml")  # conflict dropped: .seg has none
    assert [key(e) for e in examples] == [key(e) for e in xml]
    assert [e.text for e in examples] == [e.text for e in xml]
    assert [e.line for e in examples] == list(range(1, 25, 3))
    # groups of one sentence share its id (the first line of its first group)
    assert [e.sentence_id for e in examples] == ["1", "1", "7", "7", "13", "13", "19", "22"]
    assert stats == {"sentences": 5, "aspects": 8, "conflict_dropped": 0, "sentences_without_aspects": 0,
                     "inside_token": 1}


def test_seg_tokenised_lowercase_line(tmp_path):
    path = tmp_path / "x.xml.seg"
    path.write_text("the $T$ is n't bright enough , sadly .\nback light\n-1\n", encoding="utf-8")
    (example,), _ = read_seg(path)
    assert example.text == "the back light is n't bright enough , sadly ."
    assert aspect_words(example) == ("back", "light") and example.label == "negative"


@pytest.mark.parametrize(
    ("name", "line", "expected"),
    [
        ("no_placeholder.xml.seg", 4, "expected the sentence with one '$T$' where the aspect stands, found none"),
        ("two_placeholders.xml.seg", 1, "one '$T$' where the aspect stands, found 2"),
        ("bad_polarity.xml.seg", 6, "expected a polarity -1, 0 or 1, found '2'"),
        ("incomplete.xml.seg", 4, "expected 3 lines per aspect"),
    ],
)
def test_seg_bad_input_names_file_and_line(name, line, expected):
    with pytest.raises(DataFormatError) as err:
        read_seg(BAD / name)
    assert_points_at(err, BAD / name, line, expected)


def test_seg_empty_aspect_line(tmp_path):
    path = tmp_path / "x.seg"
    path.write_text("The $T$ is fine .\n \n1\n", encoding="utf-8")
    with pytest.raises(DataFormatError) as err:
        read_seg(path)
    assert_points_at(err, path, 2, "expected the aspect term")


# ------------------------------------------------------------------------------------- hub rows (setfit)


def rows(*items, **columns) -> Dataset:
    data = {"text": [], "span": [], "label": [], "ordinal": []}
    for text, span, label, ordinal in items:
        for column, value in zip(data, (text, span, label, ordinal)):
            data[column].append(value)
    return Dataset.from_dict({**data, **columns})


def test_setfit_rows_find_the_ordinal_occurrence():
    examples, stats = read_setfit_rows(rows(
        ("The fan is loud and the fan never stops.", "fan", "negative", 1),
        ("The fan is loud and the fan never stops.", "fan", "neutral", 0),
        ("Nice pc's screen.", "pc", "positive", 0),
        ("A conflicted keyboard.", "keyboard", "conflict", 0),
    ), source="toy:train")
    assert [(e.aspect, e.label, e.sentence_id, e.line) for e in examples] == [
        ((6, 7), "negative", "0", 0), ((1, 2), "neutral", "0", 1), ((1, 2), "positive", "2", 2)]
    assert aspect_words(examples[2]) == ("pc's",)
    assert examples[0].source == "toy:train"
    assert stats == {"sentences": 3, "aspects": 3, "conflict_dropped": 1, "sentences_without_aspects": 0,
                     "inside_token": 1}


def test_setfit_class_label_ids():
    features = Features({"text": Value("string"), "span": Value("string"),
                         "label": ClassLabel(names=["negative", "neutral", "positive"]), "ordinal": Value("int64")})
    data = Dataset.from_dict({"text": ["Good keys."], "span": ["keys"], "label": [2], "ordinal": [0]},
                             features=features)
    (example,), _ = read_setfit_rows(data)
    assert example.label == "positive" and aspect_words(example) == ("keys",)


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        (("Good keys.", "keys", "great", 0), "expected a polarity"),
        (("Good keys.", "keys", "positive", 1), "expected occurrence 1 (0-based) of the term 'keys'"),
        (("Good keys.", "lid", "positive", 0), "it occurs 0 time(s)"),
        (("", "keys", "positive", 0), "expected the sentence in 'text'"),
        ((None, "keys", "positive", 0), "expected the sentence in 'text'"),
        (("Good keys.", " ", "positive", 0), "expected the aspect term in 'span'"),
        (("Good keys.", "keys", "positive", -1), "expected a 0-based occurrence number"),
    ],
)
def test_setfit_bad_rows_name_dataset_and_row(row, expected):
    data = rows(("Fine lid.", "lid", "neutral", 0), row)
    with pytest.raises(DataFormatError) as err:
        read_setfit_rows(data, source="toy:train")
    assert_points_at(err, "toy:train", 1, expected)


def test_setfit_missing_column():
    with pytest.raises(DataFormatError, match=r"toy: expected a column 'ordinal'"):
        read_setfit_rows(Dataset.from_dict({"text": ["a"], "span": ["a"], "label": ["positive"]}), source="toy")


# ------------------------------------------------------------------------------------------- splits


def test_the_three_formats_give_the_same_examples():
    xml = load_absa_splits(FIXTURES / "xml")
    seg = load_absa_splits(FIXTURES / "seg")
    hub = load_absa_splits(FIXTURES / "setfit")  # a local dataset folder, read by datasets.load_dataset
    assert list(xml) == list(seg) == list(hub) == ["train", "test"]
    for split in xml:
        assert [key(e) for e in hub[split]] == [key(e) for e in xml[split]] == [key(e) for e in seg[split]]
    assert [aspect_words(e) for e in xml["test"]] == [("display",), ("hinges",), ("charger",), ("wizard",)]
    kept = load_absa_splits(FIXTURES / "setfit", keep_conflict=True)
    assert [(aspect_words(e), e.label) for e in kept["train"]] == [a[:2] for a in TRAIN_ASPECTS]


def test_split_discovery_data_files_and_formats(tmp_path, caplog):
    (tmp_path / "Gadgets_Train_v1_depparsed.json").write_text("[]", encoding="utf-8")  # ignored beside the XML
    for name in ("Gadgets_Train_v1.xml", "Gadgets_Test_Gold.xml"):
        (tmp_path / name).write_bytes((FIXTURES / "xml" / name).read_bytes())
    with caplog.at_level(logging.INFO, logger="onlstm_tasks.data.absa.readers.formats"):
        splits = load_absa_splits(tmp_path)
    assert {k: len(v) for k, v in splits.items()} == {"train": 8, "test": 4}
    assert "ignored 1 file(s) of another format" in caplog.text
    chosen = load_absa_splits(FIXTURES, data_files={"train": "xml/*Train*.xml", "dev": "seg/*Test*.seg"})
    assert {k: len(v) for k, v in chosen.items()} == {"train": 8, "validation": 4}
    # a .seg file named otherwise, with an explicit format
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "train.txt").write_bytes((FIXTURES / "seg" / "Gadgets_Train.xml.seg").read_bytes())
    assert len(load_absa_splits(tmp_path / "other", format="seg")["train"]) == 8
    assert file_format("a/Laptops_Train.xml.seg") == "seg" and file_format("b.XML") == "semeval_xml"
    assert set(READERS) == {"setfit", "semeval_xml", "seg"}


def test_split_errors():
    with pytest.raises(ValueError, match="unknown format 'conll'"):
        load_absa_splits(FIXTURES / "xml", format="conll")
    with pytest.raises(ValueError, match="apply to datasets only"):
        load_absa_splits(FIXTURES / "xml", revision="main")
    with pytest.raises(ValueError, match="different formats in one split"):
        load_absa_splits(FIXTURES, data_files={"train": ["xml/Gadgets_Train_v1.xml", "seg/Gadgets_Train.xml.seg"]})
    with pytest.raises(FileNotFoundError, match="not a hub dataset id"):
        load_absa_splits("./no/such/folder")


# ------------------------------------------------------------------------------------------ shared kit


@requires_shared_data
def test_shared_laptops_parquet_and_xml_give_the_same_examples():
    parquet_path = SHARED_DATA / "setfit-absa-semeval-laptops"
    raw = datasets.load_dataset(str(parquet_path))  # the same call as for the hub name
    assert {split: raw[split].num_rows for split in raw} == {"train": 2358, "test": 654}  # conflict included
    parquet = load_absa_splits(parquet_path, keep_conflict=True)
    xml = load_absa_splits(SHARED_DATA / "semeval2014_laptops", keep_conflict=True)
    assert {k: len(v) for k, v in parquet.items()} == {k: len(v) for k, v in xml.items()} == {"train": 2358,
                                                                                             "test": 654}
    expected_classes = {
        "train": {"positive": 987, "negative": 866, "neutral": 460, "conflict": 45},
        "test": {"positive": 341, "negative": 128, "neutral": 169, "conflict": 16},
    }
    for split in ("train", "test"):
        assert Counter(key(e) for e in parquet[split]) == Counter(key(e) for e in xml[split])
        assert Counter(e.label for e in parquet[split]) == Counter(e.label for e in xml[split]) \
            == expected_classes[split] == Counter(raw[split]["label"])
        for e in xml[split]:  # every term's characters lie within its token span
            (a, b), (start, end) = e.meta["char_span"], e.aspect
            assert e.offsets[start][0] <= a + len(e.meta["term"]) - len(e.meta["term"].lstrip())
            assert e.offsets[end - 1][1] >= b - len(e.meta["term"]) + len(e.meta["term"].rstrip())
    dropped = load_absa_splits(parquet_path)
    assert {k: len(v) for k, v in dropped.items()} == {"train": 2358 - 45, "test": 654 - 16}


@requires_shared_data
def test_shared_laptops_xml_counts():
    train, stats = read_semeval_xml(SHARED_DATA / "semeval2014_laptops" / "Laptop_Train_v2.xml")
    assert stats == {"sentences": 3045, "aspects": 2313, "conflict_dropped": 45, "sentences_without_aspects": 1557,
                     "inside_token": 1}  # "freesecuritysoftware"
    assert len({e.sentence_id for e in train}) == 1462  # 1488 sentences with aspects, 26 of them only conflict
    _, stats = read_semeval_xml(SHARED_DATA / "semeval2014_laptops" / "Laptops_Test_Gold.xml")
    assert stats == {"sentences": 800, "aspects": 638, "conflict_dropped": 16, "sentences_without_aspects": 378,
                     "inside_token": 1}  # "manyLegacy programs"
