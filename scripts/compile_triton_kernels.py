"""Compiles the ON-LSTM's Triton kernels (:mod:`onlstm_tasks.encoders.onlstm.backends.triton.kernels`) and the CRF's
(:mod:`onlstm_tasks.modules.crf.triton_kernels`) for NVIDIA GPUs, on any machine, and reads their machine code: no
GPU is needed, since Triton's front end, its NVIDIA passes, the ``ptxas`` it bundles and its ``cuobjdump`` /
``nvdisasm`` all run on the CPU. Catches what the interpreter (``TRITON_INTERPRET=1``) lets through, such as a
loop-carried variable whose shape changes, before a GPU does. The sizes are those of the shipped configs (hidden 256,
400, 1150 and the others) and of the tests; the constants are the ones a launch at batch 32 on a 132-multiprocessor
GPU passes (``backend_triton.gpu_plan``), in TF32 (the default of PyTorch's switch for recurrent layers) unless
``--ieee``.

    python scripts/compile_triton_kernels.py            # one line per kernel, size and architecture; exit 1 if any
                                                        # build spills or (TF32) has no tensor-core instruction

Each line reads ``onlstm_forward_kernel H=256 sm_90: registers 168, spills 0 bytes, tensor cores yes (96 MMA)``;
the CRF's, ``crf_backward_kernel tags=37 sm_90: registers 187, spills 0 bytes, tile 64, 8 warps`` (a log-sum-exp
needs no tensor cores; a spill fails).
Run without ``TRITON_INTERPRET`` (the interpreter's kernels cannot be compiled)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

# (hidden, levels, directions, batch): the shipped configs' sizes first (NER/ABSA: 256, bidirectional, batch 32; the
# language model's 400 and 1150, one direction a layer, batch 20), then the others and the tests' sizes
SIZES = [(256, 32, 2, 32), (400, 40, 1, 20), (1150, 115, 1, 20), (64, 8, 2, 32), (300, 30, 2, 32), (128, 16, 2, 32),
         (100, 25, 2, 32), (256, 32, 2, 128), (32, 4, 2, 18), (12, 3, 2, 4)]
SHIPPED = SIZES[:3]
TARGETS = [("sm_90", 90), ("sm_80", 80)]


def compile_kernel(kernel, constants: dict, capability: int, options: dict):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = kernel.arg_names
    types = {name: "constexpr" if name in constants else "*i64" if name == "lengths_ptr"
             else "*i32" if name == "counter_ptr" else "*fp32" if name.endswith("_ptr") else "i32"
             for name in names}
    # pointers aligned to 16 bytes, as a launch with fresh tensors specializes them (vector loads and stores)
    aligned = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(names) if types[name].startswith("*")}
    source = ASTSource(fn=kernel, signature=types, attrs=aligned,
                       constexprs={(names.index(name),): value for name, value in constants.items()})
    return triton.compile(source, target=GPUTarget("cuda", capability, 32), options=options)


def _tool(name: str) -> str:
    import triton

    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name)


def machine_code_facts(cubin: bytes) -> tuple[int, int, int]:
    """``(registers, spill bytes, tensor-core instructions)`` of a compiled kernel, read with Triton's bundled
    ``cuobjdump`` (resource usage: REG, and STACK + LOCAL for spills) and ``nvdisasm`` (HMMA / HGMMA / wgmma)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.cubin"
        path.write_bytes(cubin)
        usage = subprocess.run([_tool("cuobjdump"), "-res-usage", str(path)], capture_output=True, text=True,
                               check=True).stdout
        sass = subprocess.run([_tool("nvdisasm"), str(path)], capture_output=True, text=True, check=True).stdout
    registers = int(re.search(r"REG:(\d+)", usage).group(1))
    spills = int(re.search(r"STACK:(\d+)", usage).group(1)) + int(re.search(r"LOCAL:(\d+)", usage).group(1))
    mma = len(re.findall(r"\b(?:HMMA|HGMMA|WGMMA)\b", sass, flags=re.IGNORECASE))
    return registers, spills, mma


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the shipped sizes, sm_90 only (for the tests)")
    parser.add_argument("--ieee", action="store_true", help="full float32 products (no tensor cores expected)")
    args = parser.parse_args()
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("unset TRITON_INTERPRET: the interpreter's kernels cannot be compiled", file=sys.stderr)
        return 2
    torch.backends.cudnn.rnn.fp32_precision = "ieee" if args.ieee else "tf32"
    from onlstm_tasks.encoders.onlstm.backends.triton.launcher import gpu_plan
    from onlstm_tasks.encoders.onlstm.backends.triton.kernels import onlstm_backward_kernel, onlstm_forward_kernel

    sizes, targets = (SHIPPED, TARGETS[:1]) if args.quick else (SIZES, TARGETS)
    failures = 0
    for target, capability in targets:
        for hidden, levels, dirs, batch in sizes:
            for kernel in (onlstm_forward_kernel, onlstm_backward_kernel):
                split = gpu_plan(hidden, levels, dirs, symmetric=False, batch=batch)
                constants = split.constants
                compiled = compile_kernel(kernel, constants, capability, split.options)
                registers, spills, mma = machine_code_facts(compiled.asm["cubin"])
                tensor_cores = mma > 0
                bad = spills > 0 or (not tensor_cores and not args.ieee)
                failures += bad
                print(f"{kernel.__name__} H={hidden} {target}: K={dirs} B={batch}, registers {registers}, spills {spills} bytes, "
                      f"tensor cores {'yes' if tensor_cores else 'no'} ({mma} MMA), {constants['PRECISION']}, "
                      f"{constants['BN']} neurons x {constants['BB']} rows per program, {split.options['num_warps']} warps"
                      f"{'  <- FAILS' if bad else ''}", flush=True)
    failures += compile_crf_kernels(targets)
    return 1 if failures else 0


CRF_TAGS = (37, 9)  # OntoNotes' IOB2 tags (tile 64) and a small scheme's (tile 16)


def compile_crf_kernels(targets) -> int:
    """The CRF's two kernels at each tile they launch with; returns how many builds spill (no tensor cores expected:
    they are log-sum-exps)."""
    from onlstm_tasks.modules.crf.triton_kernels import crf_backward_kernel, crf_forward_kernel
    from onlstm_tasks.modules.crf.triton_path import launch_constants

    failures = 0
    for target, capability in targets:
        for tags in CRF_TAGS:
            constants = launch_constants(tags)
            warps = constants.pop("num_warps")
            for kernel in (crf_forward_kernel, crf_backward_kernel):
                compiled = compile_kernel(kernel, constants, capability, {"num_warps": warps})
                registers, spills, _ = machine_code_facts(compiled.asm["cubin"])
                failures += spills > 0
                print(f"{kernel.__name__} tags={tags} {target}: registers {registers}, spills {spills} bytes, "
                      f"tile {constants['KP']}, {warps} warps{'  <- FAILS' if spills else ''}", flush=True)
    return failures


if __name__ == "__main__":
    sys.exit(main())
