"""The compiled ON-LSTM step (``_onlstm_step.c``), when it was built: loading, the switches, one layer's binding, the
whole-loop runner, and the compiled DropConnect helpers (:func:`random_words`, :func:`masked`; used by
:mod:`.dropconnect`).

``pip install`` compiles the C file when a compiler is present (setup.py; optional, so an install never fails for
want of one). Three back ends run a layer pass (:class:`~onlstm_tasks.encoders.onlstm.layer_pass.LayerPass`), fastest
first:

- the whole loop (:func:`loop_usable`): one compiled call runs every time step of a layer, recurrent matrix products
  included, forward (:meth:`FusedSteps.run_all`) and backward (:meth:`FusedBackwardSteps.run_all`). The products go
  through the ``sgemm_`` of the BLAS linked into PyTorch (MKL in the x86-64 wheels), found at run time with ctypes
  and checked on a small product (``onlstm_gemm_check``), so that building still needs no PyTorch or BLAS headers.
  With two or more threads the two directions of a bidirectional layer run at the same time on two threads
  (:func:`loop_pieces`; they never synchronise; ctypes releases the GIL), each product on one BLAS thread (MKL's
  ``MKL_Set_Num_Threads_Local``); a unidirectional layer runs as one piece whose products use every thread (cutting
  its rows into two pieces measured 20-30% slower at NER shapes on 2 cores). ``ONLSTM_WHOLE_LOOP=0`` turns this
  path off;
- the per-step path (:func:`usable`, when the whole loop is not): each step's recurrent product is a PyTorch
  ``baddbmm`` and the dozen element-wise operations after it (the twenty before the next product, in the backward)
  one compiled call; used where PyTorch's BLAS exports no usable ``sgemm_``;
- the PyTorch loop (:mod:`.steps_torch`): CUDA, float64, no compiler, or ``ONLSTM_FUSED_STEP=0`` (which turns every
  compiled path off).

All three follow the same conventions and are tested against each other and against the reference cell. The calls
go through ctypes with prepared argument blocks, so nothing compiles at import. A library whose
``onlstm_step_abi()`` differs from :data:`ABI` (a build older than its source: rerun ``pip install``) is not used.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import logging
import os
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import torch

log = logging.getLogger(__name__)

ENV = "ONLSTM_FUSED_STEP"
ABI = 6  # ONLSTM_STEP_ABI in _onlstm_step.c: bumped whenever a struct or signature changes


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
    lib.onlstm_forward_loop.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    lib.onlstm_forward_loop.restype = ctypes.c_int
    lib.onlstm_backward_loop.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    lib.onlstm_backward_loop.restype = ctypes.c_int
    lib.onlstm_gemm_check.argtypes = [ctypes.c_void_p]
    lib.onlstm_gemm_check.restype = ctypes.c_int
    return lib


def _torch_blas() -> tuple[int, int] | None:
    """Addresses of ``sgemm_`` and of MKL's ``MKL_Set_Num_Threads_Local`` (0 when absent) in the BLAS linked into
    PyTorch (MKL in the x86-64 CPU wheels), or None when there is no usable ``sgemm_`` (other builds: the whole-loop
    path then stays off and the per-step path runs). Checked on a small product by ``onlstm_gemm_check``."""
    if _LIB is None or sys.byteorder != "little":  # integers are passed as int64 read by an LP64 or ILP64 BLAS
        return None
    lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
    for path in sorted(glob.glob(os.path.join(lib_dir, "*torch_cpu*"))):
        try:
            blas = ctypes.CDLL(path)  # already loaded by torch: this only opens a handle
            gemm = ctypes.cast(blas.sgemm_, ctypes.c_void_p).value
        except (OSError, AttributeError):
            continue
        # MKL's C function (mkl_service.h #defines mkl_set_num_threads_local to it; the lower-case symbol is the
        # Fortran interface, which takes a pointer)
        threads = getattr(blas, "MKL_Set_Num_Threads_Local", None)
        threads = ctypes.cast(threads, ctypes.c_void_p).value if threads is not None else 0
        if _LIB.onlstm_gemm_check(gemm) != 0:
            log.warning("sgemm_ in %s does not compute what it should; the ON-LSTM runs its per-step loop", path)
            return None
        return gemm, threads or 0
    log.debug("no sgemm_ in PyTorch's libraries; the ON-LSTM runs its per-step loop")
    return None


_LIB = _load()
_BLAS = _torch_blas()
_enabled = os.environ.get(ENV, "1") != "0"
LOOP_ENV = "ONLSTM_WHOLE_LOOP"
_loop_enabled = os.environ.get(LOOP_ENV, "1") != "0"


def built() -> bool:
    """Whether the compiled step was built and loads on this machine."""
    return _LIB is not None


def usable(x: torch.Tensor) -> bool:
    """Whether a layer over ``x`` (and weights of its dtype and device) may use the compiled step."""
    return on_cpu(x.device) and x.dtype == torch.float32


def on_cpu(device: torch.device) -> bool:
    """Whether the compiled library is in use (built, loaded, not switched off) and ``device`` is the CPU."""
    return _enabled and _LIB is not None and device.type == "cpu"


def loop_usable(x: torch.Tensor) -> bool:
    """Whether a layer over ``x`` may run its whole time loop in one compiled call (:class:`LayerLoop`): the
    compiled step is usable, PyTorch's BLAS exports a working ``sgemm_``, and ``ONLSTM_WHOLE_LOOP`` is not ``0``
    (otherwise the per-step compiled path runs)."""
    return _loop_enabled and _BLAS is not None and usable(x)


@contextmanager
def switched(on: bool, loop: bool | None = None) -> Iterator[None]:
    """Turns the compiled step on or off within the block (tests and benchmarks compare the paths); ``loop``
    turns the whole-loop path on or off too (None: leave it as it is)."""
    global _enabled, _loop_enabled
    before = _enabled, _loop_enabled
    _enabled = on
    if loop is not None:
        _loop_enabled = loop
    try:
        yield
    finally:
        _enabled, _loop_enabled = before


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

    def run_all(self, weight: torch.Tensor, rows_at: list[int], stop: int) -> None:
        """Every step in compiled calls (:func:`loop_pieces`; needs :func:`loop_usable`): for t > 0 the recurrent
        product with ``weight`` [K, H, G] (the scaled recurrent weights transposed, contiguous) added into step t's
        pre-activations, then its element-wise work. Step 0's product from a given initial state is the caller's."""
        even, odd = self._refs[0], self._refs[-1]
        loops = _loops(weight, rows_at, stop, self._contexts[0].dirs, 2 * self._contexts[0].hidden
                       + 2 * self._contexts[0].levels)
        _run_pieces(_LIB.onlstm_forward_loop, [(even, odd, ctypes.byref(lp)) for lp in loops])


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

    def run_all(self, weight: torch.Tensor, rows_at: list[int], stop: int, last_carry: int) -> None:
        """Every step's backward, last first, in compiled calls (see :meth:`FusedSteps.run_all`): for t + 1 < stop
        dL/dh_t gets the recurrent part (step t + 1's dL/d(pre-activations) times ``weight`` [K, G, H], the
        unscaled recurrent weights, contiguous), then step t's element-wise backward; after the last step the first
        ``last_carry`` rows read dL/dc from ``carry``."""
        ctx = self._context
        loops = _loops(weight, rows_at, stop, ctx.dirs, 4 * ctx.hidden + 4 * ctx.levels)
        _run_pieces(_LIB.onlstm_backward_loop, [(self._ref, ctypes.byref(lp), last_carry) for lp in loops])


class _Loop(ctypes.Structure):
    """The C ``loop`` struct, field for field."""

    _fields_ = [
        ("gemm", ctypes.c_void_p), ("set_threads", ctypes.c_void_p), ("threads", ctypes.c_int64),
        ("weight", ctypes.c_void_p), ("weight_sk", ctypes.c_int64), ("rows_at", ctypes.c_void_p),
        ("stop", ctypes.c_int64), ("k_begin", ctypes.c_int64), ("k_end", ctypes.c_int64),
        ("r_begin", ctypes.c_int64), ("r_end", ctypes.c_int64), ("scratch", ctypes.c_void_p),
    ]


def loop_pieces(dirs: int, rows_at: list[int], threads: int | None = None) -> list[tuple[int, int, int, int]]:
    """How a layer's time loop is shared among threads: ``(k_begin, k_end, r_begin, r_end)`` per piece, each
    piece one compiled call. With two or more threads the two directions of a bidirectional layer are two pieces
    (they never synchronise); otherwise one piece. A unidirectional layer is not cut by rows: at NER shapes on 2
    cores (B 32, T 40, H 256) two row blocks on one BLAS thread each took 20-30% longer than one piece whose
    products use both threads (measured with ``scripts/benchmark_encoders.py --threads 2``)."""
    threads = torch.get_num_threads() if threads is None else threads
    batch = rows_at[0]
    if threads >= 2 and dirs == 2:
        return [(0, 1, 0, batch), (1, 2, 0, batch)]
    return [(0, dirs, 0, batch)]


def _loops(weight: torch.Tensor, rows_at: list[int], stop: int, dirs: int, scratch: int) -> list[_Loop]:
    """The C ``loop`` structs of a layer's pieces (see :func:`loop_pieces`), each with its own scratch; they and
    the tensors they point into are kept alive on the structs (``_keep``)."""
    if weight.dtype != torch.float32 or not weight.is_contiguous() or weight.dim() != 3:
        raise ValueError("the compiled loop reads contiguous float32 [K, n, m] weights")
    gemm, set_threads = _BLAS
    rows = torch.tensor(rows_at[:stop], dtype=torch.int64)
    pieces = loop_pieces(dirs, rows_at)
    threads = max(1, torch.get_num_threads() // len(pieces))
    loops = []
    for k_begin, k_end, r_begin, r_end in pieces:
        buf = torch.empty(scratch, dtype=torch.float32)
        lp = _Loop(gemm=gemm, set_threads=set_threads or None, threads=threads, weight=weight.data_ptr(),
                   weight_sk=weight.stride(0), rows_at=rows.data_ptr(), stop=stop, k_begin=k_begin, k_end=k_end,
                   r_begin=r_begin, r_end=r_end, scratch=buf.data_ptr())
        lp._keep = (weight, rows, buf)
        loops.append(lp)
    return loops


_POOL: tuple[int, ThreadPoolExecutor] | None = None


def _run_pieces(fn, calls: list[tuple]) -> None:
    """``fn(*args)`` for every ``args`` of ``calls``: the first on this thread, the others on a small thread pool
    at the same time (ctypes releases the GIL during each call). The pool is made again after a fork."""
    global _POOL
    if len(calls) == 1:
        fn(*calls[0])
        return
    if _POOL is None or _POOL[0] != os.getpid() or _POOL[1]._max_workers < len(calls) - 1:
        _POOL = (os.getpid(), ThreadPoolExecutor(max_workers=len(calls) - 1, thread_name_prefix="onlstm-loop"))
    futures = [_POOL[1].submit(fn, *args) for args in calls[1:]]
    try:
        fn(*calls[0])
    finally:
        for future in futures:
            future.result()
