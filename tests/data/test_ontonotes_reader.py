"""The OntoNotes hub-schema reader (rows of ``ontonotes/conll2012_ontonotesv5``) on bad input: every error names
the source, the document's row and the sentence id (``document_id/part_id/index``).

Datasets are built here from pyarrow tables with the hub's features, so values the ``ClassLabel`` features do not
allow (as in a damaged or hand-made parquet file) reach the reader as they would from disk.
"""

from __future__ import annotations

import re

import pytest
from datasets import ClassLabel, Dataset, Value

from helpers.ontonotes_rows import BAD_DOCUMENT, BAD_WHERE, GOOD_TREE, NE_NAMES, hub_dataset, hub_features, sentence

from onlstm_tasks.data.core.examples import DataFormatError
from onlstm_tasks.data.ner.readers import load_ner_splits, read_ontonotes_rows
from onlstm_tasks.data.ner.readers.ontonotes import bracket_problem

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
