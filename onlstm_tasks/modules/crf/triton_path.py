"""The CRF's log-partition on a GPU as two Triton launches (:mod:`.triton_kernels`): one forward, one backward,
whatever the length, where :mod:`.scan`'s rounds cost ~170 more operations per training step at the NER shapes
(forward and backward, each a kernel launch and its host time; ``python scripts/ops_per_step.py --gpu-path`` counts
a step). A plain ``autograd.Function``; the scan stays the path under ``torch.compile``.

Runs on CUDA tensors, and on CPU tensors under Triton's interpreter (``TRITON_INTERPRET=1`` when Triton is first
imported, for tests). Computes in float32 whatever the emissions' dtype (the result comes back in it).
"""

from __future__ import annotations

import torch
from torch import Tensor

MAX_TAGS = 64  # up to 64 tags a [KP, KP] tile per step fits in registers (OntoNotes' IOB2: 37); more spill
#               (where the path runs: :func:`.paths.choose`)


class _LogPartition(torch.autograd.Function):
    @staticmethod
    def forward(ctx, emissions: Tensor, lengths: Tensor, start: Tensor, transitions: Tensor, end: Tensor) -> Tensor:
        from .triton_kernels import crf_forward_kernel

        batch, steps, tags = emissions.shape
        alphas = torch.empty_like(emissions)
        log_z = emissions.new_empty(batch)
        crf_forward_kernel[(batch,)](emissions, lengths, start, transitions, end, alphas, log_z, steps, tags,
                                     **launch_constants(tags))
        ctx.save_for_backward(emissions, lengths, transitions, end, alphas, log_z)
        return log_z

    @staticmethod
    def backward(ctx, grad_log_z: Tensor):
        from .triton_kernels import crf_backward_kernel

        emissions, lengths, transitions, end, alphas, log_z = ctx.saved_tensors
        batch, steps, tags = emissions.shape
        grad_emissions = torch.zeros_like(emissions)  # padded steps stay 0
        grad_transitions = emissions.new_empty(batch, tags, tags)
        grad_start, grad_end = emissions.new_empty(2, batch, tags)
        crf_backward_kernel[(batch,)](emissions, lengths, transitions, end, alphas, log_z, grad_log_z.contiguous(),
                                      grad_emissions, grad_transitions, grad_start, grad_end, steps, tags,
                                      **launch_constants(tags))
        return grad_emissions, None, grad_start.sum(0), grad_transitions.sum(0), grad_end.sum(0)


def launch_constants(tags: int) -> dict[str, int]:
    """The kernels' tile (``KP``: the tags padded to a power of two, at least 16) and warps (8 at ``KP`` 64, where 4
    would use 250 registers a thread in the backward; ``scripts/compile_triton_kernels.py`` prints them)."""
    padded = max(16, 1 << (tags - 1).bit_length())
    return {"KP": padded, "num_warps": 8 if padded >= 64 else 4}


def log_partition(emissions: Tensor, mask: Tensor, start: Tensor, transitions: Tensor, end: Tensor) -> Tensor:
    """log Z per sentence, [B] (in emissions' dtype), differentiable in every argument but ``mask``; as
    :func:`.scan.log_partition`."""
    dtype = emissions.dtype
    with torch.autocast(emissions.device.type, enabled=False):
        inputs = (t.float().contiguous() for t in (emissions, start, transitions, end))
        emissions32, start32, transitions32, end32 = inputs
        lengths = mask.sum(1)
        return _LogPartition.apply(emissions32, lengths, start32, transitions32, end32).to(dtype)
