"""What one training step of a config is made of, counted on the CPU: the figure that tracks GPU cost where no GPU
is at hand (on a GPU each operation is at least one kernel launch plus Python dispatch, and each host read waits
for every kernel before it).

    python scripts/ops_per_step.py [--config configs/ner/ontonotes_onlstm_crf.yaml] [--data PATH] [--steps 3]

Builds the config's model and data module through the CLI (``--data`` replaces the data path, as the CLI's
``--data.init_args.path`` does; default: the kit's copy for hub configs), takes the first training batch and runs
``training_step`` + ``backward`` (+ the optimizer's step, counted apart) on the training batch whose padded length
is nearest ``--length`` (default 40), then counts:

- the PyTorch profiler: *leaf ATen operations*, those with no ATen operation inside them, leaving out views and
  other metadata-only operations (:data:`METADATA_ONLY`); per phase. With ``--gpu-path`` each launch of a Triton
  kernel counts as one operation (a GPU runs it as one kernel) and the ATen operations inside it are left out:
  Triton's interpreter, which runs the kernels here, copies every tensor argument at each launch;
- :func:`helpers.host_reads.count_host_reads` (``tests/helpers``): reads of a tensor's values by the host (``.item()``,
  ``bool()``, ``.tolist()``, ...), the operations that make a GPU step wait.

The first step warms up (lazy initialisations); the figures are the last of ``--steps`` steps.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # helpers.host_reads: the host-read counter the tests use
KIT = REPO.parent / "shared" / "data" / "conll2012_ontonotesv5"

# operations that only make a new view of or metadata for existing memory (or allocate without writing)
METADATA_ONLY = frozenset(
    "aten::" + name for name in (
        "view", "_unsafe_view", "as_strided", "select", "slice", "narrow", "unsqueeze", "squeeze", "transpose", "t",
        "permute", "expand", "expand_as", "alias", "view_as", "unbind", "split", "split_with_sizes", "chunk",
        "reshape", "_reshape_alias", "flatten", "unflatten", "movedim", "detach", "detach_", "lift_fresh",
        "resolve_conj", "resolve_neg", "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
        "contiguous", "numpy_T", "diagonal", "unfold", "result_type", "is_nonzero", "_local_scalar_dense", "item",
        "to", "_to_copy_view", "set_", "resize_", "size", "stride", "dim", "is_same_size",
    )
)


TRITON_LAUNCH = "triton kernel launch"  # the profiler's label of a launch under --gpu-path (count_launches)


def leaf_operations(prof) -> collections.Counter:
    """Leaf ATen operations of a profile, metadata-only ones left out; a Triton launch counts as one."""
    counts: collections.Counter = collections.Counter()
    for event in prof.events():
        if event.name == TRITON_LAUNCH:
            counts[TRITON_LAUNCH] += 1
            continue
        if not event.name.startswith("aten::") or event.name in METADATA_ONLY or _inside_a_launch(event):
            continue
        if any(child.name.startswith("aten::") for child in event.cpu_children):
            continue
        counts[event.name] += 1
    return counts


def _inside_a_launch(event) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if parent.name == TRITON_LAUNCH:
            return True
        parent = parent.cpu_parent
    return False


def count_launches() -> None:
    """Labels each launch of a kernel in Triton's interpreter for the profiler (:data:`TRITON_LAUNCH`)."""
    from triton.runtime.interpreter import InterpretedFunction

    run = InterpretedFunction.run

    def labelled(self, *args, **kwargs):
        with torch.profiler.record_function(TRITON_LAUNCH):
            return run(self, *args, **kwargs)

    InterpretedFunction.run = labelled


