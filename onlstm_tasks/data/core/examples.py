"""The one record type every reader produces.

Readers of any format (hub parquet, raw CoNLL-2012, column files, CoNLL-X/U, SemEval XML, ...) turn their rows
into :class:`Example` objects, so everything downstream (vocabularies, batching, tasks) sees a single shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onlstm_tasks.errors import DataFormatError  # re-exported: the old import path keeps working

__all__ = ["DataFormatError", "Example"]


@dataclass(frozen=True)
class Example:
    """One sentence (NER) or one sentence-aspect pair (aspect sentiment).

    ``source`` and ``line`` say where the example came from (a file path and 1-based line number, or a
    dataset name/split and 0-based row index) so later errors can point back at the input.
    """

    words: tuple[str, ...]
    tags: tuple[str, ...] | None = None  # token labels, always IOB2 after reading
    pos: tuple[str, ...] | None = None
    heads: tuple[int, ...] | None = None  # 1-based head index per token, 0 = root (CoNLL convention)
    deprels: tuple[str, ...] | None = None
    parse_tree: str | None = None  # bracketed constituency tree string
    label: str | None = None  # sentence-level label (e.g. aspect polarity)
    aspect: tuple[int, int] | None = None  # token span [start, end) of the aspect term
    text: str | None = None  # untokenised text, when the source has it
    offsets: tuple[tuple[int, int], ...] | None = None  # character span of every word in ``text``
    source: str = ""
    line: int = 0
    sentence_id: str | None = None
    meta: dict = field(default_factory=dict, compare=False, hash=False)
    # the line of each token, for formats with a line per token (column files, CoNLL-X/U, raw CoNLL-2012)
    token_lines: tuple[int, ...] | None = field(default=None, compare=False, hash=False)

    def __post_init__(self) -> None:
        n = len(self.words)
        for name in ("tags", "pos", "heads", "deprels", "offsets", "token_lines"):
            value = getattr(self, name)
            if value is not None and len(value) != n:
                raise ValueError(
                    f"{self.where()}: {name} has {len(value)} entries but the sentence has {n} words"
                )

    def where(self) -> str:
        """Human-readable location for error messages."""
        loc = f"{self.source}:{self.line}" if self.source else f"line {self.line}"
        return f"{loc} (sentence {self.sentence_id})" if self.sentence_id else loc

    def __len__(self) -> int:
        return len(self.words)
