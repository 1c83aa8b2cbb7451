"""The recurrent matrix product of one ON-LSTM step, ``act[B, G] += h[B, H] W`` with ``G = 4 H + 2 H / chunk``,
through the compiled step's own product and through the BLAS inside PyTorch, in CPU time: why the compiled whole
loop (``onlstm_tasks/encoders/onlstm/_onlstm_step.c``) has a matrix product of its own.

For these shapes (few rows, a weight larger than the L2 cache) a BLAS call copies operand panels every time
(``mkl_blas_*_sgemm_scopy_*`` in a ``perf`` profile), which ``nn.LSTM``'s oneDNN kernels avoid by packing the weights
once per sequence, as the compiled loop does (``onlstm_pack`` once per layer call, ``onlstm_product`` every step).
This script times, per call and interleaved in rounds:

* ``compiled``: the compiled step's product on the weight packed once (what the whole loop runs);
* ``sgemm [H, G]``: the Fortran ``sgemm_`` of PyTorch's BLAS (MKL in the x86-64 wheels) with W row-major ``[H, G]``
  (what the whole loop called before it had its own product);
* ``sgemm [G, H]``: the weight as PyTorch stores it, transposed in the call;
* ``MKL packed``: MKL's packed API, the weight packed once (``sgemm_pack``) and each step ``sgemm_compute``;

and prints the median CPU time of each and its ratio to ``compiled``, the MKL packed buffer's size, and a check that
all compute the same product. CPU time (``time.process_time``), so that other processes on the machine distort it
less than wall clock; one thread (``--threads``). ``--batch 16`` is the half of the rows one of two threads runs.

With ``--projection D`` it times instead a layer's input projection for all its steps at once, ``act[T B, G] =
bias + x[T B, D] W_ih^T`` (the layers whose projection the loop does not do step by step, such as the language
model's): ``compiled`` packs the scaled weight and runs ``compiled.project`` (what the whole-loop path does), ``PyTorch
baddbmm`` scales the weight and calls ``torch.baddbmm`` (what it did before, and what the other paths do).

    python scripts/benchmark_blas_gemm.py                       # NER shapes: B 32, H 256, chunk 8
    python scripts/benchmark_blas_gemm.py --batch 20 --hidden 1150 --chunk 10   # language-model shapes
    python scripts/benchmark_blas_gemm.py --batch 20 --hidden 1150 --chunk 10 --projection 400 --calls 2 --rounds 7

With ``--gradients D`` it times the two kinds of large product of a layer's backward over all its steps, for D
inputs: the input gradient ``dL/dx[T B, D] = d[T B, G] W_ih`` and a weight gradient ``dL/dW_ih[G, D] = d^T x``, each
the way ``function.py`` takes for wide layers (``compiled``: the compiled product, the weight gradient on a transposed
copy of d; ``_input_grad`` / ``_weight_grads`` with ``COMPILED_GRAD_WIDTH`` forced to 0) and for narrow ones
(``bmm``: MKL's). The recurrent weight's gradient is the second kind with D = H.

    python scripts/benchmark_blas_gemm.py --gradients 128 --calls 5     # NER's first layer (B 32, T 70)
    python scripts/benchmark_blas_gemm.py --batch 20 --hidden 1150 --chunk 10 --gradients 1150 --calls 1 --rounds 5

Needs the compiled step (built by ``pip install``) and the MKL of the x86-64 CPU wheels (``sgemm_pack_``
exported); elsewhere it says so and stops.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from onlstm_tasks.encoders.onlstm import compiled, function


def median_times(ways: dict, rounds: int, calls: int) -> dict[str, float]:
    """The median CPU seconds per call of each way, timed in interleaved rounds of ``calls`` calls."""
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, call in ways.items():
            start = time.process_time()
            for _ in range(calls):
                call()
            times[name].append((time.process_time() - start) / calls)
    return {name: statistics.median(values) for name, values in times.items()}


def compiled_built() -> bool:
    """Whether the compiled step is built (if not, says so)."""
    if not compiled.built():
        print("the compiled ON-LSTM step is not built (pip install with a C compiler): nothing to compare here")
    return compiled.built()


def layer_gates(args) -> int:
    """G = 4 H + 2 H / chunk."""
    return 4 * args.hidden + 2 * (args.hidden // args.chunk)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=32, help="rows of h (sentences in the batch)")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--chunk", type=int, default=8, help="chunk size: G = 4 H + 2 H / chunk")
    p.add_argument("--calls", type=int, default=100, help="products per timing")
    p.add_argument("--rounds", type=int, default=15, help="interleaved timings per way (median reported)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--projection", type=int, metavar="D", help="time the input projection from D inputs instead")
    p.add_argument("--steps", type=int, default=70, help="steps of the layer (--projection: rows are batch x steps)")
    p.add_argument("--gradients", type=int, metavar="D", help="time the backward's input and weight gradients instead")
    args = p.parse_args(argv)
    if args.hidden % args.chunk:
        p.error(f"--hidden {args.hidden} is not a multiple of --chunk {args.chunk}")
    torch.set_num_threads(args.threads)
    if args.projection:
        return projection(args)
    if args.gradients:
        return gradients(args)
    blas = ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"))
    if not all(hasattr(blas, name) for name in ("sgemm_", "sgemm_pack_", "sgemm_compute_", "sgemm_pack_get_size_")):
        print("PyTorch's BLAS has no MKL packed GEMM (sgemm_pack_, sgemm_compute_): nothing to compare here")
        return 1
    if not compiled_built():
        return 1
    blas.sgemm_pack_get_size_.restype = ctypes.c_size_t

    rows, hidden, gates = args.batch, args.hidden, layer_gates(args)
    rng = np.random.default_rng(0)
    w_hg = rng.standard_normal((hidden, gates), dtype=np.float32)  # row-major [H, G]: column-major [G, H]
    w_gh = np.ascontiguousarray(w_hg.T)  # row-major [G, H], as PyTorch stores weight_hh
    h = rng.standard_normal((rows, hidden), dtype=np.float32)
    out = np.zeros((rows, gates), np.float32)

    def i64(value: int):
        return ctypes.byref(ctypes.c_int64(value))

    def ptr(a: np.ndarray):
        return a.ctypes.data_as(ctypes.c_void_p)

    one = ctypes.byref(ctypes.c_float(1.0))
    m, n, k = i64(gates), i64(rows), i64(hidden)  # column-major: out^T [G, B] += W^T [G, H] h^T [H, B]
    size = blas.sgemm_pack_get_size_(b"A", m, n, k)
    packed = np.zeros(size // 4 + 16, np.float32)
    blas.sgemm_pack_(b"A", b"N", m, n, k, one, ptr(w_hg), i64(gates), ptr(packed))

    h_t, out_t = torch.from_numpy(h), torch.from_numpy(out)  # views of the same memory
    own = compiled.packed(torch.from_numpy(w_hg)[None])[0]
    ways = {
        "compiled": lambda: compiled.product(out_t, h_t, own),
        "sgemm [H, G]": lambda: blas.sgemm_(b"N", b"N", m, n, k, one, ptr(w_hg), i64(gates), ptr(h), i64(hidden),
                                            one, ptr(out), i64(gates)),
        "sgemm [G, H]": lambda: blas.sgemm_(b"T", b"N", m, n, k, one, ptr(w_gh), i64(hidden), ptr(h), i64(hidden),
                                            one, ptr(out), i64(gates)),
        "MKL packed": lambda: blas.sgemm_compute_(b"P", b"N", m, n, k, ptr(packed), i64(gates), ptr(h), i64(hidden),
                                              one, ptr(out), i64(gates)),
    }
    expected = h @ w_hg
    for name, call in ways.items():
        out[:] = 0
        call()
        if not np.allclose(out, expected, rtol=1e-4, atol=1e-3):
            print(f"{name} does not compute h W: stopping")
            return 1
    times = median_times(ways, args.rounds, args.calls)
    print(f"torch {torch.__version__}, {args.threads} thread(s); act[{rows}, {gates}] += h[{rows}, {hidden}] W "
          f"({2 * rows * hidden * gates / 1e6:.1f} MFLOP); median CPU time of {args.rounds} rounds x {args.calls} "
          f"calls")
    print(f"weight {w_hg.nbytes / 1e6:.1f} MB; packed by the compiled step {own.numel() * 4 / 1e6:.1f} MB, "
          f"by MKL {size / 1e6:.1f} MB")
    base = times["compiled"]
    for name, median in times.items():
        print(f"{name:14s} {median * 1e6:9.1f} us  {median / base:5.2f}x  "
              f"{2 * rows * hidden * gates / median / 1e9:6.1f} GFLOP/s")
    return 0


def projection(args) -> int:
    """``--projection``: a layer's input projection through the compiled product and through ``torch.baddbmm``."""
    if not compiled_built():
        return 1
    rows, depth, gates = args.batch * args.steps, args.projection, layer_gates(args)
    g = torch.Generator().manual_seed(0)
    x, weight = torch.randn(1, rows, depth, generator=g), torch.randn(1, gates, depth, generator=g)
    bias, scale = torch.randn(1, gates, generator=g), torch.rand(gates, generator=g) + 0.5
    out = torch.empty(1, rows, gates)
    ways = {
        "compiled": lambda: compiled.project(out, x, compiled.packed(weight.transpose(1, 2), scale), bias),
        "PyTorch baddbmm": lambda: torch.baddbmm(bias.unsqueeze(1), x, (weight * scale[:, None]).transpose(1, 2),
                                                 out=out),
    }
    expected = bias.double().unsqueeze(1) + x.double() @ (weight.double() * scale.double()[:, None]).transpose(1, 2)
    for name, call in ways.items():
        out.zero_()
        call()
        if not torch.allclose(out.double(), expected, rtol=1e-4, atol=1e-3):
            print(f"{name} does not compute bias + x W_ih^T: stopping")
            return 1
    times = median_times(ways, args.rounds, args.calls)
    flop = 2 * rows * depth * gates
    print(f"torch {torch.__version__}, {args.threads} thread(s); act[{rows}, {gates}] = bias + x[{rows}, {depth}] "
          f"W_ih^T ({flop / 1e9:.2f} GFLOP), weights packed or scaled in every call; median CPU time of "
          f"{args.rounds} rounds x {args.calls} calls")
    base = times["compiled"]
    for name, median in times.items():
        print(f"{name:16s} {median * 1e3:9.2f} ms  {median / base:5.2f}x  {flop / median / 1e9:6.1f} GFLOP/s")
    return 0