def build(config: str, data: str | None, length: int = 40, extra: list[str] = ()):
    from onlstm_tasks.cli.lightning_cli import TasksCLI

    args = ["--config", config, "--trainer.logger", "false", "--trainer.enable_checkpointing", "false",
            "--trainer.callbacks", "[]", "--trainer.accelerator", "cpu", "--trainer.devices", "1"]
    if data:
        args += ["--data.init_args.path", data, "--data.init_args.revision", "null"]
    cli = TasksCLI(args=[*args, *extra], run=False)
    cli.datamodule.setup("fit")
    model = cli.model
    model.train()
    optimizer = model.configure_optimizers()  # the config's optimizer
    optimizer = optimizer["optimizer"] if isinstance(optimizer, dict) else optimizer
    batch = min(cli.datamodule.train_dataloader(), key=lambda b: (abs(b.tokens.mask.shape[1] - length),
                                                                   -b.tokens.mask.shape[0]))
    return model, optimizer, batch


def one_step(model, optimizer, batch, phase):
    with phase("training_step"):
        loss = model.training_step(batch, 0)
    with phase("backward"):
        loss.backward()
    with phase("optimizer"):
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def main() -> None:
    from helpers.host_reads import count_host_reads

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=str(REPO / "configs" / "ner" / "ontonotes_onlstm_crf.yaml"))
    ap.add_argument("--data", default=None, help="the data path (default: the kit's OntoNotes copy for hub configs)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--length", type=int, default=40, help="take the training batch whose padded length is nearest "
                    "(default 40, the NER shape of the encoder benchmarks)")
    ap.add_argument("--top", type=int, default=12, help="how many of the most frequent operations to list")
    ap.add_argument("--gpu-path", action="store_true", help="count what a GPU runs: the ON-LSTM's triton back end "
                    "and the CRF's Triton kernels (in Triton's interpreter: set TRITON_INTERPRET=1)")
    args = ap.parse_args()
    data = args.data
    if data is None and "ontonotes" in Path(args.config).name and KIT.is_dir():
        data = str(KIT)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    extra = []
    if args.gpu_path:
        from onlstm_tasks.modules.crf import paths

        gpu_crf = paths.named("triton")  # what a GPU takes (its kernels in the interpreter here)
        paths.choose = lambda emissions: gpu_crf
        count_launches()
        extra = ["--model.init_args.encoder.init_args.backend", "triton"]
    model, optimizer, batch = build(args.config, data, args.length, extra)
    for _ in range(args.steps - 1):  # warm-up
        one_step(model, optimizer, batch, lambda name: torch.profiler.record_function(name))

    phases: dict[str, collections.Counter] = {}

    class Phase:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            self.prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
            self.prof.__enter__()

        def __exit__(self, *exc):
            self.prof.__exit__(*exc)
            phases[self.name] = leaf_operations(self.prof)

    one_step(model, optimizer, batch, Phase)  # the profile (a dispatch mode would change what runs: apart)
    reads_in: dict[str, object] = {}

    @contextlib.contextmanager
    def reading(name):
        with count_host_reads() as reads:
            yield
        reads_in[name] = reads

    one_step(model, optimizer, batch, reading)
    tokens = int(batch.tokens.mask.sum())
    print(f"config: {os.path.relpath(args.config, REPO)}; batch: {tuple(batch.tokens.mask.shape)}, {tokens} tokens")
    total = collections.Counter()
    for name, counts in phases.items():
        launches = f", {counts[TRITON_LAUNCH]} of them Triton launches" if counts[TRITON_LAUNCH] else ""
        print(f"{name:<14} {sum(counts.values()):>6} leaf ATen operations (views and metadata-only left out{launches})")
        if name != "optimizer":
            total += counts
    print(f"{'step':<14} {sum(total.values()):>6} in training_step + backward (the optimizer's step apart)")
    for name, reads in reads_in.items():
        print(f"host reads in {name:<14} {reads.total:>3}" + (f": {dict(reads.where)}" if reads.total else "")
              + (f" (+{reads.inside_ops} inside this package's operators or the ON-LSTM's back ends)"
                 if reads.inside_ops else ""))
    print("most frequent (training_step + backward): "
          + ", ".join(f"{name.removeprefix('aten::')} {n}" for name, n in total.most_common(args.top)))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main())
