"""Compiles the ON-LSTM's Triton kernels (:mod:`onlstm_tasks.encoders.onlstm.triton_kernels`) for NVIDIA GPUs, on
any machine: no GPU is needed, since Triton's front end, its NVIDIA passes and the ``ptxas`` it bundles all run on
the CPU. Catches what the interpreter (``TRITON_INTERPRET=1``) lets through, such as a loop-carried variable whose
shape changes, before a GPU does. The sizes are those of the shipped configs and of the tests; the constants are
the ones a launch passes (``backend_triton.kernel_constants``).

    python scripts/compile_triton_kernels.py            # one line per compiled kernel; exit 1 on the first failure

Run without ``TRITON_INTERPRET`` (the interpreter's kernels cannot be compiled)."""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

# (hidden, levels): the quickstart, the NER and ABSA configs, the language models' layers, and the tests' sizes
SIZES = [(64, 8), (256, 32), (300, 30), (128, 16), (100, 25), (1150, 115), (400, 40), (32, 4), (12, 3)]
TARGETS = [("sm_90", 90), ("sm_80", 80)]


def compile_kernel(kernel, constants: dict, capability: int):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = kernel.arg_names
    types = {name: "constexpr" if name in constants else "*i64" if name == "lengths_ptr"
             else "*fp32" if name.endswith("_ptr") else "i32" for name in names}
    source = ASTSource(fn=kernel, signature=types,
                       constexprs={(names.index(name),): value for name, value in constants.items()})
    return triton.compile(source, target=GPUTarget("cuda", capability, 32))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="two cases, sm_90 only (for the tests)")
    args = parser.parse_args()
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        print("unset TRITON_INTERPRET: the interpreter's kernels cannot be compiled", file=sys.stderr)
        return 2
    from onlstm_tasks.encoders.onlstm.backend_triton import kernel_constants
    from onlstm_tasks.encoders.onlstm.triton_kernels import onlstm_backward_kernel, onlstm_forward_kernel

    cases = [(hidden, levels, symmetric, tf32) for hidden, levels in SIZES for symmetric in (False, True)
             for tf32 in (True, False)]
    targets = TARGETS
    if args.quick:  # the quickstart's size in TF32 (the default on a GPU), and one odd size in full float32
        cases, targets = [(64, 8, False, True), (12, 3, True, False)], TARGETS[:1]
    for target, capability in targets:
        for hidden, levels, symmetric, tf32 in cases:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            for backward, kernel in ((False, onlstm_forward_kernel), (True, onlstm_backward_kernel)):
                constants = kernel_constants(hidden, levels, 2, symmetric, backward)
                start = time.perf_counter()
                compiled = compile_kernel(kernel, constants, capability)
                print(f"{target} {kernel.__name__:24s} hidden {hidden:4d} levels {levels:3d} "
                      f"{'symmetric' if symmetric else 'paper':9s} {constants['PRECISION']:4s}: "
                      f"{len(compiled.asm['cubin']):7d} bytes of cubin, {time.perf_counter() - start:.1f} s",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
