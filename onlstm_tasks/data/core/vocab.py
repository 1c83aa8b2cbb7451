"""String <-> index maps built from the training split (and, for words, optionally a vectors file's words)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

PAD = "<pad>"
UNK = "<unk>"
EOS = "<eos>"  # sentence boundary of the language models
DEFAULT_CHAR_VOCAB = [PAD, UNK]  # language models read words only


class Vocabulary:
    """An ordered token list; index 0 is padding and index 1 the unknown token (when ``with_unk``).

    ``counts`` are the training counts of the tokens (empty for a vocabulary restored from a checkpoint's token
    list); tokens added by :meth:`extend` (e.g. from a vectors file) have none.
    """

    def __init__(self, tokens: Sequence[str], with_unk: bool = True, counts: Counter | None = None) -> None:
        specials = [PAD, UNK] if with_unk else [PAD]
        self.itos: list[str] = specials + [t for t in tokens if t not in specials]
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("vocabulary tokens must be unique")
        self.with_unk = with_unk
        self.counts: Counter = Counter(counts or {})

    @classmethod
    def from_counts(cls, counts: Counter, min_freq: int = 1, with_unk: bool = True) -> "Vocabulary":
        # most frequent first, ties broken alphabetically so the order is reproducible
        tokens = sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t))
        return cls(tokens, with_unk=with_unk, counts=Counter({t: counts[t] for t in tokens}))

    @classmethod
    def from_iterable(cls, tokens: Iterable[str], min_freq: int = 1, with_unk: bool = True) -> "Vocabulary":
        return cls.from_counts(Counter(tokens), min_freq=min_freq, with_unk=with_unk)

    def extend(self, tokens: Iterable[str]) -> "Vocabulary":
        """A new vocabulary: this one followed by the given tokens it lacks (in their order, without count)."""
        return Vocabulary(self.itos + [t for t in dict.fromkeys(tokens) if t not in self.stoi],
                          with_unk=self.with_unk, counts=self.counts)

    def singletons(self) -> list[bool]:
        """Per index: True for a token counted exactly once in training (the candidates for ``<unk>`` replacement)."""
        return [self.counts.get(t, 0) == 1 for t in self.itos]

    def index(self, token: str) -> int:
        i = self.stoi.get(token)
        if i is None:
            if not self.with_unk:
                raise KeyError(token)
            return 1
        return i

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi
