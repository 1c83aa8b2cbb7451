"""The OntoNotes hub-schema reader (rows of ``ontonotes/conll2012_ontonotesv5``) on bad input: every error names
the source, the document's row and the sentence id (``document_id/part_id/index``).

Datasets are built here from pyarrow tables with the hub's features, so values the ``ClassLabel`` features do not
allow (as in a damaged or hand-made parquet file) reach the reader as they would from disk.
"""

from __future__ import annotations

import re

import datasets
import pyarrow as pa
import pytest
from datasets import ClassLabel, Dataset, DatasetInfo, Features, Value

from onlstm_tasks.data.examples import DataFormatError
from onlstm_tasks.data.readers import load_ner_splits, read_ontonotes_rows
from onlstm_tasks.data.readers.ontonotes import bracket_problem

NE_NAMES = ["O", "B-PERSON", "I-PERSON", "B-GPE", "I-GPE"]
POS_NAMES = ["XX", "NNP", "VBD", "."]
GOOD_TREE = "(TOP(S(NP (NNP Ivo) )(VP (VBD won) ) (. .) ))"
BAD_DOCUMENT = "nw/bad/00/bad_0002"
BAD_WHERE = f"toy:train:1 (sentence {BAD_DOCUMENT}/1/1)"  # row 1, part 1, second sentence of the document


def hub_features(named_entities=None) -> Features:
    """The hub's features; ``named_entities`` replaces the NE element feature (default: a ClassLabel)."""
    triple = getattr(datasets, "List", datasets.Sequence)(Value("int32"), length=3)
    return Features({
        "document_id": Value("string"),
        "sentences": [{
            "part_id": Value("int32"), "words": [Value("string")], "pos_tags": [ClassLabel(names=POS_NAMES)],
            "parse_tree": Value("string"), "predicate_lemmas": [Value("string")],
            "predicate_framenet_ids": [Value("string")], "word_senses": [Value("float32")],
            "speaker": Value("string"), "named_entities": [named_entities or ClassLabel(names=NE_NAMES)],
            "srl_frames": [{"verb": Value("string"), "frames": [Value("string")]}], "coref_spans": [triple],
        }],
    })


def sentence(words=("Ivo", "won", "."), pos=(1, 2, 3), ne=(1, 0, 0), tree=GOOD_TREE, part=0) -> dict:
    n = len(words)
    return {"part_id": part, "words": list(words), "pos_tags": list(pos), "parse_tree": tree,
            "predicate_lemmas": [None] * n, "predicate_framenet_ids": [None] * n, "word_senses": [None] * n,
            "speaker": None, "named_entities": list(ne), "srl_frames": [], "coref_spans": []}


def hub_dataset(bad: dict, features: Features | None = None, good: dict | None = None) -> Dataset:
    """A good document, then a document whose second sentence (part 1) is ``bad``; values are not validated."""
    features = features or hub_features()
    good = good or sentence()
    rows = [{"document_id": "bn/ok/00/ok_0001", "sentences": [good]},
            {"document_id": BAD_DOCUMENT, "sentences": [good, {**bad, "part_id": 1}]}]
    return Dataset(pa.Table.from_pylist(rows, schema=features.arrow_schema), info=DatasetInfo(features=features))


def assert_error(dataset: Dataset, expected: str) -> None:
    with pytest.raises(DataFormatError) as err:
        read_ontonotes_rows(dataset, "toy:train")
    message = str(err.value)
    assert message.startswith(f"{BAD_WHERE}: "), message
    assert re.search(expected, message), message


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        (sentence(ne=(1, 7, 0)), r"named_entities: expected ClassLabel ids in \[0, 5\), found 7 at token 2"),
        (sentence(ne=(1, -1, 0)), r"named_entities: expected ClassLabel ids in \[0, 5\), found -1 at token 2"),
        (sentence(pos=(1, 2, 4)), r"pos_tags: expected ClassLabel ids in \[0, 4\), found 4 at token 3"),
    ],
    ids=["ne-id-too-large", "ne-id-minus-one", "pos-id-too-large"],
)
def test_bad_class_label_ids(bad, expected):
    assert_error(hub_dataset(bad), expected)


def test_invalid_tag_prefix_in_string_tags():
    features = hub_features(named_entities=Value("string"))
    good = sentence(ne=("B-PERSON", "O", "O"))
    assert_error(hub_dataset(sentence(ne=("X-PERSON", "O", "O")), features, good),
                 r"token 1: invalid tag 'X-PERSON': expected O, B-TYPE, I-TYPE \(IOB2\)")


def test_invalid_tag_prefix_in_class_label_names():
    features = hub_features(named_entities=ClassLabel(names=[*NE_NAMES, "S-GPE"]))  # an IOBES name
    assert_error(hub_dataset(sentence(ne=(0, 0, 5)), features), r"token 3: invalid tag 'S-GPE'")


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        (sentence(ne=(1, 0)), r"expected one tag and POS per word: .*tags has 2 entries but the sentence has 3 words"),
        (sentence(pos=(1, 2, 3, 3)), r"expected one tag and POS per word: .*pos has 4 entries but the sentence has 3"),
    ],
    ids=["tags", "pos"],
)
def test_words_and_tags_of_different_lengths(bad, expected):
    assert_error(hub_dataset(bad), expected)


@pytest.mark.parametrize(
    ("tree", "expected"),
    [
        (GOOD_TREE + ")", rf"'\)' at character {len(GOOD_TREE) + 1} closes no open '\('"),
        (GOOD_TREE[:-1], r"1 '\(' not closed at the end"),
        (") (TOP (NNP Ivo) (", r"'\)' at character 1 closes no open '\('"),  # balanced counts, wrong order
    ],
    ids=["extra-close", "unclosed", "wrong-order"],
)
def test_unbalanced_parse_tree(tree, expected):
    assert_error(hub_dataset(sentence(tree=tree)), r"parse_tree has unbalanced brackets: " + expected)


def test_a_sentence_without_a_parse_tree_is_read():
    examples, stats = read_ontonotes_rows(hub_dataset(sentence(tree=None)), "toy:train")
    assert [e.parse_tree for e in examples] == [GOOD_TREE, GOOD_TREE, None]
    assert stats["sentences"] == 3


def test_a_bad_tree_in_a_parquet_split_names_the_split_and_sentence(tmp_path):
    (tmp_path / "train").mkdir()
    hub_dataset(sentence(tree="(TOP (NNP Ivo)")).to_parquet(tmp_path / "train" / "0000.parquet")
    with pytest.raises(DataFormatError, match=re.escape(f"{tmp_path}:train:1 (sentence {BAD_DOCUMENT}/1/1): "
                                                        f"parse_tree has unbalanced brackets")):
        load_ner_splits(tmp_path)


@pytest.mark.parametrize(
    ("tree", "problem"),
    [
        ("(S (NP (DT the) (NN -LRB-)))", None),
        ("", None),
        ("(S (NP x)))", "')' at character 11 closes no open '('"),
        ("((S (NP x)", "2 '(' not closed at the end"),
    ],
)
def test_bracket_problem(tree, problem):
    assert bracket_problem(tree) == problem
