"""The choices the ON-LSTM's compiled path makes at run time, timed both ways (wall clock).

* Input projection: in the loop, step by step with the recurrent product, or one large product first
  (``onlstm_tasks.encoders.onlstm.layer_pass.project_in_loop``, forced through ``PROJECT_IN_LOOP``). Printed for the
  NER shapes of scripts/benchmark_encoders.py and for the language model's stack, with what the rule picks.
* The backward's large products (input and weight gradients over all steps): the compiled product or MKL's bmm
  (``onlstm_tasks.encoders.onlstm.function.COMPILED_GRAD_WIDTH``: the compiled one for layers at least that wide);
  forward+backward of the language model's stack and of NER's shapes, with what the rule picks.
* Where a layer's pieces run with two or more threads: on PyTorch's OpenMP workers (``GOMP_parallel``) or on a thread
  pool of our own (``compiled._PARALLEL`` set to None, as ``ONLSTM_OPENMP=0`` does).

    python scripts/benchmark_loop_choices.py [--threads 1,2] [--repeats 7]

Medians of interleaved runs (A B A B ...). Needs the compiled step. Not a test: numbers go in issue notes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch

from onlstm_tasks.encoders import ONLSTM
from onlstm_tasks.encoders.onlstm import compiled, function, layer_pass

NER = dict(batch=32, steps=40, inputs=128, hidden=256, chunk=8)
LM = dict(batch=20, steps=70, inputs=400, hidden=[1150, 1150, 400], chunk=10)


def medians(fns: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    """Median milliseconds of each function, timed in turns after one warm-up call each."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for fn in fns.values():
        fn()
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1e3)
    return {name: statistics.median(values) for name, values in times.items()}


def with_projection(encoder: ONLSTM, x: torch.Tensor, mode: bool | None) -> Callable[[], None]:
    def run() -> None:
        before, layer_pass.PROJECT_IN_LOOP = layer_pass.PROJECT_IN_LOOP, mode
        try:
            encoder(x)
        finally:
            layer_pass.PROJECT_IN_LOOP = before
    return run


def with_grad_width(encoder: ONLSTM, x: torch.Tensor, width: int) -> Callable[[], None]:
    """A training step (forward+backward, the input's gradient included) with ``COMPILED_GRAD_WIDTH`` at ``width``."""
    def run() -> None:
        before, function.COMPILED_GRAD_WIDTH = function.COMPILED_GRAD_WIDTH, width
        try:
            with torch.enable_grad():
                encoder.zero_grad(set_to_none=True)
                out = encoder(x.detach().requires_grad_())
                (out.hidden.sum() + out.distances.sum() + out.input_distances.sum()).backward()
        finally:
            function.COMPILED_GRAD_WIDTH = before
    return run


def with_runner(encoder: ONLSTM, x: torch.Tensor, openmp: bool) -> Callable[[], None]:
    def run() -> None:
        before = compiled._PARALLEL
        compiled._PARALLEL = before if openmp else None
        try:
            encoder(x)
        finally:
            compiled._PARALLEL = before
    return run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args(argv)
    if not compiled.built():
        print("the compiled ON-LSTM step is not built (pip install with a C compiler): nothing to compare")
        return 1
    torch.manual_seed(0)
    shapes = [(f"NER {'bi' if bi else 'uni'} x {layers}", NER, bi, layers) for bi in (False, True) for layers in (1, 2)]
    shapes.append(("LM stack 400-1150-1150-400", LM, False, 3))
    with torch.no_grad():
        for threads in (int(t) for t in args.threads.split(",")):
            torch.set_num_threads(threads)
            print(f"\n{threads} thread(s): input projection in the loop vs one large product first (inference, ms)")
            for name, shape, bi, layers in shapes:
                encoder = ONLSTM(shape["inputs"], shape["hidden"], shape["chunk"], num_layers=layers,
                                 bidirectional=bi).eval()
                x = torch.randn(shape["batch"], shape["steps"], shape["inputs"])
                repeats = args.repeats if shape is NER else max(3, args.repeats // 2)
                got = medians({"in": with_projection(encoder, x, True), "first": with_projection(encoder, x, False),
                               "rule": with_projection(encoder, x, None)}, repeats)
                print(f"  {name:28s} in the loop {got['in']:8.2f}  first {got['first']:8.2f}  "
                      f"the rule's choice {got['rule']:8.2f}")
            print(f"{threads} thread(s): the backward's large products through the compiled product or MKL's bmm "
                  "(forward+backward, ms)")
            for name, shape, bi, layers in shapes:
                encoder = ONLSTM(shape["inputs"], shape["hidden"], shape["chunk"], num_layers=layers,
                                 bidirectional=bi).train()
                x = torch.randn(shape["batch"], shape["steps"], shape["inputs"])
                repeats = args.repeats if shape is NER else max(3, args.repeats // 2)
                got = medians({"compiled": with_grad_width(encoder, x, 0), "bmm": with_grad_width(encoder, x, 1 << 62),
                               "rule": with_grad_width(encoder, x, function.COMPILED_GRAD_WIDTH)}, repeats)
                print(f"  {name:28s} compiled {got['compiled']:8.2f}  bmm {got['bmm']:8.2f}  "
                      f"the rule's choice {got['rule']:8.2f}")
            if threads < 2:
                continue
            print(f"{threads} threads: the loop's pieces on PyTorch's OpenMP workers vs a thread pool (inference, ms)")
            if compiled._PARALLEL is None:
                print("  no OpenMP runtime found beside PyTorch: only the pool runs here")
                continue
            for name, shape, bi, layers in shapes[:4]:
                encoder = ONLSTM(shape["inputs"], shape["hidden"], shape["chunk"], num_layers=layers,
                                 bidirectional=bi).eval()
                x = torch.randn(shape["batch"], shape["steps"], shape["inputs"])
                got = medians({"openmp": with_runner(encoder, x, True), "pool": with_runner(encoder, x, False)},
                              args.repeats)
                print(f"  {name:28s} OpenMP workers {got['openmp']:8.2f}  thread pool {got['pool']:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
