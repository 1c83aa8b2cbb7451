"""Tag-scheme utilities for token-level entity labels (pure Python).

Every reader hands IOB2 downstream: ``O``, ``B-TYPE`` (first token of an entity), ``I-TYPE`` (inside).
IOB1 (CoNLL-2003 files: ``B-`` only between two adjacent entities of one type) and IOBES
(``S-`` single-token, ``E-`` last token) are converted on reading; IOBES is also offered for training.

The pure conversions raise :class:`ValueError` on a malformed tag; the reader-facing
:func:`normalise_tags` / :func:`validate_iob2` raise :class:`DataFormatError` naming the file and line.
"""

from __future__ import annotations

from collections.abc import Sequence

from onlstm_tasks.errors import DataFormatError

SCHEMES = ("iob1", "iob2", "iobes")  # accepted on input; output is always IOB2 (or IOBES via convert_scheme)
TRAINING_SCHEMES = ("iob2", "iobes")  # schemes a tagger is trained and decoded in
_PREFIXES = {"iob1": "BI", "iob2": "BI", "iobes": "BIES"}
Lines = int | str | Sequence[int | str] | None  # one location (line number or text) for all tags, or one per tag


def split_tag(tag: str, prefixes: str = "BIES") -> tuple[str, str | None]:
    """``"B-PER" -> ("B", "PER")``, ``"O" -> ("O", None)``; ValueError for anything else."""
    if tag == "O":
        return "O", None
    prefix, sep, typ = tag.partition("-")
    if not sep or len(prefix) != 1 or prefix not in prefixes or not typ or typ != typ.strip():
        allowed = ", ".join(f"{p}-TYPE" for p in prefixes)
        raise ValueError(f"invalid tag {tag!r}: expected O, {allowed}")
    return prefix, typ


def parse_label(label: str, scheme: str) -> tuple[str, str | None]:
    """:func:`split_tag` with the prefixes of a training scheme (``iob2`` or ``iobes``): the label parser of the CRF
    transitions and the entity metrics. ValueError naming the label (or the unknown scheme)."""
    if scheme not in TRAINING_SCHEMES:
        raise ValueError(f"unknown tagging scheme {scheme!r}; expected one of {list(TRAINING_SCHEMES)}")
    try:
        return split_tag(label, _PREFIXES[scheme])
    except ValueError as err:
        raise ValueError(f"{err} (scheme {scheme!r})") from None


def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """IOB1 -> IOB2: an ``I-X`` that does not continue an ``X`` entity starts one (``B-X``)."""
    out: list[str] = []
    prev_type: str | None = None
    for tag in tags:
        prefix, typ = split_tag(tag, "BI")
        if prefix == "I" and typ != prev_type:
            tag = f"B-{typ}"
        out.append(tag)
        prev_type = typ
    return out


def repair_iob2(tags: Sequence[str]) -> tuple[list[str], int]:
    """Turn every ``I-X`` not preceded by ``B-X``/``I-X`` into ``B-X``; return the tags and how many changed."""
    out = iob1_to_iob2(tags)  # same rule: an orphan I-X opens an entity
    return out, sum(a != b for a, b in zip(tags, out))


def iob2_to_iobes(tags: Sequence[str]) -> list[str]:
    """IOB2 -> IOBES (single-token entities become ``S-X``, last tokens ``E-X``). Expects valid IOB2."""
    out: list[str] = []
    for i, tag in enumerate(tags):
        prefix, typ = split_tag(tag, "BI")
        if prefix == "O":
            out.append(tag)
            continue
        continues = i + 1 < len(tags) and tags[i + 1] == f"I-{typ}"
        if prefix == "B":
            out.append(f"B-{typ}" if continues else f"S-{typ}")
        else:
            out.append(f"I-{typ}" if continues else f"E-{typ}")
    return out


def iobes_to_iob2(tags: Sequence[str]) -> list[str]:
    """IOBES -> IOB2 (``S-`` -> ``B-``, ``E-`` -> ``I-``)."""
    mapping = {"O": "O", "B": "B", "S": "B", "I": "I", "E": "I"}
    out = []
    for tag in tags:
        prefix, typ = split_tag(tag, "BIES")
        out.append("O" if typ is None else f"{mapping[prefix]}-{typ}")
    return out


def convert_scheme(tags: Sequence[str], scheme: str) -> list[str]:
    """IOB2 or IOBES tags -> ``scheme`` ("iob2" or "iobes"); idempotent, so the input scheme need not be known."""
    if scheme not in ("iob2", "iobes"):
        raise ValueError(f"unknown tag scheme {scheme!r}: expected 'iob2' or 'iobes'")
    iob2 = iobes_to_iob2(tags)  # identity on IOB2
    return iob2 if scheme == "iob2" else iob2_to_iobes(iob2)


def entity_spans(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """``(type, start, end_exclusive)`` of every entity in IOB2 tags (an orphan ``I-X`` opens one)."""
    spans: list[tuple[str, int, int]] = []
    start, current = 0, None
    for i, tag in enumerate(tags):
        prefix, typ = split_tag(tag, "BI")
        if current is not None and (prefix != "I" or typ != current):
            spans.append((current, start, i))
            current = None
        if prefix == "B" or (prefix == "I" and current is None):
            start, current = i, typ
    if current is not None:
        spans.append((current, start, len(tags)))
    return spans


def _line_of(line: Lines, i: int) -> int | None:
    if line is None or isinstance(line, (int, str)):  # one location for every token
        return line
    return line[i]


def check_prefixes(tags: Sequence[str], scheme: str, source: str, line: Lines = None) -> None:
    """Raise DataFormatError at the first tag whose prefix is not allowed in ``scheme``.

    ``line`` is the sentence's line (int) or one line per token, so the error can point at the token.
    """
    if scheme not in _PREFIXES:
        raise ValueError(f"unknown tag scheme {scheme!r}: expected one of {SCHEMES}")
    for i, tag in enumerate(tags):
        try:
            split_tag(tag, _PREFIXES[scheme])
        except ValueError as err:
            raise DataFormatError(source, _line_of(line, i), f"token {i + 1}: {err} ({scheme.upper()})") from None


def validate_iob2(tags: Sequence[str], source: str, line: Lines = None) -> tuple[list[str], int]:
    """Check IOB2 prefixes (DataFormatError naming ``source``/``line``) and repair orphan ``I-X`` to ``B-X``.

    Returns the repaired tags and the number of repairs, which the caller must count and log.
    """
    check_prefixes(tags, "iob2", source, line)
    return repair_iob2(tags)


def normalise_tags(
    tags: Sequence[str], scheme: str, source: str, line: Lines = None
) -> tuple[list[str], int]:
    """Input tags in ``scheme`` (iob1 | iob2 | iobes) -> ``(IOB2 tags, number of repaired orphan I- tags)``."""
    check_prefixes(tags, scheme, source, line)
    if scheme == "iob1":
        return iob1_to_iob2(tags), 0
    if scheme == "iobes":
        tags = iobes_to_iob2(tags)
    return repair_iob2(tags)
