"""Host time of one ON-LSTM layer call: the registered operator ``torch.ops.onlstm_tasks.onlstm_layer`` (what
``torch.compile`` takes) against the eager path that :func:`onlstm_tasks.encoders.onlstm.layer_op.run_layer` takes
outside the compiler (a plain ``autograd.Function`` around the same forward and backward).

    python scripts/benchmark_layer_call.py [--repeats 300] [--threads 1] [--backend auto] [--device cpu]

Forward + backward of one bidirectional layer, two sizes: a tiny one (2 rows, 3 steps, hidden 16), where the back
end's own work is small and the figure is mostly the call's dispatch (what a GPU step pays on the host for each
layer), and the shipped NER layer (32 rows, 40 steps, hidden 256, chunk 8). The two paths alternate call by call,
after a warm-up, and are timed in process CPU time and in wall-clock time (on a GPU with a synchronisation inside
each timing). Prints, per size and clock, the median per call of each path, their difference and the ratio
operator / eager. Numbers belong here, never in timed tests.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import torch

from onlstm_tasks.encoders.onlstm.layer_op import run_layer

SIZES = {"tiny": (2, 3, 8, 16, 2), "shipped": (32, 40, 128, 256, 8)}  # rows, steps, features, hidden, chunk


def layer_args(rows: int, steps: int, features: int, hidden: int, chunk: int, device: str):
    g = torch.Generator().manual_seed(0)
    gates = 4 * hidden + 2 * (hidden // chunk)
    shapes = ((rows, steps, features), (2, gates, features), (2, gates), (2, gates, hidden))
    leaves = [(torch.randn(*shape, generator=g) * 0.1).to(device).requires_grad_() for shape in shapes]
    lengths = torch.full((rows,), steps, device=device)
    lengths[-1] = max(1, steps - 1)  # ragged: the general path
    return leaves, lengths


def calls(leaves, lengths, backend: str):
    """The two paths, each a forward + backward of the same layer."""
    x, weight_ih, bias, weight_hh = leaves

    def operator():
        h = torch.ops.onlstm_tasks.onlstm_layer(x, lengths, weight_ih, bias, weight_hh, None, None, False, backend,
                                                True)[0]
        h.sum().backward()

    def eager():
        run_layer(x, lengths, weight_ih, bias, weight_hh, False, backend)[0].sum().backward()

    return {"operator": operator, "eager": eager}


def timings(fns: dict, repeats: int, sync) -> dict[str, dict[str, list[float]]]:
    for _ in range(10):
        for fn in fns.values():
            fn()
    sync()
    out = {name: {"cpu": [], "wall": []} for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            sync()
            out[name]["cpu"].append(time.process_time() - cpu)
            out[name]["wall"].append(time.perf_counter() - wall)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    print(f"# {platform.processor() or platform.machine()}, {args.threads} thread(s), torch {torch.__version__}, "
          f"device {args.device}, backend {args.backend}")
    for size, dims in SIZES.items():
        leaves, lengths = layer_args(*dims, args.device)
        repeats = args.repeats if size == "tiny" else max(5, args.repeats // 30)
        result = timings(calls(leaves, lengths, args.backend), repeats, sync)
        for clock in ("cpu", "wall"):
            op, eager = (statistics.median(result[name][clock]) * 1e6 for name in ("operator", "eager"))
            print(f"{size:8s} {clock:4s} operator {op:9.0f} us  eager {eager:9.0f} us  "
                  f"difference {op - eager:6.0f} us  operator / eager {op / eager:.2f}x")


if __name__ == "__main__":
    main()
