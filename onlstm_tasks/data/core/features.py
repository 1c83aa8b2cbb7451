"""Examples -> index sequences -> padded :class:`TokenBatch` tensors."""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from .batching import TokenBatch
from .examples import Example
from .vector_file import read_vector_words
from .vocab import Vocabulary

_DIGITS = re.compile(r"\d")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WordNormalizer:
    """How a word is looked up in the word vocabulary (characters always see the raw word).

    ``lowercase_fallback``: a normalised word missing from the vocabulary is looked up lowercased before it
    becomes ``<unk>`` (``THE`` takes the row of ``the``); applied by :class:`TokenEncoder`.
    """

    lowercase: bool = False
    normalize_digits: bool = True
    lowercase_fallback: bool = False

    def __call__(self, word: str) -> str:
        if self.lowercase:
            word = word.lower()
        if self.normalize_digits:
            word = _DIGITS.sub("0", word)
        return word


def lowercase_fallback_for(lowercase_fallback: bool | None, vectors: str | None) -> bool:
    """A data module's ``lowercase_fallback`` option: as given, or (``None``) on exactly when a vectors file
    extends the vocabulary."""
    return bool(vectors) if lowercase_fallback is None else bool(lowercase_fallback)


def build_vocabularies(
    examples: Iterable[Example], normalizer: WordNormalizer, min_freq: int = 1
) -> tuple[Vocabulary, Vocabulary]:
    """Word and character vocabularies from (training) examples."""
    words, chars = Counter(), Counter()
    for ex in examples:
        for w in ex.words:
            words[normalizer(w)] += 1
            chars.update(w)
    return Vocabulary.from_counts(words, min_freq=min_freq), Vocabulary.from_counts(chars)


def extend_with_vectors(
    words: Vocabulary, path: str, normalizer: WordNormalizer, max_words: int | None
) -> tuple[Vocabulary, dict[str, int]]:
    """``words`` followed by the words of the vectors file ``path`` that it lacks: the first ``max_words`` words of
    the file (most frequent first; all with ``None``), normalised as the data's words are, so dev, test and
    predict-time words that training never saw are looked up in them. Returns the vocabulary and the counts
    ``read`` (file words taken), ``known`` (already training words), ``merged`` (equal to an earlier file word
    after normalisation) and ``added``."""
    read = read_vector_words(path, max_words)
    normalised = [normalizer(w) for w in read]
    distinct = list(dict.fromkeys(normalised))
    known = sum(w in words for w in distinct)
    extended = words.extend(distinct)
    return extended, {"read": len(read), "known": known, "merged": len(read) - len(distinct),
                      "added": len(extended) - len(words)}


class TokenEncoder:
    """Turns the words of an example into word ids and character ids.

    Characters beyond ``max_word_length`` are left out of a word's *character features* only: the word itself,
    its word id and its tag are always kept (this bounds the char tensor for URLs and similar). ``truncated_words``
    counts the words so cut; :meth:`log_truncation` reports the count once (e.g. per split).
    """

    def __init__(self, words: Vocabulary, chars: Vocabulary, normalizer: WordNormalizer,
                 max_word_length: int = 30) -> None:
        if max_word_length < 1:
            raise ValueError(f"max_word_length must be at least 1, got {max_word_length}")
        self.words, self.chars, self.normalizer = words, chars, normalizer
        self.max_word_length = max_word_length
        self.truncated_words = 0

    def word_id(self, word: str) -> int:
        """The vocabulary index of a raw word: its normalised form, else (``lowercase_fallback``) that lowercased,
        else ``<unk>``."""
        key = self.normalizer(word)
        i = self.words.stoi.get(key)
        if i is None and self.normalizer.lowercase_fallback:
            i = self.words.stoi.get(key.lower())
        return self.words.index(key) if i is None else i

    def encode(self, words: Sequence[str]) -> tuple[list[int], list[list[int]]]:
        word_ids = [self.word_id(w) for w in words]
        self.truncated_words += sum(len(w) > self.max_word_length for w in words)
        char_ids = [[self.chars.index(c) for c in w[: self.max_word_length]] for w in words]
        return word_ids, char_ids

    def log_truncation(self, where: str) -> None:
        """One INFO line for the words encoded so far that were longer than ``max_word_length`` (if any)."""
        if self.truncated_words:
            log.info("%s: %d word(s) longer than max_word_length=%d characters: their characters beyond it are left "
                     "out of the character features (the words, word ids and tags are kept)", where,
                     self.truncated_words, self.max_word_length)


def pad_tokens(
    items: Sequence[tuple[list[int], list[list[int]], Sequence[str]]], singletons: torch.Tensor | None = None
) -> TokenBatch:
    """Pads (word ids, char ids, raw words) triples into a :class:`TokenBatch`.

    ``singletons``: a bool per word-vocabulary index (:meth:`Vocabulary.singletons`); given, the batch's
    ``singletons`` flags the tokens whose word occurs once in training (for ``<unk>`` replacement in training).
    """
    batch, steps = len(items), max(len(w) for w, _, _ in items)
    max_chars = max((len(c) for _, chars, _ in items for c in chars), default=1) or 1
    word_ids = torch.zeros(batch, steps, dtype=torch.long)
    char_ids = torch.zeros(batch, steps, max_chars, dtype=torch.long)
    mask = torch.zeros(batch, steps, dtype=torch.bool)
    for b, (w, chars, _) in enumerate(items):
        word_ids[b, : len(w)] = torch.tensor(w)
        mask[b, : len(w)] = True
        for t, c in enumerate(chars):
            if c:
                char_ids[b, t, : len(c)] = torch.tensor(c)
    return TokenBatch(word_ids=word_ids, char_ids=char_ids, mask=mask, words=[list(words) for *_, words in items],
                      singletons=None if singletons is None else singletons[word_ids])


def words_to_batch(
    sentences: Sequence[Sequence[str]],
    word_vocab: Sequence[str],
    char_vocab: Sequence[str],
    normalizer: WordNormalizer | None = None,
    max_word_length: int = 30,
) -> TokenBatch:
    """Raw token lists -> a padded :class:`TokenBatch`, with the vocabulary lists a model keeps in its
    hyper-parameters (``word_vocab``/``char_vocab``, each starting with ``<pad>``, ``<unk>``).

    ``normalizer`` and ``max_word_length`` must be those of the data module the model was trained with (default:
    ``WordNormalizer()``, 30), or unseen spellings silently become ``<unk>``.
    """
    if isinstance(sentences, str) or not sentences:
        raise ValueError("sentences must be a non-empty list of token lists")
    for i, words in enumerate(sentences):
        if isinstance(words, str) or not words or not all(isinstance(w, str) and w for w in words):
            raise ValueError(f"sentence {i} must be a non-empty list of non-empty token strings, got {words!r}")
    encoder = TokenEncoder(Vocabulary(list(word_vocab)[2:]), Vocabulary(list(char_vocab)[2:]),
                           normalizer or WordNormalizer(), max_word_length)
    batch = pad_tokens([(*encoder.encode(words), words) for words in sentences])
    encoder.log_truncation(f"{len(sentences)} sentence(s)")
    return batch
