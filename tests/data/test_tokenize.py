"""The raw-text tokenizer: offsets always slice the text to the token; hand-checked cases."""

from __future__ import annotations

import random

import pytest

from onlstm_tasks.data.core.tokenize import tokenize

ALPHABET = list("abcXYZ019 .,;:'’\"-()[]{}!?%$&/\t\n") + ["Dr.", "U.S.", "e.g.", "Mr", "\u00a0", "é", "ß", "中", "😀"]


def check_offsets(text: str) -> list[str]:
    words, offsets = tokenize(text)
    assert len(words) == len(offsets)
    assert [text[a:b] for a, b in offsets] == words, text
    assert all(a < b for a, b in offsets)
    assert all(b1 <= a2 for (_, b1), (a2, _) in zip(offsets, offsets[1:])), f"overlap or disorder in {text!r}"
    assert not any(c.isspace() for w in words for c in w), words
    # nothing dropped: the non-space characters of the text all end up in tokens, in order
    assert "".join(words) == "".join(c for c in text if not c.isspace())
    return words


def test_offsets_slice_the_text_on_random_strings() -> None:
    rng = random.Random(0)
    for _ in range(2000):
        check_offsets("".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 25))))


@pytest.mark.parametrize(("text", "tokens"), [
    ("Dr. Smith arrived.", ["Dr.", "Smith", "arrived", "."]),
    ("Mr. and Mrs. Jones met Prof. Lee vs. Acme Inc.", ["Mr.", "and", "Mrs.", "Jones", "met", "Prof.", "Lee", "vs.",
                                                        "Acme", "Inc."]),
    ("The U.S. economy grew.", ["The", "U.S.", "economy", "grew", "."]),
    ("She moved to the U.K. in 2019.", ["She", "moved", "to", "the", "U.K.", "in", "2019", "."]),
    ("It ended.", ["It", "ended", "."]),
    ("Where? Here!", ["Where", "?", "Here", "!"]),
    ("A well-known e-mail from Jean-Luc.", ["A", "well", "-", "known", "e", "-", "mail", "from", "Jean", "-", "Luc",
                                            "."]),
    ("pages 10-12 - or not", ["pages", "10", "-", "12", "-", "or", "not"]),
    ("quality,aesthetics and price-value", ["quality", ",", "aesthetics", "and", "price", "-", "value"]),
    ("It cost 1,000,000.50 dollars, or 3.5% of $2,644.", ["It", "cost", "1,000,000.50", "dollars", ",", "or", "3.5",
                                                          "%", "of", "$", "2,644", "."]),
    ("Ended at 3.", ["Ended", "at", "3", "."]),
    ("don't stop O'Neil’s band", ["don't", "stop", "O'Neil’s", "band"]),
    ('"Hello," she said.', ['"', "Hello", ",", '"', "she", "said", "."]),
    ("'quoted'", ["'", "quoted", "'"]),
    ("(Quandor Bank) [sic] {x}", ["(", "Quandor", "Bank", ")", "[", "sic", "]", "{", "x", "}"]),
    ("Wait...", ["Wait", ".", ".", "."]),
    ("café Zürich naïve", ["café", "Zürich", "naïve"]),
    ("  spaced\tout\n", ["spaced", "out"]),
    ("", []),
])
def test_hand_cases(text, tokens) -> None:
    assert check_offsets(text) == tokens


def test_abbreviation_needs_a_word_boundary() -> None:
    # "Dr." inside a longer word is not the abbreviation: the period is its own token
    assert check_offsets("MDr. x") == ["MDr", ".", "x"]
    assert check_offsets("Co. Codr.") == ["Co.", "Codr", "."]


def test_offsets_are_character_offsets_not_bytes() -> None:
    text = "中文 😀 Zoë."
    words, offsets = tokenize(text)
    assert words == ["中文", "😀", "Zoë", "."]
    assert offsets == [(0, 2), (3, 4), (5, 8), (8, 9)]