def gradients(args) -> int:
    """``--gradients``: a layer's input gradient and weight gradient through the compiled product and MKL's bmm."""
    if not compiled_built():
        return 1
    rows, width, gates = args.batch * args.steps, args.gradients, layer_gates(args)
    g = torch.Generator().manual_seed(0)
    d, x = torch.randn(1, rows, gates, generator=g), torch.randn(1, rows, width, generator=g)
    weight = torch.randn(1, gates, width, generator=g)

    def forced(fn, compiled_width: int):
        def call():
            before, function.COMPILED_GRAD_WIDTH = function.COMPILED_GRAD_WIDTH, compiled_width
            try:
                return fn()
            finally:
                function.COMPILED_GRAD_WIDTH = before
        return call

    kinds = {
        f"dL/dx[{rows}, {width}] = d W_ih": (lambda: function._input_grad(d, weight), d.double() @ weight.double()),
        f"dL/dW[{gates}, {width}] = d^T x": (lambda: function._weight_grads(d)(x),
                                             d.double().transpose(1, 2) @ x.double()),
    }
    flop = 2 * rows * width * gates
    print(f"torch {torch.__version__}, {args.threads} thread(s); d[{rows}, {gates}] (G = 4 H + 2 H / chunk, H "
          f"{args.hidden}), {flop / 1e9:.2f} GFLOP a product; median CPU time of {args.rounds} rounds x {args.calls} "
          "calls")
    for kind, (fn, expected) in kinds.items():
        ways = {"compiled": forced(fn, 0), "bmm": forced(fn, sys.maxsize)}
        for name, call in ways.items():
            if not torch.allclose(call().double(), expected, rtol=1e-4, atol=1e-2):
                print(f"{name} does not compute {kind}: stopping")
                return 1
        times = median_times(ways, args.rounds, args.calls)
        base = times["bmm"]
        for name, median in times.items():
            print(f"{kind:28s} {name:9s} {median * 1e3:9.2f} ms  {median / base:5.2f}x of bmm  "
                  f"{flop / median / 1e9:6.1f} GFLOP/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
