"""Times our CRF against pytorch-crf's on the same inputs: the likelihood and its gradient (CRF.nll: the compiled
kernels on the CPU, the Triton kernels on a GPU; against pytorch-crf's per-step loop and the log-semiring scan of
onlstm_tasks/modules/crf/scan.py), then decoding (CRF.decode:
the per-step Viterbi on the CPU, the max-plus scan on a GPU; and the other of the two) against pytorch-crf's decode.

    python scripts/benchmark_crf.py [--batch 32] [--length 40] [--min-length 40] [--tags 37] [--repeats 50]
                                    [--threads N] [--device cuda]

Both decoders run unconstrained on identical emissions/masks (row lengths drawn from [--min-length, --length],
one row always full length; by default every row is full length); the paths are asserted identical before timing.
Each call is timed in wall-clock and in process CPU time (the latter is steadier on a shared machine; with
--threads 1 it is the honest figure), alternating the decoders so that load changes hit both alike, after warm-up.
The scan's likelihood is also timed reducing pairwise (what ``log_partition`` does) against taking every prefix
product (what Viterbi needs), the two ways of the one semiring scan. Two contexts: under ``torch.inference_mode()`` (how Lightning runs validation/test) and with autograd enabled
(decoding inside ``training_step``, where pytorch-crf also records autograd history). Prints best and median, the
ratios (pytorch-crf / ours) and the machine. Numbers belong here, never in timed tests.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import time

import torch

from onlstm_tasks.modules import CRF
from onlstm_tasks.modules.crf import paths
from onlstm_tasks.modules.crf import scan as crf_scan
from onlstm_tasks.modules.crf import viterbi_decode


def interleaved_timings(fns, repeats: int, warmup: int = 5, sync=lambda: None) -> list[dict[str, list[float]]]:
    """Wall and CPU seconds per call of each function, alternating between them; ``sync`` (a GPU's
    synchronisation) runs inside each timing."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    sync()
    out = [{"wall": [], "cpu": []} for _ in fns]
    for _ in range(repeats):
        for fn, times in zip(fns, out):
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            sync()
            times["cpu"].append(time.process_time() - cpu)
            times["wall"].append(time.perf_counter() - wall)
    return out


def cpu_name() -> str:
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=40)
    parser.add_argument("--min-length", type=int, default=None, help="shortest row (default: --length)")
    parser.add_argument("--tags", type=int, default=37)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                        help="where to run (default: the GPU when there is one; read the wall clock there)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    device = torch.device(args.device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    crf = CRF(args.tags).to(device)
    emissions = torch.randn(args.batch, args.length, args.tags, device=device)
    min_length = args.length if args.min_length is None else args.min_length
    lengths = torch.randint(min_length, args.length + 1, (args.batch,))
    lengths[0] = args.length
    mask = (torch.arange(args.length)[None, :] < lengths[:, None]).to(device)

    ours = crf.decode(emissions, mask)
    theirs = crf.crf.decode(emissions, mask)
    assert [row[:n].tolist() for row, n in zip(ours, lengths.tolist())] == theirs, "paths differ"

    gpu = f" | GPU {torch.cuda.get_device_name(device)}" if device.type == "cuda" else ""
    print(f"machine: {platform.platform()} | {cpu_name()}{gpu} | os.cpu_count={os.cpu_count()} | "
          f"torch {torch.__version__} threads={torch.get_num_threads()} | device {device}")
    print(f"shape: batch={args.batch} length={args.length} tags={args.tags} (lengths {int(lengths.min())}.."
          f"{int(lengths.max())}), repeats={args.repeats}; paths identical")
    tags = torch.randint(0, args.tags, (args.batch, args.length), device=device)
    leaf = emissions.clone().requires_grad_()

    def ours_loss() -> None:
        crf.nll(leaf, tags, mask).backward()

    def theirs_loss() -> None:
        (-crf.crf(leaf, tags, mask=mask, reduction="mean")).backward()

    def scan_loss() -> None:
        crf_scan.nll(leaf, tags, mask, crf.crf.start_transitions, crf.crf.transitions, crf.crf.end_transitions
                     ).backward()

    def prefix_scan_loss() -> None:  # the same likelihood from every prefix product (Viterbi's scan), for the choice
        start, transitions, end = (p.double() for p in (crf.crf.start_transitions, crf.crf.transitions,
                                                        crf.crf.end_transitions))
        e = leaf.double()
        prefixes = crf_scan.scan(crf_scan._transfer_matrices(e, mask, start, transitions, crf_scan.LOG.zero(e.dtype)),
                                 crf_scan.LOG, prefixes=True)
        log_z = torch.logsumexp(prefixes[:, -1, 0] + end, dim=-1)
        (log_z - crf_scan.path_score(e, tags, mask, start, transitions, end)).mean().backward()

    t_ours, t_theirs, t_scan = interleaved_timings([ours_loss, theirs_loss, scan_loss], args.repeats, sync=sync)
    t_reduce, t_prefix = interleaved_timings([scan_loss, prefix_scan_loss], args.repeats, sync=sync)
    report("likelihood + gradient, one semiring scan two ways: the pairwise reduction (the partition's) against "
           "every prefix (Viterbi's)", t_reduce, t_prefix, "reduce", "prefixes")
    chosen = paths.choose(leaf).name
    report(f"likelihood + gradient (training; CRF.nll, here its {chosen} path: the compiled kernels on the CPU, the "
           "Triton kernels on a GPU)", t_ours, t_theirs, "ours", "pytorch-crf")
    report(f"likelihood + gradient: CRF.nll's {chosen} path against the log-semiring scan (the GPU's path before the "
           "Triton kernels; under torch.compile still)", t_ours, t_scan, chosen, "scan")
    params = crf.constrained_parameters()
    other = viterbi_decode if device.type == "cuda" else crf_scan.viterbi
    with torch.inference_mode():
        t_ours, t_other = interleaved_timings([lambda: crf.decode(emissions, mask), lambda: other(emissions, mask,
                                                                                                  *params)],
                                              args.repeats, sync=sync)
    report("decode: the default against the other decoder", t_ours, t_other, "default",
           "per-step loop" if device.type == "cuda" else "max-plus scan")
    for context_name, context in (("inference_mode", torch.inference_mode), ("autograd on", contextlib.nullcontext)):
        with context():
            t_ours, t_theirs = interleaved_timings(
                [lambda: crf.decode(emissions, mask), lambda: crf.crf.decode(emissions, mask)], args.repeats, sync=sync)
        report(f"decode, {context_name}", t_ours, t_theirs, "ours", "pytorch-crf")


def report(title: str, ours: dict, theirs: dict, ours_name: str, theirs_name: str) -> None:
    print(f"[{title}]")
    for clock in ("wall", "cpu"):
        a, b = ours[clock], theirs[clock]
        print(f"  {clock:>4}: {ours_name} best {min(a) * 1e3:7.3f} ms median {statistics.median(a) * 1e3:7.3f} ms | "
              f"{theirs_name} best {min(b) * 1e3:7.3f} ms median {statistics.median(b) * 1e3:7.3f} ms | "
              f"speed-up best {min(b) / min(a):.2f}x median {statistics.median(b) / statistics.median(a):.2f}x")


if __name__ == "__main__":
    main()
