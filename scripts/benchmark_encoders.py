"""Encoder speed at NER shapes: ON-LSTM vs nn.LSTM vs the plain reference cell, as ratios from one run.

    python scripts/benchmark_encoders.py [--batch 32 --length 40 --input 128 --hidden 256 --chunk 8]

Prints absolute median times (ms) and ratios to ``nn.LSTM`` for inference (no grad) and forward+backward,
plus the machine it ran on. Not a test: numbers go in issue notes.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import torch
from torch import nn

from onlstm_tasks.encoders import ONLSTM
from onlstm_tasks.encoders.reference import reference_encode


def median_ms(fn, repeats: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"{cpu}; {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads, "
            f"Python {platform.python_version()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--length", type=int, default=40)
    ap.add_argument("--input", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--chunk", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--reference-repeats", type=int, default=2)
    args = ap.parse_args()
    torch.manual_seed(0)
    x = torch.randn(args.batch, args.length, args.input)
    mask = torch.ones(args.batch, args.length, dtype=torch.bool)
    lstm = nn.LSTM(args.input, args.hidden, batch_first=True)
    onlstm = ONLSTM(args.input, args.hidden, args.chunk)

    def run(model, grad: bool):
        def step():
            with torch.set_grad_enabled(grad):
                inp = x.requires_grad_(grad)
                out = model(inp)[0] if isinstance(model, nn.LSTM) else model(inp, mask).hidden
                if grad:
                    out.sum().backward()
        return step

    def reference(grad: bool):
        def step():
            with torch.set_grad_enabled(grad):
                out = reference_encode(onlstm, x, mask)[0]
                if grad:
                    out.sum().backward()
        return step

    print(f"machine: {machine()}")
    print(f"shapes: batch {args.batch}, length {args.length}, input {args.input}, hidden {args.hidden}, "
          f"chunk {args.chunk} (unidirectional, 1 layer, full-length batch)")
    print(f"{'mode':<18}{'nn.LSTM ms':>12}{'ONLSTM ms':>12}{'reference ms':>14}{'ONLSTM/LSTM':>13}{'ref/LSTM':>10}")
    for label, grad in (("inference", False), ("forward+backward", True)):
        t_lstm = median_ms(run(lstm, grad), args.repeats)
        t_on = median_ms(run(onlstm, grad), args.repeats)
        t_ref = median_ms(reference(grad), args.reference_repeats, warmup=0)
        print(f"{label:<18}{t_lstm:>12.2f}{t_on:>12.2f}{t_ref:>14.1f}{t_on / t_lstm:>12.2f}x{t_ref / t_lstm:>9.1f}x")


if __name__ == "__main__":
    main()
