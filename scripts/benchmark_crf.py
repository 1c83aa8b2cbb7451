"""Times our batched Viterbi (CRF.decode) against pytorch-crf's decode on the same inputs.

    python scripts/benchmark_crf.py [--batch 32] [--length 40] [--min-length 40] [--tags 37] [--repeats 50]
                                    [--threads N]

Both decoders run unconstrained on identical emissions/masks (row lengths drawn from [--min-length, --length],
one row always full length; by default every row is full length); the paths are asserted identical before timing. The two are timed alternately (so load changes hit both alike); reports best and median wall time of ``--repeats`` runs after warm-up, the
ratio (pytorch-crf / ours) and the machine. Numbers belong here, never in timed tests.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import torch

from onlstm_tasks.modules import CRF


def interleaved_timings(fns, repeats: int, warmup: int = 5) -> list[list[float]]:
    """Wall times of each function, alternating between them so that load changes hit both alike."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    out = [[] for _ in fns]
    for _ in range(repeats):
        for fn, times in zip(fns, out):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=40)
    parser.add_argument("--min-length", type=int, default=None, help="shortest row (default: --length)")
    parser.add_argument("--tags", type=int, default=37)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    crf = CRF(args.tags)
    emissions = torch.randn(args.batch, args.length, args.tags)
    min_length = args.length if args.min_length is None else args.min_length
    lengths = torch.randint(min_length, args.length + 1, (args.batch,))
    lengths[0] = args.length
    mask = torch.arange(args.length)[None, :] < lengths[:, None]

    with torch.inference_mode():
        ours = crf.decode(emissions, mask)
        theirs = crf.crf.decode(emissions, mask)
        assert [row[:n].tolist() for row, n in zip(ours, lengths.tolist())] == theirs, "paths differ"
        t_ours, t_theirs = interleaved_timings(
            [lambda: crf.decode(emissions, mask), lambda: crf.crf.decode(emissions, mask)], args.repeats)

    print(f"machine: {platform.platform()} | {platform.processor() or platform.machine()} | "
          f"os.cpu_count={os.cpu_count()} | torch {torch.__version__} threads={torch.get_num_threads()}")
    print(f"shape: batch={args.batch} length={args.length} tags={args.tags} (lengths {int(lengths.min())}.."
          f"{int(lengths.max())}), repeats={args.repeats}; paths identical")
    for name, t in (("ours (CRF.decode)", t_ours), ("pytorch-crf decode", t_theirs)):
        print(f"{name:>20}: best {min(t) * 1e3:8.3f} ms   median {statistics.median(t) * 1e3:8.3f} ms")
    print(f"speed-up (pytorch-crf / ours): best {min(t_theirs) / min(t_ours):.1f}x   "
          f"median {statistics.median(t_theirs) / statistics.median(t_ours):.1f}x")


if __name__ == "__main__":
    main()
