"""Which warnings of ``torch.cuda.set_sync_debug_mode("warn")`` are host syncs (for the CUDA tests and
``scripts/fit_sync_check.py``).

A sync warns with c10's own text, :data:`SYNC_WARNING`. Setting the mode also warns, once per process, that
"Synchronization debug mode is a prototype feature and does not yet detect all synchronizing operations" (PyTorch's
``THCPModule_cudaSetSyncDebugMode``): not a sync, but it holds "synchroniz", the word both checks used to look for.
It was the one "sync" that the CUDA test and the fit check had counted on the H200, in the first measured step only,
at ``torch/cuda/__init__.py:1270`` (torch 2.11: the line of ``set_sync_debug_mode`` that sets the mode)."""

from __future__ import annotations

SYNC_WARNING = "called a synchronizing CUDA operation"  # c10::cuda::warn_or_error_on_sync


def is_sync(message) -> bool:
    """Whether a warning's message reports a host sync (not the mode's notice about itself)."""
    return SYNC_WARNING in str(message)
