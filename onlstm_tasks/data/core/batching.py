"""Batch containers (tensors + mask) shared by the data modules and the models, and the target id they ignore."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch

IGNORE = -100  # target of positions that predict nothing, label id of unlabelled inputs (cross_entropy's ignore_index)


class DeviceBatch:
    """A batch dataclass's tensor fields, pinned and moved in one call each.

    ``pin_memory()``: the DataLoader's ``pin_memory=True`` (on a GPU) calls it, so that the batch's tensors move to
    the device without blocking the host. ``to(device)``: Lightning's batch transfer calls it (an object with a ``to``
    method is moved whole) instead of walking the batch itself, which deep-copies every dataclass it meets and
    rebuilds every list, the words' lists of strings included: 0.6-2.1 ms a batch of the OntoNotes configs on a CPU
    (the mean over an epoch of the kit), against ~10 µs here (``python scripts/benchmark_batch_transfer.py``)."""

    def pin_memory(self):
        return replace(self, **{f.name: _pinned(getattr(self, f.name)) for f in fields(self)})

    def to(self, device: torch.device | str, non_blocking: bool | None = None):
        """A copy with every tensor (and nested batch) on ``device``, the rest shared. ``non_blocking`` defaults to
        Lightning's choice for tensors: on except to the CPU and MPS."""
        device = torch.device(device)
        if non_blocking is None:
            non_blocking = device.type not in ("cpu", "mps")
        return replace(self, **{f.name: _moved(getattr(self, f.name), device, non_blocking) for f in fields(self)})


def _pinned(value):
    return value.pin_memory() if hasattr(value, "pin_memory") and not isinstance(value, type) else value


def _moved(value, device: torch.device, non_blocking: bool):
    if isinstance(value, (torch.Tensor, DeviceBatch)):
        return value.to(device, non_blocking=non_blocking)
    return value


@dataclass
class TokenBatch(DeviceBatch):
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
