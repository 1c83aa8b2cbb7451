"""The ON-LSTM's compiled kernels (``csrc/onlstm_cpu.cpp``): the layer's time loop, the packed product, and
DropConnect's random words and masking. Each function is one operator; :mod:`.library` loads them."""

from __future__ import annotations

import torch

STREAMS = 16  # xoshiro128++ generators side by side (STREAMS in csrc/onlstm_cpu.cpp)


def forward_loop(*args) -> None:
    """Every step of a layer's forward (see ``cpu_forward_loop`` in ``csrc/onlstm_cpu.cpp``)."""
    torch.ops.onlstm_tasks.cpu_forward_loop(*args)


def backward_loop(*args) -> None:
    """Every step of a layer's backward (see ``cpu_backward_loop`` in ``csrc/onlstm_cpu.cpp``)."""
    torch.ops.onlstm_tasks.cpu_backward_loop(*args)


def product(out: torch.Tensor, a: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor | None = None,
            transpose: bool = False) -> torch.Tensor:
    """``out[k] += a[k] @ weight[k]`` (``weight[k].T``, columns scaled by ``scale``, with ``transpose``) through the
    compiled product, on weights packed once (see ``cpu_product`` in ``csrc/onlstm_cpu.cpp``); returns ``out``."""
    torch.ops.onlstm_tasks.cpu_product(out, a, weight.contiguous(), scale, transpose)
    return out


def random_words(words: int, state: torch.Tensor) -> torch.Tensor:
    """``words`` random int32 words from the compiled xoshiro128++ generators, whose ``state`` (int32 [64]) is
    advanced in place."""
    return torch.ops.onlstm_tasks.cpu_random_words(words, state)


def masked(values: torch.Tensor, lanes: torch.Tensor, threshold: int, scale: float) -> torch.Tensor:
    """A new tensor: ``values`` with the entries whose ``lanes`` (int16, low 15 bits) are below ``threshold`` times
    ``scale``, the others zero, in one pass (float32 CPU values)."""
    return torch.ops.onlstm_tasks.cpu_dropconnect(values, lanes, threshold, scale)
