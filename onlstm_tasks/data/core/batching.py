"""Batch containers (tensors + mask) shared by the data modules and the models, and the target id they ignore."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch

IGNORE = -100  # target of positions that predict nothing, label id of unlabelled inputs (cross_entropy's ignore_index)


class PinsMemory:
    """``pin_memory()`` for a batch dataclass: the DataLoader's ``pin_memory=True`` (on a GPU) calls it, so that the
    batch's tensors move to the device without blocking the host (Lightning moves them with ``non_blocking``)."""

    def pin_memory(self):
        return replace(self, **{f.name: _pinned(getattr(self, f.name)) for f in fields(self)})


def _pinned(value):
    return value.pin_memory() if hasattr(value, "pin_memory") and not isinstance(value, type) else value


@dataclass
class TokenBatch(PinsMemory):
    """Token-level inputs of a padded batch.

    word_ids: [B, T] long, 0 = padding (word vocabulary indices after normalisation)
    char_ids: [B, T, C] long, 0 = padding (character vocabulary indices of the raw words)
    mask:     [B, T] bool, True at real tokens; every row is a prefix of Trues (left-aligned)
    words:    the raw tokens of every sentence (for sub-word embedders and for output)
    singletons: [B, T] bool, True at tokens whose word occurs once in training (training batches of a data module
              that knows the training counts; None otherwise): the word embedder's ``unk_replace`` candidates
    """

    word_ids: torch.Tensor
    char_ids: torch.Tensor
    mask: torch.Tensor
    words: list[list[str]]
    singletons: torch.Tensor | None = None
