"""The compiled ON-LSTM step (``_onlstm_step.c``), when it was built: loading, the switch, and one layer's binding.

``pip install`` compiles the C file when a compiler is present (setup.py; optional, so an install never fails for
want of one). :func:`usable` tells :class:`~onlstm_tasks.encoders.onlstm_function._Layer` whether a layer may run
its per-step element-wise work through it: the library was built and loads, the tensors are float32 on the CPU, and
``ONLSTM_FUSED_STEP`` is not ``0``. Otherwise (CUDA, float64, no compiler) the pure-PyTorch loop runs; both follow
the same conventions and are tested against each other and against the reference cell.

The recurrent matrix product of each step stays a PyTorch call; only the dozen element-wise operations after it
become one C call, through ctypes with a prepared argument block, so that building needs no PyTorch headers and
no compile happens at import.
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

log = logging.getLogger(__name__)

ENV = "ONLSTM_FUSED_STEP"


class _Strided(ctypes.Structure):
    """Per step t, direction k, row r the values at ``base + t * st + k * sk + r * sr`` (float32 elements)."""

    _fields_ = [("base", ctypes.c_void_p), ("st", ctypes.c_int64), ("sk", ctypes.c_int64), ("sr", ctypes.c_int64)]


class _Context(ctypes.Structure):
    """The C ``layer`` struct, field for field."""

    _fields_ = [
        ("dirs", ctypes.c_int64), ("hidden", ctypes.c_int64), ("levels", ctypes.c_int64),
        ("chunk", ctypes.c_int64), ("symmetric", ctypes.c_int64), ("scratch", ctypes.c_void_p),
        ("act", _Strided), ("h", _Strided), ("c_prev", _Strided), ("c_new", _Strided), ("master", _Strided),
        ("save", ctypes.c_int64),
        ("prob", _Strided), ("c_hat", _Strided), ("omega", _Strided), ("eff", _Strided), ("tanh_c", _Strided),
    ]


def _load() -> ctypes.CDLL | None:
    spec = importlib.util.find_spec(f"{__package__}._onlstm_step")
    if spec is None or not spec.origin:
        log.debug("compiled ON-LSTM step not built; using the PyTorch loop")
        return None
    try:
        lib = ctypes.CDLL(spec.origin)
    except OSError as err:  # built for another machine, say
        log.warning("compiled ON-LSTM step %s does not load (%s); using the PyTorch loop", spec.origin, err)
        return None
    lib.onlstm_step.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    lib.onlstm_step.restype = ctypes.c_int
    return lib


_LIB = _load()
_enabled = os.environ.get(ENV, "1") != "0"


def built() -> bool:
    """Whether the compiled step was built and loads on this machine."""
    return _LIB is not None


def usable(x: torch.Tensor) -> bool:
    """Whether a layer over ``x`` (and weights of its dtype and device) may use the compiled step."""
    return _enabled and _LIB is not None and x.device.type == "cpu" and x.dtype == torch.float32


@contextmanager
def switched(on: bool) -> Iterator[None]:
    """Turns the compiled step on or off within the block (tests and benchmarks compare the two paths)."""
    global _enabled
    before, _enabled = _enabled, on
    try:
        yield
    finally:
        _enabled = before


def strided(buf: torch.Tensor, per_step: bool = True) -> _Strided:
    """A [K, T, B, ...] buffer (or [K, B, ...] reused at every step, ``per_step=False``) whose trailing dimensions
    are contiguous, as the C code reads it."""
    if per_step:
        k, t, r = buf.stride()[:3]
    else:
        (k, r), t = buf.stride()[:2], 0
    return _Strided(buf.data_ptr(), t, k, r)


class FusedSteps:
    """The compiled step bound to one layer's buffers: ``steps(t, rows)`` runs step t on the first ``rows`` rows.

    ``c_slots``: the cell buffers the steps read and write, as ``(c_prev, c_new)`` pairs of :func:`strided` views
    for even and odd steps (one pair when the views are per step). The tensors must stay alive while this is used
    (the caller holds them); the C code keeps only their addresses.
    """

    def __init__(self, *, dirs: int, hidden: int, levels: int, symmetric: bool, act: _Strided, h: _Strided,
                 master: _Strided, c_slots: list[tuple[_Strided, _Strided]], scratch: torch.Tensor,
                 saved: dict[str, _Strided] | None = None):
        if scratch.numel() < 2 * hidden + 2 * levels or not scratch.is_contiguous():
            raise ValueError("scratch must be contiguous with at least 2 * hidden + 2 * levels elements")
        self._scratch = scratch
        self._contexts = []
        for c_prev, c_new in c_slots:
            ctx = _Context(dirs=dirs, hidden=hidden, levels=levels, chunk=hidden // levels, symmetric=int(symmetric),
                           scratch=scratch.data_ptr(), act=act, h=h, c_prev=c_prev, c_new=c_new, master=master,
                           save=int(saved is not None), **(saved or {}))
            self._contexts.append(ctx)
        self._refs = [ctypes.byref(ctx) for ctx in self._contexts]
        self._step = _LIB.onlstm_step

    def __call__(self, t: int, rows: int) -> None:
        self._step(self._refs[t % len(self._refs)], t, rows)
