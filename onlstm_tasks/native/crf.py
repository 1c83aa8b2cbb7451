"""The linear-chain CRF's compiled kernels (``csrc/crf_cpu.cpp``): the forward and backward algorithms over each
sentence's own length. :mod:`.library` loads them; :mod:`onlstm_tasks.modules.crf.compiled` wraps them as an
operator with its autograd formula."""

from __future__ import annotations

from torch import Tensor
import torch

from .library import available


def forward(emissions: Tensor, lengths: Tensor, start: Tensor, transitions: Tensor, end: Tensor) -> tuple[Tensor, Tensor]:
    """``(log Z [B], log alpha [B, T, K] float64)`` (see ``cpu_crf_forward`` in ``csrc/crf_cpu.cpp``)."""
    available()  # loads the kernels
    return torch.ops.onlstm_tasks.cpu_crf_forward(emissions.contiguous(), lengths, start.contiguous(),
                                                  transitions.contiguous(), end.contiguous())


def backward(grad_log_z: Tensor, emissions: Tensor, lengths: Tensor, start: Tensor, transitions: Tensor, end: Tensor,
             alpha: Tensor, log_z: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The marginals times ``grad_log_z``: gradients in emissions, start, transitions and end (see
    ``cpu_crf_backward`` in ``csrc/crf_cpu.cpp``)."""
    available()
    return torch.ops.onlstm_tasks.cpu_crf_backward(grad_log_z.contiguous(), emissions.contiguous(), lengths,
                                                   start.contiguous(), transitions.contiguous(), end.contiguous(),
                                                   alpha, log_z)
