"""The compiled ON-LSTM step (``_onlstm_step.c``), when it was built: loading, the switch, one layer's binding, and
the compiled DropConnect helpers (:func:`random_words`, :func:`masked`; used by :mod:`.dropconnect`).

``pip install`` compiles the C file when a compiler is present (setup.py; optional, so an install never fails for
want of one). :func:`usable` tells :class:`~onlstm_tasks.encoders.onlstm.layer_pass.LayerPass` whether a layer may run
its per-step element-wise work through it: the library was built and loads, the tensors are float32 on the CPU, and
``ONLSTM_FUSED_STEP`` is not ``0``. Otherwise (CUDA, float64, no compiler) the pure-PyTorch loop runs; both follow
the same conventions and are tested against each other and against the reference cell.

The recurrent matrix product of each step stays a PyTorch call; only the dozen element-wise operations after it
(and, in the backward, the twenty before the next product) become one C call. The call goes through ctypes with
a prepared argument block, so that building needs no PyTorch headers and nothing compiles at import. A library
whose ``onlstm_step_abi()`` differs from :data:`ABI` (a build older than its source: rerun ``pip install``) is
not used.
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
ABI = 4  # ONLSTM_STEP_ABI in _onlstm_step.c: bumped whenever a struct or signature changes


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


class _GradContext(ctypes.Structure):
    """The C ``layer_grad`` struct, field for field."""

    _fields_ = [
        ("dirs", ctypes.c_int64), ("hidden", ctypes.c_int64), ("levels", ctypes.c_int64),
        ("chunk", ctypes.c_int64), ("symmetric", ctypes.c_int64), ("scratch", ctypes.c_void_p),
        *((name, _Strided) for name in ("d_h", "act", "tanh_c", "cells", "eff", "omega", "master", "prob",
                                        "d_const", "d_pre", "carry")),
    ]


def _load() -> ctypes.CDLL | None:
    spec = importlib.util.find_spec(f"{__package__}._onlstm_step")
    if spec is None or not spec.origin:
        log.debug("compiled ON-LSTM step not built; using the PyTorch loop")
        return None
    try:
        lib = ctypes.CDLL(spec.origin)
        abi = lib.onlstm_step_abi()
    except (OSError, AttributeError) as err:  # built for another machine, or before the ABI check existed
        log.warning("compiled ON-LSTM step %s does not load (%s); using the PyTorch loop", spec.origin, err)
        return None
    if abi != ABI:
        log.warning("compiled ON-LSTM step %s is version %d, this code needs %d (rerun pip install); using the "
                    "PyTorch loop", spec.origin, abi, ABI)
        return None
    lib.onlstm_step.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    lib.onlstm_step.restype = ctypes.c_int
    lib.onlstm_step_backward.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]
    lib.onlstm_step_backward.restype = ctypes.c_int
    lib.onlstm_dropconnect.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                       ctypes.c_int32, ctypes.c_float]
    lib.onlstm_dropconnect.restype = None
    lib.onlstm_random_words.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
    lib.onlstm_random_words.restype = None
    return lib


_LIB = _load()
_enabled = os.environ.get(ENV, "1") != "0"


def built() -> bool:
    """Whether the compiled step was built and loads on this machine."""
    return _LIB is not None


def usable(x: torch.Tensor) -> bool:
    """Whether a layer over ``x`` (and weights of its dtype and device) may use the compiled step."""
    return on_cpu(x.device) and x.dtype == torch.float32


def on_cpu(device: torch.device) -> bool:
    """Whether the compiled library is in use (built, loaded, not switched off) and ``device`` is the CPU."""
    return _enabled and _LIB is not None and device.type == "cpu"


@contextmanager
def switched(on: bool) -> Iterator[None]:
    """Turns the compiled step on or off within the block (tests and benchmarks compare the two paths)."""
    global _enabled
    before, _enabled = _enabled, on
    try:
        yield
    finally:
        _enabled = before


def strided(buf: torch.Tensor) -> _Strided:
    """The C view of a [K, T, B, n] buffer (per step t, direction k, row r: n contiguous values), or of a [K, B, n]
    one that every step reuses."""
    if buf.dtype != torch.float32 or buf.device.type != "cpu" or buf.stride(-1) != 1:
        raise ValueError("the compiled step reads float32 CPU buffers with a contiguous last dimension, got "
                         f"{buf.dtype} on {buf.device} with strides {buf.stride()}")
    if buf.dim() == 4:
        k, t, r = buf.stride()[:3]
    elif buf.dim() == 3:
        (k, r), t = buf.stride()[:2], 0
    else:
        raise ValueError(f"expected a [K, T, B, n] or [K, B, n] buffer, got shape {tuple(buf.shape)}")
    return _Strided(buf.data_ptr(), t, k, r)


STREAMS = 16  # XOSHIRO_STREAMS in _onlstm_step.c


def random_words(words: int, state: torch.Tensor) -> torch.Tensor:
    """``words`` random 32-bit words (int32) from the compiled xoshiro128++ generators (``onlstm_random_words`` in
    ``_onlstm_step.c``), whose ``state`` (int32 [4 * STREAMS], any values) is advanced in place."""
    if state.dtype != torch.int32 or state.shape != (4 * STREAMS,) or not state.is_contiguous() \
            or state.device.type != "cpu":
        raise ValueError(f"expected a contiguous int32 CPU state of {4 * STREAMS} words, got {state.dtype} "
                         f"{tuple(state.shape)} on {state.device}")
    out = torch.empty(words, dtype=torch.int32)
    _LIB.onlstm_random_words(out.data_ptr(), words, state.data_ptr())
    return out


def masked(values: torch.Tensor, lanes: torch.Tensor, threshold: int, scale: float) -> torch.Tensor:
    """A new tensor: ``values`` with the entries whose ``lanes`` (int16, one per entry, only their low 15 bits
    read) are below ``threshold`` multiplied by ``scale``, the others zeroed, in one pass (``onlstm_dropconnect`` in
    ``_onlstm_step.c``). Float32 CPU ``values``; the same lanes mask the gradient in the backward."""
    if values.dtype != torch.float32 or values.device.type != "cpu":
        raise ValueError(f"the compiled DropConnect reads float32 CPU tensors, got {values.dtype} on {values.device}")
    if lanes.dtype != torch.int16 or lanes.numel() != values.numel() or not lanes.is_contiguous():
        raise ValueError(f"expected {values.numel()} contiguous int16 lanes, got {lanes.numel()} {lanes.dtype}")
    values = values.contiguous()
    out = torch.empty_like(values)
    _LIB.onlstm_dropconnect(out.data_ptr(), values.data_ptr(), lanes.data_ptr(), values.numel(), threshold, scale)
    return out


class FusedSteps:
    """The compiled step bound to one layer's buffers: ``steps(t, rows)`` runs step t on the first ``rows`` rows.

    Buffers as the C struct ``layer`` names them, each [K, T, B, n] or [K, B, n] (see :func:`strided`); ``c_slots``
    the ``(c_prev, c_new)`` cell buffers of even and odd steps (one pair when they are per step); ``saved`` the five
    buffers the backward reads, or None. This object holds on to every buffer, since the C code keeps only their
    addresses.
    """

    def __init__(self, *, hidden: int, levels: int, symmetric: bool, act: torch.Tensor, h: torch.Tensor,
                 master: torch.Tensor, c_slots: list[tuple[torch.Tensor, torch.Tensor]],
                 saved: dict[str, torch.Tensor] | None = None):
        self._scratch = act.new_empty(2 * hidden + 2 * levels)
        self._buffers = (act, h, master, c_slots, saved)
        views = {name: strided(buf) for name, buf in (saved or {}).items()}
        self._contexts = [
            _Context(dirs=act.size(0), hidden=hidden, levels=levels, chunk=hidden // levels, symmetric=int(symmetric),
                     scratch=self._scratch.data_ptr(), act=strided(act), h=strided(h), c_prev=strided(c_prev),
                     c_new=strided(c_new), master=strided(master), save=int(saved is not None), **views)
            for c_prev, c_new in c_slots
        ]
        self._refs = [ctypes.byref(ctx) for ctx in self._contexts]
        self._step = _LIB.onlstm_step

    def __call__(self, t: int, rows: int) -> None:
        self._step(self._refs[t % len(self._refs)], t, rows)


class FusedBackwardSteps:
    """The compiled backward of a step bound to one layer's buffers: ``steps(t, rows, carry_rows)`` writes
    dL/d(pre-activations) of step t's first ``rows`` rows, the first ``carry_rows`` of which receive dL/dc_t from
    step t + 1 through ``carry`` [K, B, H] (updated in place to dL/dc_{t-1}). Buffers as the C struct
    ``layer_grad`` names them (``d_const=None``: no constant share); held on to as in :class:`FusedSteps`."""

    def __init__(self, *, hidden: int, levels: int, symmetric: bool, d_const: torch.Tensor | None,
                 **buffers: torch.Tensor):
        self._scratch = buffers["d_pre"].new_empty(4 * hidden + 4 * levels)
        self._buffers = (buffers, d_const)
        views = {name: strided(buf) for name, buf in buffers.items()}
        self._context = _GradContext(dirs=buffers["d_pre"].size(0), hidden=hidden, levels=levels,
                                     chunk=hidden // levels, symmetric=int(symmetric),
                                     scratch=self._scratch.data_ptr(),
                                     d_const=_Strided(None, 0, 0, 0) if d_const is None else strided(d_const), **views)
        self._ref = ctypes.byref(self._context)
        self._step = _LIB.onlstm_step_backward

    def __call__(self, t: int, rows: int, carry_rows: int) -> None:
        self._step(self._ref, t, rows, carry_rows)
