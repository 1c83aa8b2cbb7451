"""A split encoded once into flat tensors, and batches cut from it by index arithmetic: no per-token Python.

:class:`PackedTokens` holds every token of a split in one row of flat tensors (word ids, per-token values such as
tags, and each token's characters as a slice of one flat character tensor), with each sentence's start and length.
A batch of sentences is then a handful of tensor operations: the positions ``start + t`` of every (row, step), a
gather of the word ids and values there, and a gather of the characters at ``char_start + c``. Index 0 of every
flat tensor is a padding entry (value 0, no characters): padded places gather it, so no ``where`` is needed.

What a batch of :func:`~onlstm_tasks.data.core.features.pad_tokens` holds, this gives exactly (the same shapes: ``T`` the
longest sentence, the character width the longest word of the batch, at least 1): tests hold the two equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

import torch

from .batching import TokenBatch


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def tensor_form_heads(heads: Sequence[int] | None, length: int) -> list[int]:
    """A sentence's heads in list form (1-based, 0 the root; None: no tree, zeros) as the per-token values of the
    tensor form of :func:`~onlstm_tasks.trees.heads.heads_to_tensor` (0-based, the root pointing to itself)."""
    if heads is None:
        return [0] * length
    return [t if h == 0 else h - 1 for t, h in enumerate(heads)]


def gold_heads_values(items) -> dict[str, list[list[int]]]:
    """``{"heads": ...}`` for a split's encoded items whose last field is the gold heads (None: no tree), or ``{}``
    where no sentence has a tree (a model that reads no gold tree: nothing to gather per batch)."""
    if all(item[-1] is None for item in items):
        return {}
    return {"heads": [tensor_form_heads(item[-1], len(item[0])) for item in items]}


def padded_heads(gathered: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Gathered tensor-form heads ``[B, T]`` with padded places pointing to themselves (as ``heads_to_tensor``)."""
    return torch.where(mask, gathered, torch.arange(mask.size(1))[None, :])


class PackedTokens:
    """The tokens of a split as flat tensors: built from ``(word ids, char ids, raw words)`` per sentence, and
    ``values``: named per-token integer lists per sentence (tags, say), each gathered as a [B, T] tensor."""

    def __init__(self, sentences: Sequence[tuple[list[int], list[list[int]], Sequence[str]]],
                 values: dict[str, Sequence[Sequence[int]]] | None = None) -> None:
        self.lengths = [len(w) for w, _, _ in sentences]
        self.widths = [max((len(c) for c in chars), default=0) for _, chars, _ in sentences]
        self.words = [list(words) for *_, words in sentences]
        starts = [1]  # flat index 0: the padding entry
        for n in self.lengths[:-1]:
            starts.append(starts[-1] + n)
        self.starts = torch.tensor(starts[: len(sentences)], dtype=torch.long)
        self.length_tensor = torch.tensor(self.lengths, dtype=torch.long)
        self.word_ids = torch.tensor([0, *chain.from_iterable(w for w, _, _ in sentences)], dtype=torch.long)
        token_chars = [c for _, chars, _ in sentences for c in chars]
        char_lengths = [0, *(len(c) for c in token_chars)]
        char_starts = [1]  # flat character 0: padding
        for n in char_lengths[1:-1]:
            char_starts.append(char_starts[-1] + n)
        self.char_starts = torch.tensor([0, *char_starts[: len(token_chars)]], dtype=torch.long)
        self.char_lengths = torch.tensor(char_lengths, dtype=torch.long)
        self.char_ids = torch.tensor([0, *chain.from_iterable(token_chars)], dtype=torch.long)
        self.values = {name: torch.tensor([0, *chain.from_iterable(rows)], dtype=torch.long)
                       for name, rows in (values or {}).items()}

    def positions(self, indices: Sequence[int], pad_to: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """``(flat positions [B, T], mask [B, T])`` of the sentences ``indices``, ``T`` the longest rounded up to a
        multiple of ``pad_to``; padded places at position 0."""
        steps = round_up(max(self.lengths[i] for i in indices), pad_to)
        chosen = torch.as_tensor(indices, dtype=torch.long)
        t = torch.arange(steps)
        mask = t[None, :] < self.length_tensor[chosen][:, None]
        return (self.starts[chosen][:, None] + t[None, :]) * mask, mask

    def batch(self, indices: Sequence[int], singletons: torch.Tensor | None = None, pad_to: int = 1
              ) -> tuple[TokenBatch, dict[str, torch.Tensor]]:
        """The :class:`TokenBatch` of the sentences ``indices`` and their ``values``, each [B, T] (0 at padding).
        ``singletons`` as :func:`~onlstm_tasks.data.core.features.pad_tokens` takes it; ``pad_to``: the length and the
        character width rounded up to a multiple of it (fewer distinct shapes)."""
        positions, mask = self.positions(indices, pad_to)
        word_ids = self.word_ids[positions]
        width = round_up(max(max(self.widths[i] for i in indices), 1), pad_to)
        c = torch.arange(width)
        in_word = c < self.char_lengths[positions][..., None]  # [B, T, C]; padded places have no characters
        char_ids = self.char_ids[(self.char_starts[positions][..., None] + c) * in_word]
        tokens = TokenBatch(word_ids=word_ids, char_ids=char_ids, mask=mask,
                            words=[self.words[i] for i in indices],
                            singletons=None if singletons is None else singletons[word_ids])
        return tokens, {name: flat[positions] for name, flat in self.values.items()}
