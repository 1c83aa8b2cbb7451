"""Compiles the ON-LSTM's Triton kernels (and the CRF's) on a GPU ahead of use, many variants at once, into Triton's
disk cache (``~/.triton/cache`` or ``TRITON_CACHE_DIR``), so that later processes (a training run's first steps, the
CUDA tests, the benchmarks) load them instead of compiling them one after another. Each variant is one forward and
backward pass of an :class:`~onlstm_tasks.encoders.ONLSTM` layer (or of the CRF's likelihood, for a number of tags)
in its own process (Triton compiles in the process that launches); ``--jobs`` run side by side.

    python scripts/warm_triton_kernels.py [--jobs 12] [--sets shipped,tests]

``shipped``: the shipped configs' layers (NER/ABSA hidden 256 chunk 8, bidirectional, at the batch-row tiles a
training run meets; the language models' 400 / 1150 chunk 10 and 256 / 128 chunk 8, one direction a layer), in TF32
(PyTorch's default for recurrent layers). ``tests``: the sizes and precisions of the CUDA tests and of
``benchmark_encoders.py``. Prints one line per variant with its seconds; exit 1 if any failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

# (hidden, chunk, directions, batch rows, symmetric, precision, persistent)
SHIPPED = [(256, 8, 2, rows, False, "tf32", True) for rows in (16, 32, 64)] + [
    (400, 10, 1, 20, False, "tf32", True), (1150, 10, 1, 20, False, "tf32", True),
    (256, 8, 1, 64, False, "tf32", True), (128, 8, 1, 64, False, "tf32", True),
    (64, 8, 2, 16, False, "tf32", True)]
TESTS = [(32, 8, dirs, 18, False, "ieee", True) for dirs in (1, 2)] + [
    (256, 8, 2, 32, False, "ieee", persistent) for persistent in (True, False)] + [
    (1150, 10, 1, 20, False, "ieee", persistent) for persistent in (True, False)] + [
    (32, 8, 2, 18, False, "tf32", True), (16, 4, 2, 16, False, "tf32", True),
    (256, 8, 1, 32, False, "tf32", True), (256, 8, 2, 32, False, "tf32", True),
    (256, 8, 1, 32, False, "ieee", True), (400, 10, 1, 20, False, "ieee", True)]
SETS = {"shipped": SHIPPED, "tests": TESTS}
CRF_TAGS = (37, 9, 64)  # the CRF's kernels: OntoNotes' IOB2 tags (tile 64), the tests' (tiles 16 and 64)

ONE = """
import sys, torch
from onlstm_tasks.encoders import ONLSTM
from onlstm_tasks.encoders.onlstm.backends.triton import launcher as backend_triton
hidden, chunk, dirs, rows, symmetric, precision, persistent = {args!r}
torch.backends.cudnn.rnn.fp32_precision = precision
if not persistent:
    backend_triton.resident_programs = lambda device: 0
enc = ONLSTM(16, hidden, chunk, bidirectional=dirs == 2, master_input="symmetric" if symmetric else "paper",
             backend="triton").cuda()
x = torch.randn(rows, 6, 16, device="cuda", requires_grad=True)
out = enc(x, torch.ones(rows, 6, dtype=torch.bool, device="cuda"))
(out.hidden.sum() + out.distances.sum()).backward()
torch.cuda.synchronize()
"""


ONE_CRF = """
import torch
from onlstm_tasks.modules.crf import triton_path
tags = {args!r}
emissions = torch.randn(4, 6, tags, device="cuda", requires_grad=True)
mask = torch.ones(4, 6, dtype=torch.bool, device="cuda")
triton_path.log_partition(emissions, mask, *(torch.zeros(*s, device="cuda") for s in ((tags,), (tags, tags), (tags,)))
                          ).sum().backward()
torch.cuda.synchronize()
"""


def warm(variant) -> tuple[object, float, str]:
    """An ON-LSTM variant (a tuple) or the CRF's kernels for a number of tags (an int), in a process of its own."""
    start = time.perf_counter()
    code = ONE_CRF.format(args=variant) if isinstance(variant, int) else ONE.format(args=variant)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return variant, time.perf_counter() - start, "" if done.returncode == 0 else done.stderr[-1500:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=12)
    parser.add_argument("--sets", default="shipped,tests")
    args = parser.parse_args()
    variants = list(dict.fromkeys(v for name in args.sets.split(",") for v in SETS[name])) + list(CRF_TAGS)
    start = time.perf_counter()
    failed = 0
    with ThreadPoolExecutor(args.jobs) as pool:
        for variant, seconds, error in pool.map(warm, variants):
            failed += bool(error)
            print(f"warm {variant}: {seconds:.1f} s{'  FAILED: ' + error if error else ''}", flush=True)
    print(f"{len(variants)} variants in {time.perf_counter() - start:.1f} s, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
