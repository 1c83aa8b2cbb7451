import itertools
import re

import pytest

from helpers.tags import valid_sequence

from onlstm_tasks.modules.transitions import allowed_transitions, parse_label


def allowed_by_tables(tables, labels, tags):
    start, allowed, end = tables
    ids = [labels.index(t) for t in tags]
    return start[ids[0]] and end[ids[-1]] and all(allowed[i][j] for i, j in zip(ids, ids[1:]))


def test_iob2_table_by_hand():
    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    start, allowed, end = allowed_transitions("iob2", labels)
    assert start == [True, True, False, True, False]
    assert end == [True] * 5
    assert allowed == [
        # to: O     B-PER  I-PER  B-LOC  I-LOC
        [True, True, False, True, False],  # from O
        [True, True, True, True, False],  # from B-PER
        [True, True, True, True, False],  # from I-PER
        [True, True, False, True, True],  # from B-LOC
        [True, True, False, True, True],  # from I-LOC
    ]


def test_iobes_table_by_hand():
    labels = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "E-LOC"]
    start, allowed, end = allowed_transitions("iobes", labels)
    assert start == [True, True, False, False, True, True, False]
    assert end == [True, False, False, True, True, False, True]
    assert allowed == [
        # to: O   B-PER  I-PER  E-PER  S-PER  B-LOC  E-LOC
        [True, True, False, False, True, True, False],  # from O
        [False, False, True, True, False, False, False],  # from B-PER
        [False, False, True, True, False, False, False],  # from I-PER
        [True, True, False, False, True, True, False],  # from E-PER
        [True, True, False, False, True, True, False],  # from S-PER
        [False, False, False, False, False, False, True],  # from B-LOC
        [True, True, False, False, True, True, False],  # from E-LOC
    ]


@pytest.mark.parametrize("scheme, labels", [
    ("iob2", ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]),
    ("iobes", ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]),
])
def test_tables_agree_with_span_oracle_on_every_short_sequence(scheme, labels):
    tables = allowed_transitions(scheme, labels)
    for n in range(1, 4):
        for tags in itertools.product(labels, repeat=n):
            assert allowed_by_tables(tables, labels, tags) == valid_sequence(scheme, tags), tags


def test_types_with_hyphens_are_kept_whole():
    assert parse_label("B-WORK-OF-ART", "iob2") == ("B", "WORK-OF-ART")
    start, allowed, _ = allowed_transitions("iob2", ["B-WORK-OF-ART", "I-WORK-OF-ART", "I-ART"])
    assert allowed[0] == [True, True, False]


@pytest.mark.parametrize("scheme, label", [
    ("iob2", "<pad>"), ("iob2", "E-PER"), ("iob2", "S-PER"), ("iob2", "B-"), ("iob2", "PER"),
    ("iobes", "X-PER"), ("iobes", "o"),
])
def test_invalid_labels_are_named(scheme, label):
    with pytest.raises(ValueError, match=re.escape(repr(label))):
        allowed_transitions(scheme, ["O", "B-PER", label])


def test_unknown_scheme():
    with pytest.raises(ValueError, match="bio"):
        allowed_transitions("bio", ["O"])
