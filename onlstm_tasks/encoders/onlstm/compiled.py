"""The compiled ON-LSTM step (``_onlstm_step.c``), when it was built: loading, the switches, one layer's binding, the
whole-loop runner, and the compiled DropConnect helpers (:func:`random_words`, :func:`masked`; used by
:mod:`.dropconnect`).

``pip install`` compiles the C file when a compiler is present (setup.py; optional, so an install never fails for
want of one). Three back ends run a layer pass (:class:`~onlstm_tasks.encoders.onlstm.layer_pass.LayerPass`), fastest
first:

- the whole loop (:func:`loop_usable`): one compiled call runs every time step of a layer, recurrent matrix products
  (and, where :func:`.layer_pass.project_in_loop` says so, the input projection) included, forward
  (:meth:`FusedSteps.run_all`) and backward (:meth:`FusedBackwardSteps.run_all`). The products are the C file's own,
  on weights packed once per layer call (:func:`packed`; why not PyTorch's BLAS: ``scripts/benchmark_blas_gemm.py``).
  With two or more threads the work is cut into pieces that run at the same time and never synchronise
  (:func:`loop_pieces`: the directions of a bidirectional layer, then blocks of rows), on PyTorch's OpenMP worker
  threads (:func:`_openmp_parallel`) or else a thread pool (ctypes releases the GIL). ``ONLSTM_WHOLE_LOOP=0`` turns
  this path off;
- the per-step path (:func:`usable`, when the whole loop is switched off): each step's recurrent product is a
  PyTorch ``baddbmm`` and the dozen element-wise operations after it (the twenty before the next product, in the
  backward) one compiled call;
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
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import torch

log = logging.getLogger(__name__)

ENV = "ONLSTM_FUSED_STEP"
ABI = 10  # ONLSTM_STEP_ABI in _onlstm_step.c: bumped whenever a struct or signature changes


class _Strided(ctypes.Structure):
    """Per step t, direction k, row r the values at ``base + t * st + k * sk + r * sr`` (float32 elements)."""

    _fields_ = [("base", ctypes.c_void_p), ("st", ctypes.c_int64), ("sk", ctypes.c_int64), ("sr", ctypes.c_int64)]


class _Context(ctypes.Structure):
    """The C ``layer`` struct, field for field."""

    _fields_ = [
        ("dirs", ctypes.c_int64), ("hidden", ctypes.c_int64), ("levels", ctypes.c_int64),
        ("chunk", ctypes.c_int64), ("symmetric", ctypes.c_int64), ("scratch", ctypes.c_void_p),
        ("act", _Strided), ("h", _Strided), ("c_prev", _Strided), ("c_new", _Strided), ("master", _Strided),
        ("forget_distance", _Strided), ("input_distance", _Strided), ("save", ctypes.c_int64),
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
    lib.onlstm_pack.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                                ctypes.c_void_p, ctypes.c_void_p]
    lib.onlstm_pack.restype = None
    lib.onlstm_product.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                                   ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                                   ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                                   ctypes.c_void_p, ctypes.c_int64]
    lib.onlstm_product.restype = ctypes.c_int
    lib.onlstm_forward_team.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_int64]
    lib.onlstm_forward_team.restype = ctypes.c_int
    lib.onlstm_backward_team.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                         ctypes.c_int64]
    lib.onlstm_backward_team.restype = ctypes.c_int
    lib.onlstm_pack_team.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    lib.onlstm_pack_team.restype = ctypes.c_int
    lib.onlstm_project.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.onlstm_project.restype = ctypes.c_int
    lib.onlstm_project_team.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    lib.onlstm_project_team.restype = ctypes.c_int
    return lib


_LIB = _load()
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
    """Whether a layer over ``x`` may run its whole time loop in compiled calls (:meth:`FusedSteps.run_all`): the
    compiled step is usable and ``ONLSTM_WHOLE_LOOP`` is not ``0`` (otherwise the per-step compiled path runs)."""
    return _loop_enabled and usable(x)


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


PANEL = 16  # PANEL in _onlstm_step.c: columns per packed panel
FUSED_DEPTH = 512  # FUSED_DEPTH in _onlstm_step.c: a loop's products copy at most this many columns of each row


def packed(matrices: torch.Tensor, scale: torch.Tensor | None = None) -> torch.Tensor:
    """``matrices`` [K, depth, n] (float32 CPU, any strides: a transposed view packs without a copy first), each
    column j times ``scale[j]`` if given ([n], contiguous), packed for the compiled products (``onlstm_pack``):
    [K, ceil(n / PANEL) * PANEL * depth], one row per matrix."""
    if matrices.dtype != torch.float32 or matrices.device.type != "cpu" or matrices.dim() != 3:
        raise ValueError(f"the compiled products read float32 CPU [K, depth, n] weights, got {matrices.dtype} "
                         f"{tuple(matrices.shape)} on {matrices.device}")
    dirs, depth, n = matrices.shape
    if scale is not None and (scale.shape != (n,) or scale.dtype != torch.float32 or not scale.is_contiguous()):
        raise ValueError(f"expected a contiguous float32 scale of {n} values, got {scale.dtype} {tuple(scale.shape)}")
    out = torch.empty(dirs, -(-n // PANEL) * PANEL * depth, dtype=torch.float32)
    factors = None if scale is None else scale.data_ptr()
    jobs = [(matrices[k].data_ptr(), depth, n, matrices.stride(1), matrices.stride(2), factors, out[k].data_ptr())
            for k in range(dirs)]
    threads = torch.get_num_threads()
    if threads > 1 and _PARALLEL:  # each matrix in ranges of panels on PyTorch's OpenMP workers
        array = (_PackJob * dirs)(*(_PackJob(*job) for job in jobs))
        if _LIB.onlstm_pack_team(_PARALLEL, array, dirs, threads) == 0:
            return out
    for job in jobs:
        _LIB.onlstm_pack(*job)
    return out


class _PackJob(ctypes.Structure):
    """The C ``pack_job`` struct, field for field (the arguments of ``onlstm_pack``)."""

    _fields_ = [("w", ctypes.c_void_p), ("depth", ctypes.c_int64), ("n", ctypes.c_int64), ("sk", ctypes.c_int64),
                ("sn", ctypes.c_int64), ("scale", ctypes.c_void_p), ("out", ctypes.c_void_p)]


def product(c: torch.Tensor, a: torch.Tensor, packed_b: torch.Tensor, a2: torch.Tensor | None = None,
            packed_b2: torch.Tensor | None = None, init: torch.Tensor | None = None) -> None:
    """``c = start + a @ B (+ a2 @ B2)`` in place through the compiled product (``onlstm_product``), ``start`` the
    row vector ``init`` [n] in every row or, when None, ``c`` itself; each ``B`` given packed (one row of
    :func:`packed`). ``a`` [m, depth], ``a2`` [m, depth2], ``c`` [m, n]: float32 CPU with contiguous rows. For tests
    and ``scripts/benchmark_blas_gemm.py``."""
    m, n = c.shape
    terms = [(a, packed_b)] + ([] if a2 is None else [(a2, packed_b2)])
    for left, right in terms:
        if left.dim() != 2 or left.size(0) != m or left.stride(1) != 1 \
                or right.numel() != -(-n // PANEL) * PANEL * left.size(1):
            raise ValueError("expected a [m, depth] with contiguous rows and B packed for [depth, n]")
    if c.stride(1) != 1 or (init is not None and (init.shape != (n,) or not init.is_contiguous())):
        raise ValueError("expected c [m, n] with contiguous rows and a contiguous init [n]")
    args = [(left.data_ptr(), left.stride(0), left.size(1), right.data_ptr()) for left, right in terms]
    if a2 is None:
        args.append((None, 0, 0, None))  # no second term
    if _LIB.onlstm_product(m, n, None if init is None else init.data_ptr(), *args[0], *args[1], c.data_ptr(),
                           c.stride(0)):
        raise MemoryError("the compiled product could not allocate its buffer")


class _ProjectJob(ctypes.Structure):
    """The C ``project_job`` struct, field for field."""

    _fields_ = [("x", ctypes.c_void_p), ("ldx", ctypes.c_int64), ("depth", ctypes.c_int64),
                ("packed", ctypes.c_void_p), ("bias", ctypes.c_void_p), ("act", ctypes.c_void_p),
                ("ld_act", ctypes.c_int64), ("rows", ctypes.c_int64), ("n", ctypes.c_int64)]


def project(act: torch.Tensor, x: torch.Tensor, packed_w: torch.Tensor, bias: torch.Tensor) -> None:
    """``act[k] = bias[k] + x[k] @ W_k`` in place for each direction k, through the compiled product in chunks of
    rows (``onlstm_project``), the chunks shared by PyTorch's OpenMP workers with two or more threads: a layer's
    input projection for all its steps at once. ``act`` [K, M, G] and ``x`` [K, M, D]: float32 CPU with contiguous
    rows; ``packed_w``: :func:`packed` from the [K, D, G] weights; ``bias`` [K, G] contiguous."""
    dirs, rows, n = act.shape
    depth = x.size(-1)
    if x.shape[:2] != (dirs, rows) or act.stride(-1) != 1 or x.stride(-1) != 1 or x.dtype != torch.float32 \
            or act.dtype != torch.float32 or x.device.type != "cpu" or act.device.type != "cpu":
        raise ValueError(f"expected float32 CPU act [K, M, G] and x [K, M, D] with contiguous rows, got "
                         f"{tuple(act.shape)} and {tuple(x.shape)}")
    if bias.shape != (dirs, n) or not bias.is_contiguous() or bias.dtype != torch.float32 \
            or packed_w.shape != (dirs, -(-n // PANEL) * PANEL * depth) or not packed_w.is_contiguous():
        raise ValueError("expected a contiguous float32 bias [K, G] and the weights packed for [K, D, G]")
    if rows == 0:
        return
    jobs = (_ProjectJob * dirs)(*(
        _ProjectJob(x[k].data_ptr(), x.stride(1), depth, packed_w[k].data_ptr(), bias[k].data_ptr(),
                    act[k].data_ptr(), act.stride(1), rows, n) for k in range(dirs)))
    threads = torch.get_num_threads()
    failed = _LIB.onlstm_project_team(_PARALLEL, jobs, dirs, threads) if threads > 1 and _PARALLEL else 1
    if failed == 1:  # no team: on this thread
        failed = _LIB.onlstm_project(jobs, dirs)
    if failed:
        raise MemoryError("the compiled input projection could not allocate its buffer")


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
    buffers the backward reads, or None; ``distances`` the ``(forget, input)`` distance buffers [K, T, B] that each
    step writes (``1 - mean(f~)``, ``mean(i~)``), or None. This object holds on to every buffer, since the C code
    keeps only their addresses.
    """

    def __init__(self, *, hidden: int, levels: int, symmetric: bool, act: torch.Tensor, h: torch.Tensor,
                 master: torch.Tensor, c_slots: list[tuple[torch.Tensor, torch.Tensor]],
                 saved: dict[str, torch.Tensor] | None = None,
                 distances: tuple[torch.Tensor, torch.Tensor] | None = None):
        self._scratch = act.new_empty(2 * hidden + 2 * levels)
        self._buffers = (act, h, master, c_slots, saved, distances)
        views = {name: strided(buf) for name, buf in (saved or {}).items()}
        if distances is not None:
            views.update(forget_distance=strided(distances[0].unsqueeze(-1)),
                         input_distance=strided(distances[1].unsqueeze(-1)))
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

    def run_all(self, weight: torch.Tensor, rows_at: list[int], stop: int, *, x: torch.Tensor | None = None,
                weight_ih: torch.Tensor | None = None, bias: torch.Tensor | None = None,
                h0: torch.Tensor | None = None) -> None:
        """Every step in compiled calls (:func:`loop_pieces`; needs :func:`loop_usable`): step t's pre-activations
        ``bias + x_t W_ih + h_{t-1} W_hh`` into the ``act`` buffer, then its element-wise work. ``weight`` and
        ``weight_ih``: :func:`packed` from the scaled recurrent and input weights transposed ([K, H, G], [K, D, G]);
        ``bias`` [K, G] the scaled summed biases; ``x`` [K, T, B, D] the inputs, zero at padded steps; ``h0``
        [K, B, H] the state before step 0 (None: zeros)."""
        even, odd = self._refs[0], self._refs[-1]
        forward = dict(h0=_Strided(None, 0, 0, 0) if h0 is None else strided(h0))
        if x is not None:
            if bias.dtype != torch.float32 or not bias.is_contiguous() or weight_ih.stride(-1) != 1:
                raise ValueError("the compiled loop reads a contiguous float32 bias [K, G] and packed input weights")
            forward.update(x=strided(x), input_size=x.size(-1), weight_ih=weight_ih.data_ptr(),
                           weight_ih_sk=weight_ih.stride(0), bias=bias.data_ptr())
        loops = _loops(weight, rows_at, stop, self._contexts[0].dirs, 2 * self._contexts[0].hidden
                       + 2 * self._contexts[0].levels, forward, keep=(x, weight_ih, bias, h0))
        if not (len(loops) > 1 and _PARALLEL
                and _LIB.onlstm_forward_team(_PARALLEL, even, odd, loops, len(loops)) == 0):
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

    def run_all(self, weight: torch.Tensor, rows_at: list[int], stop: int, last_carry: int) -> torch.Tensor:
        """Every step's backward, last first, in compiled calls (see :meth:`FusedSteps.run_all`): for t + 1 < stop
        dL/dh_t gets the recurrent part (step t + 1's dL/d(pre-activations) times ``weight``, :func:`packed` from
        the unscaled recurrent weights [K, G, H]), then step t's element-wise backward; after the last step the first
        ``last_carry`` rows read dL/dc from ``carry``. Returns the bias gradient [K, G]: dL/d(pre-activations)
        summed over the (step, row) pairs the steps ran, added up as each step writes them."""
        ctx = self._context
        gates = 4 * ctx.hidden + 2 * ctx.levels
        loops = _loops(weight, rows_at, stop, ctx.dirs, 4 * ctx.hidden + 4 * ctx.levels, bias_gates=gates)
        if not (len(loops) > 1 and _PARALLEL
                and _LIB.onlstm_backward_team(_PARALLEL, self._ref, loops, len(loops), last_carry) == 0):
            _run_pieces(_LIB.onlstm_backward_loop, [(self._ref, ctypes.byref(lp), last_carry) for lp in loops])
        sums = loops.bias_sums  # [pieces, K, G]: each piece's rows
        return sums[0] if len(sums) == 1 else sums.sum(0)


