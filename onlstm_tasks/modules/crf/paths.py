"""The CRF's paths: one table (:data:`PATHS`) of the ways to compute its likelihood and its Viterbi path, and the one
place that chooses between them (:func:`choose`), as :func:`onlstm_tasks.encoders.onlstm.registry.resolve` does for
the ON-LSTM's back ends.

A path pairs a log-partition function (None: pytorch-crf's own likelihood, the oracle) with a decoder, and says why
it cannot run on given emissions (``why_not``: None where it can). :func:`choose` takes the first that can:

- ``triton``: the likelihood in two Triton launches (:mod:`.triton_path`: the forward and backward algorithms, one
  program per sentence) and the scan's Viterbi: CUDA tensors of at most 64 tags, Triton installed, not under
  ``torch.compile`` or ``torch.jit.trace``. The scan's rounds cost ~170 more operations per training step, each a
  launch and its host time;
- ``scan``: :mod:`.scan`'s semiring scans, ``ceil(log2 T)`` batched rounds for both: where a per-step loop is
  launch-bound (a GPU) and under ``torch.compile``. Its ``O(T K^3)`` work costs several times the loops on a CPU
  (``scripts/benchmark_crf.py``);
- ``compiled``: the compiled forward-backward kernels (:mod:`.compiled`) for the likelihood and the loop Viterbi of
  :mod:`.loop` (faster than the scan on a CPU): float32 CPU tensors, kernels built;
- ``loop``: pytorch-crf's loop and the loop Viterbi, anywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from onlstm_tasks import native

from . import compiled, loop, scan, triton_path


@dataclass(frozen=True)
class CRFPath:
    name: str
    why_not: Callable[[Tensor], str | None]
    log_partition: Callable[..., Tensor] | None  # (emissions, mask, start, transitions, end) -> log Z [B]
    viterbi: Callable[..., tuple[Tensor, Tensor]]  # (emissions, mask, start, transitions, end) -> (tags, scores)


def _triton_why_not(emissions: Tensor) -> str | None:
    if emissions.device.type != "cuda":
        return "the Triton kernels run on CUDA devices"
    if emissions.size(-1) > triton_path.MAX_TAGS:
        return f"more than {triton_path.MAX_TAGS} tags spill the kernels' registers; the scan runs them"
    if torch.compiler.is_compiling() or torch.jit.is_tracing():
        return "a compiler or tracer takes the scan whole"
    try:
        import triton  # noqa: F401
    except ImportError:
        return "Triton is not installed (pip install triton)"
    return None


def _scan_why_not(emissions: Tensor) -> str | None:
    if emissions.device.type == "cpu" and not torch.compiler.is_compiling():
        return "on the CPU the scan's O(T K^3) work costs several times the loops; it runs there under torch.compile"
    return None


def _compiled_why_not(emissions: Tensor) -> str | None:
    if torch.compiler.is_compiling():
        return "the compiled kernels are opaque to torch.compile"
    return native.why_not(emissions)


PATHS = (
    CRFPath("triton", _triton_why_not, triton_path.log_partition, scan.viterbi),
    CRFPath("scan", _scan_why_not, scan.log_partition, scan.viterbi),
    CRFPath("compiled", _compiled_why_not, compiled.log_partition, loop.viterbi_decode),
    CRFPath("loop", lambda emissions: None, None, loop.viterbi_decode),
)


def choose(emissions: Tensor) -> CRFPath:
    """The first path of :data:`PATHS` that can run on ``emissions``."""
    return next(path for path in PATHS if path.why_not(emissions) is None)


def named(name: str) -> CRFPath:
    """The path of :data:`PATHS` called ``name`` (a KeyError names the choices)."""
    found = {path.name: path for path in PATHS}
    if name not in found:
        raise KeyError(f"no CRF path {name!r}; the paths: {', '.join(found)}")
    return found[name]
