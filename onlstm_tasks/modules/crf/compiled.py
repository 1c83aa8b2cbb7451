"""The CRF's log-partition on the CPU as one operator: ``torch.ops.onlstm_tasks.crf_log_partition``, the forward and
backward algorithms in the compiled kernels (:mod:`onlstm_tasks.native.crf`, built at install with the ON-LSTM's),
each sentence over its own length, one sentence per task on ATen's threads.

:mod:`.scan`'s log-semiring scan needs ``O(T K^3)`` work against the loop's ``O(T K^2)``: on a GPU that is
nothing, on a CPU it costs several times pytorch-crf's loop (``scripts/benchmark_crf.py``). This operator is one call
forward and one backward whatever T, as fast as a hand-written loop gets. Registered with a fake implementation and
its autograd formula like the ON-LSTM's operator.
"""

from __future__ import annotations

import torch
from torch import Tensor

from onlstm_tasks.native import crf as kernels


@torch.library.custom_op("onlstm_tasks::crf_log_partition", mutates_args=())
def crf_log_partition(emissions: Tensor, lengths: Tensor, start: Tensor, transitions: Tensor,
                      end: Tensor) -> tuple[Tensor, Tensor]:
    """``(log Z [B], log alpha [B, T, K] float64)``: the forward algorithm over each row's ``lengths`` steps."""
    return kernels.forward(emissions, lengths, start, transitions, end)


@crf_log_partition.register_fake
def _(emissions, lengths, start, transitions, end):
    return emissions.new_empty(emissions.size(0)), emissions.new_empty(emissions.shape, dtype=torch.float64)


@torch.library.custom_op("onlstm_tasks::crf_log_partition_backward", mutates_args=())
def crf_log_partition_backward(grad_log_z: Tensor, emissions: Tensor, lengths: Tensor, start: Tensor,
                               transitions: Tensor, end: Tensor, alpha: Tensor,
                               log_z: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The gradients of ``sum(grad_log_z * log Z)`` in emissions, start, transitions and end (the marginals)."""
    return kernels.backward(grad_log_z, emissions, lengths, start, transitions, end, alpha, log_z)


@crf_log_partition_backward.register_fake
def _(grad_log_z, emissions, lengths, start, transitions, end, alpha, log_z):
    return torch.empty_like(emissions), torch.empty_like(start), torch.empty_like(transitions), torch.empty_like(end)


def _setup_context(ctx, inputs, output):
    emissions, lengths, start, transitions, end = inputs
    ctx.save_for_backward(emissions, lengths, start, transitions, end, output[1], output[0])


def _backward(ctx, grad_log_z, unused):
    emissions, lengths, start, transitions, end, alpha, log_z = ctx.saved_tensors
    d_e, d_start, d_trans, d_end = crf_log_partition_backward(grad_log_z, emissions, lengths, start, transitions,
                                                              end, alpha, log_z)
    return d_e, None, d_start, d_trans, d_end


crf_log_partition.register_autograd(_backward, setup_context=_setup_context)


def log_partition(emissions: Tensor, mask: Tensor, start: Tensor, transitions: Tensor, end: Tensor) -> Tensor:
    """:func:`.scan.log_partition`'s result through the compiled kernels (float32 CPU tensors, kernels built:
    :data:`.paths.PATHS` says when)."""
    return crf_log_partition(emissions, mask.sum(1), start, transitions, end)[0]