class _Loop(ctypes.Structure):
    """The C ``loop`` struct, field for field."""

    _fields_ = [
        ("weight", ctypes.c_void_p), ("weight_sk", ctypes.c_int64),
        ("x", _Strided), ("input_size", ctypes.c_int64), ("weight_ih", ctypes.c_void_p),
        ("weight_ih_sk", ctypes.c_int64), ("bias", ctypes.c_void_p), ("h0", _Strided),
        ("rows_at", ctypes.c_void_p),
        ("stop", ctypes.c_int64), ("k_begin", ctypes.c_int64), ("k_end", ctypes.c_int64),
        ("r_begin", ctypes.c_int64), ("r_end", ctypes.c_int64), ("scratch", ctypes.c_void_p), ("copy", ctypes.c_void_p),
        ("d_bias", ctypes.c_void_p),
    ]


MIN_PIECE_ROWS = 4  # fewer rows than this per piece: not worth a thread


def loop_pieces(dirs: int, rows_at: list[int], threads: int | None = None) -> list[tuple[int, int, int, int]]:
    """How a layer's time loop is shared among threads: ``(k_begin, k_end, r_begin, r_end)`` per piece, each
    piece one compiled call, all running at the same time and never synchronising (rows of an RNN never interact).
    One thread: one piece. Otherwise each direction gets ``threads // dirs`` pieces (at least one), a bidirectional
    layer's directions first, then blocks of rows of about equal work (``rows_at``: rows running at each step,
    non-increasing), each of at least :data:`MIN_PIECE_ROWS` rows."""
    threads = torch.get_num_threads() if threads is None else threads
    batch = rows_at[0]
    if threads < 2:
        return [(0, dirs, 0, batch)]
    blocks = max(1, min(threads // dirs, batch // MIN_PIECE_ROWS))
    # steps each row runs (non-increasing in the row), and its cumulative sum: cut where it passes i / blocks
    ends = [0] * (batch + 1)
    for rows in rows_at:
        ends[rows] += 1
    runs, running = [], len(rows_at)
    for r in range(batch):
        running -= ends[r]
        runs.append(running)
    total, cuts, done = sum(runs), [0], 0
    for r, steps in enumerate(runs):
        done += steps
        if len(cuts) < blocks and done * blocks >= total * len(cuts) and batch - (r + 1) >= MIN_PIECE_ROWS \
                and r + 1 - cuts[-1] >= MIN_PIECE_ROWS:
            cuts.append(r + 1)
    cuts.append(batch)
    return [(k, k + 1, begin, end) for k in range(dirs) for begin, end in zip(cuts, cuts[1:])]


def _loops(weight: torch.Tensor, rows_at: list[int], stop: int, dirs: int, scratch: int, forward: dict | None = None,
           keep: tuple = (), bias_gates: int = 0) -> ctypes.Array:
    """The C ``loop`` structs of a layer's pieces (see :func:`loop_pieces`) in one array, each with its own scratch;
    the tensors they point into (with ``keep``) are kept alive on the array (``_keep``). ``weight``:
    :func:`packed`; ``forward``: the fields only the forward reads (its input projection); ``bias_gates``: G for
    a backward that sums the bias gradient, into zeros [pieces, K, G] (one [K, G] per piece: ``bias_sums``)."""
    if weight.dtype != torch.float32 or not weight.is_contiguous() or weight.dim() != 2 or weight.size(0) != dirs:
        raise ValueError("the compiled loop reads packed float32 weights, one row per direction")
    rows = torch.tensor(rows_at[:stop], dtype=torch.int64)
    pieces = loop_pieces(dirs, rows_at)
    bufs = torch.empty(len(pieces), scratch + rows_at[0] * FUSED_DEPTH, dtype=torch.float32)
    sums = torch.zeros(len(pieces), dirs, bias_gates) if bias_gates else None
    loops = (_Loop * len(pieces))(*(
        _Loop(weight=weight.data_ptr(), weight_sk=weight.stride(0), rows_at=rows.data_ptr(), stop=stop,
              k_begin=k_begin, k_end=k_end, r_begin=r_begin, r_end=r_end, scratch=buf.data_ptr(),
              copy=buf[scratch:].data_ptr(), d_bias=None if sums is None else sums[i].data_ptr(), **(forward or {}))
        for i, ((k_begin, k_end, r_begin, r_end), buf) in enumerate(zip(pieces, bufs))))
    loops._keep = (weight, rows, bufs, keep)
    loops.bias_sums = sums
    return loops


def _openmp_parallel() -> int | None:
    """The address of ``GOMP_parallel`` in the OpenMP runtime PyTorch's CPU library loaded (its intra-op worker
    threads: the team calls of ``_onlstm_step.c`` run a layer's pieces on them), or None (none found: the pieces run
    on a thread pool of our own, :func:`_run_pieces`). ``ONLSTM_OPENMP=0`` says None."""
    if _LIB is None or os.environ.get("ONLSTM_OPENMP", "1") == "0":
        return None
    lib_dir = os.path.join(os.path.dirname(torch.__file__), "lib")
    for path in sorted(glob.glob(os.path.join(lib_dir, "*torch_cpu*"))):
        try:  # already loaded by torch: this only opens a handle, whose lookups search its dependencies too
            return ctypes.cast(ctypes.CDLL(path).GOMP_parallel, ctypes.c_void_p).value
        except (OSError, AttributeError):
            continue
    log.debug("no OpenMP runtime found beside PyTorch; the ON-LSTM's loop pieces run on a thread pool")
    return None


_PARALLEL = _openmp_parallel()
_POOL: tuple[int, ThreadPoolExecutor] | None = None


def _run_pieces(fn, calls: list[tuple]) -> None:
    """``fn(*args)`` for every ``args`` of ``calls``: the first on this thread, the others on a small thread pool
    at the same time (ctypes releases the GIL during each call): the way pieces run where no OpenMP runtime was
    found (:func:`_openmp_parallel`). The pool is made again after a fork."""
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
