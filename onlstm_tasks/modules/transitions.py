"""Which tag transitions a tagging scheme allows: a pure function of label strings (no torch).

Supported schemes (labels are ``"O"`` or ``"<prefix>-<type>"``, e.g. ``"B-PER"``):

- ``iob2``:  ``I-X`` only after ``B-X`` or ``I-X``; a sentence cannot start with ``I-X``; any tag may end it.
- ``iobes``: ``B-X`` -> ``I-X | E-X``; ``I-X`` -> ``I-X | E-X``; ``E-X``, ``S-X``, ``O`` -> ``O | B-* | S-*``;
  starts: ``O``, ``B-*``, ``S-*``; ends: ``O``, ``E-*``, ``S-*``.

The CRF turns the three masks into -inf scores so that decoding can only produce sequences valid under the scheme.
"""

from __future__ import annotations

from collections.abc import Sequence

from onlstm_tasks.data.core.tags import parse_label

__all__ = ["allowed_transitions", "parse_label"]  # parse_label: the one tag parser, in data.tags


def allowed_transitions(
    scheme: str, labels: Sequence[str]
) -> tuple[list[bool], list[list[bool]], list[bool]]:
    """``(allowed_start[j], allowed[i][j] for i -> j, allowed_end[i])`` for ``labels`` under ``scheme``."""
    parsed = [parse_label(label, scheme) for label in labels]
    rule = _iob2_allows if scheme == "iob2" else _iobes_allows
    start = [rule(("O", None), tag) for tag in parsed]
    allowed = [[rule(a, b) for b in parsed] for a in parsed]
    end = [_ends(scheme, tag) for tag in parsed]
    return start, allowed, end


def _iob2_allows(a: tuple[str, str | None], b: tuple[str, str | None]) -> bool:
    # the start state behaves like a preceding "O"
    if b[0] == "I":
        return a[0] in ("B", "I") and a[1] == b[1]
    return True


def _iobes_allows(a: tuple[str, str | None], b: tuple[str, str | None]) -> bool:
    # the start state behaves like a preceding "O"
    if a[0] in ("B", "I"):  # inside an entity: continue or close the same type
        return b[0] in ("I", "E") and a[1] == b[1]
    return b[0] in ("O", "B", "S")  # outside an entity (after O, E, S or at the start)


def _ends(scheme: str, tag: tuple[str, str | None]) -> bool:
    if scheme == "iob2":
        return True
    return tag[0] in ("O", "E", "S")
