"""Tag-scheme conversions, spans and validation (onlstm_tasks.data.core.tags)."""

from __future__ import annotations

import pytest

from onlstm_tasks.data.core.examples import DataFormatError
from onlstm_tasks.data.core.tags import (
    convert_scheme,
    entity_spans,
    iob1_to_iob2,
    iob2_to_iobes,
    iobes_to_iob2,
    normalise_tags,
    split_tag,
    validate_iob2,
)

IOB2 = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "I-LOC", "O", "B-ORG", "B-MISC", "I-MISC"]
IOBES = ["B-PER", "E-PER", "O", "S-LOC", "B-LOC", "I-LOC", "E-LOC", "O", "S-ORG", "B-MISC", "E-MISC"]


def test_split_tag():
    assert split_tag("O") == ("O", None)
    assert split_tag("B-WORK_OF_ART") == ("B", "WORK_OF_ART")
    assert split_tag("I-ORG-X") == ("I", "ORG-X")  # the type is everything after the first hyphen


@pytest.mark.parametrize("bad", ["X-PER", "B-", "PER", "b-PER", "BI-PER", "", "o", "B- PER", "S-PER"])
def test_split_tag_rejects_invalid_iob2(bad):
    with pytest.raises(ValueError, match="invalid tag"):
        split_tag(bad, "BI")


def test_iob2_to_iobes_and_back():
    assert iob2_to_iobes(IOB2) == IOBES
    assert iobes_to_iob2(IOBES) == IOB2
    assert iobes_to_iob2(iob2_to_iobes(IOB2)) == IOB2


def test_convert_scheme_from_either_scheme():
    assert convert_scheme(IOB2, "iobes") == IOBES
    assert convert_scheme(IOB2, "iob2") == IOB2
    assert convert_scheme(IOBES, "iob2") == IOB2  # predictions decoded in IOBES back to IOB2
    assert convert_scheme(IOBES, "iobes") == IOBES
    with pytest.raises(ValueError, match="unknown tag scheme"):
        convert_scheme(IOB2, "bilou")
    with pytest.raises(ValueError, match="invalid tag 'X-PER'"):
        convert_scheme(["X-PER"], "iob2")


@pytest.mark.parametrize(
    ("iob1", "iob2"),
    [
        (["I-PER", "I-PER", "O"], ["B-PER", "I-PER", "O"]),
        (["I-PER", "B-PER", "I-PER"], ["B-PER", "B-PER", "I-PER"]),  # B- separates two adjacent PER
        (["I-LOC", "I-ORG", "I-ORG"], ["B-LOC", "B-ORG", "I-ORG"]),  # type change opens an entity
        (["O", "I-MISC", "O", "I-MISC"], ["O", "B-MISC", "O", "B-MISC"]),
        ([], []),
    ],
)
def test_iob1_to_iob2(iob1, iob2):
    assert iob1_to_iob2(iob1) == iob2


def test_entity_spans():
    assert entity_spans(IOB2) == [("PER", 0, 2), ("LOC", 3, 4), ("LOC", 4, 7), ("ORG", 8, 9), ("MISC", 9, 11)]
    assert entity_spans(["O", "O"]) == []
    assert entity_spans(["B-X"]) == [("X", 0, 1)]
    # an orphan I- (invalid IOB2) still counts as an entity start, as conlleval does
    assert entity_spans(["O", "I-X", "I-X", "I-Y"]) == [("X", 1, 3), ("Y", 3, 4)]


def test_validate_iob2_repairs_and_counts_orphans():
    tags, repaired = validate_iob2(["O", "I-PER", "I-PER", "B-LOC", "I-ORG"], "f.txt", 3)
    assert tags == ["O", "B-PER", "I-PER", "B-LOC", "B-ORG"]
    assert repaired == 2
    assert validate_iob2(IOB2, "f.txt", 3) == (IOB2, 0)


def test_validate_iob2_errors_name_source_and_token_line():
    with pytest.raises(DataFormatError, match=r"^f\.txt:12: token 3: invalid tag 'X-PER'"):
        validate_iob2(["O", "B-PER", "X-PER"], "f.txt", [10, 11, 12])
    with pytest.raises(DataFormatError, match=r"^f\.txt:7: token 1: invalid tag 'B-'"):
        validate_iob2(["B-"], "f.txt", 7)
    with pytest.raises(DataFormatError, match="invalid tag 'E-PER'"):
        validate_iob2(["E-PER"], "f.txt", 7)  # IOBES prefixes are not IOB2


def test_normalise_tags_per_scheme():
    assert normalise_tags(["I-PER", "B-PER"], "iob1", "s", 1) == (["B-PER", "B-PER"], 0)
    assert normalise_tags(["I-PER", "B-PER"], "iob2", "s", 1) == (["B-PER", "B-PER"], 1)
    assert normalise_tags(["S-PER", "B-LOC", "E-LOC"], "iobes", "s", 1) == (["B-PER", "B-LOC", "I-LOC"], 0)
    with pytest.raises(DataFormatError, match="s:1"):
        normalise_tags(["S-PER"], "iob1", "s", 1)
    with pytest.raises(ValueError, match="unknown tag scheme"):
        normalise_tags(["O"], "bio", "s", 1)
