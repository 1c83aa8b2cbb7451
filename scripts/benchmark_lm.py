"""Language-model training speed: full vs adaptive softmax, at a config's sizes and its data's vocabulary.

    python scripts/benchmark_lm.py [--config benchmarks/configs/lm_unlabelled_en_adaptive_onlstm.yaml]
        [--batches 8] [--rounds 4] [--threads 1] [--clock cpu] [--max-vocab-size N] [--cutoffs 2000 10000] [--div-value 4]

Run it from the repository root (the configs' data paths are relative to the working folder). The config is built
by the CLI's own parser (``TasksCLI(run=False)``), so the model, the data module and its
vocabulary (``min_freq``, ``max_vocab_size``) are exactly what ``onlstm-tasks fit --config ...`` trains; the
script then copies the model and gives the copy a fresh decoder of the other softmax (untied from the word vectors;
the config's own softmax keeps its ``tie_weights``): the embedder and encoder are the same in both.

It takes the first ``--batches`` training batches (the data module's own loader: sentence buckets or BPTT
windows), and times training steps exactly as the trainer runs them (``training_step`` with its activation
penalties, backward, gradient clipping at the config's ``gradient_clip_val``, the config's optimizer), in turns:
one pass over the batches with the full softmax, one with the adaptive, ``--rounds`` times (A B A B ...), after one
untimed warm-up pass each. So a load that comes and goes on a busy machine affects both alike. It prints tokens
(predicted target positions) per second of each softmax per round, their medians, the ratio, and the median
seconds per training step (the figure to size ``max_time`` / ``val_check_interval`` with). ``--clock cpu``
(default) counts this process's CPU time, right on a machine whose cores other jobs share; ``wall`` counts
elapsed time. Not a test: numbers go in issue notes and config headers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from copy import deepcopy
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from benchmark_encoders import machine  # noqa: E402


def build(config: str, overrides: list[str]):
    """The configured model, data module and trainer settings, as ``onlstm-tasks fit`` builds them."""
    from onlstm_tasks.cli.package_logs import show_package_logs
    from onlstm_tasks.cli.lightning_cli import TasksCLI

    show_package_logs()  # the vocabulary counts
    sys.argv[1:] = []  # LightningCLI reads them too: the script's own options are not the CLI's
    cli = TasksCLI(model_class=None, datamodule_class=None, subclass_mode_model=True, subclass_mode_data=True,
                   args=["--config", config, "--trainer.logger", "false", "--trainer.callbacks", "null",
                         "--trainer.enable_checkpointing", "false", *overrides],
                   run=False, trainer_defaults={"use_distributed_sampler": False})
    return cli.model, cli.datamodule, cli.trainer


def other_softmax(model, softmax: str, cutoffs: list[int] | None, div_value: float):
    """A copy of ``model`` whose decoder is a fresh ``softmax`` one (untied from the word vectors); the embedder
    and encoder are the same weights."""
    from torch import nn

    from onlstm_tasks.modules.lm_softmax import adaptive_softmax

    copy = deepcopy(model)
    width, vocab = copy.net.encoder.output_size // copy.net.directions, len(model.hparams.word_vocab)
    torch.manual_seed(0)
    copy.net.decoder = (adaptive_softmax(width, vocab, cutoffs, div_value) if softmax == "adaptive"
                        else nn.Linear(width, vocab))
    return copy


def step_fn(model, clip: float | None):
    optimizer = model.configure_optimizers()
    optimizer = optimizer["optimizer"] if isinstance(optimizer, dict) else optimizer
    optimizer = optimizer[0] if isinstance(optimizer, (list, tuple)) else optimizer
    model.train()

    def step(batch, index: int) -> None:
        optimizer.zero_grad(set_to_none=True)
        loss = model.training_step(batch, index)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()

    return step


def targets(batch) -> int:
    count = int((batch.forward_targets >= 0).sum())
    if batch.backward_targets is not None:
        count += int((batch.backward_targets >= 0).sum())
    return count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=str(REPO / "benchmarks" / "configs" / "lm_unlabelled_en_adaptive_onlstm.yaml"))
    ap.add_argument("--batches", type=int, default=8, help="training batches per timed pass")
    ap.add_argument("--rounds", type=int, default=4, help="timed passes of each softmax, in turns")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--max-vocab-size", type=int, default=None, help="override the config's max_vocab_size")
    ap.add_argument("--cutoffs", type=int, nargs="+", default=None,
                    help="adaptive cutoffs (default: the config's, else the model's default)")
    ap.add_argument("--div-value", type=float, default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    overrides = [] if args.max_vocab_size is None else ["--data.init_args.max_vocab_size", str(args.max_vocab_size)]
    first, dm, trainer = build(args.config, overrides)
    dm.setup("fit")
    batches = []
    for batch in dm.train_dataloader():
        batches.append(batch)
        if len(batches) == args.batches:
            break
    softmax = first.hparams.get("softmax", "full")
    cutoffs = args.cutoffs or first.hparams.get("adaptive_cutoffs")
    div_value = args.div_value or first.hparams.get("div_value", 4.0)
    models = {"full": first if softmax == "full" else other_softmax(first, "full", cutoffs, div_value),
              "adaptive": first if softmax == "adaptive" else other_softmax(first, "adaptive", cutoffs, div_value)}
    steps = {name: step_fn(m, trainer.gradient_clip_val) for name, m in models.items()}
    tokens = sum(targets(b) for b in batches)
    print(f"machine: {machine()}")
    print(f"config: {args.config}; vocabulary {len(first.hparams.word_vocab)} words; {len(batches)} batches of "
          f"{tokens} target tokens per pass ({tokens / len(batches):.0f} per step); clock {args.clock}")
    for name, model in models.items():
        decoder = model.net.decoder
        params = sum(p.numel() for p in decoder.parameters())
        extra = f" cutoffs {decoder.cutoffs[:-1]} div_value {decoder.div_value}" if name == "adaptive" else ""
        print(f"  {name}: {type(decoder).__name__}{extra}, {params:,} softmax parameters, "
              f"{sum(p.numel() for p in model.parameters()):,} in all")
    speeds = {name: [] for name in models}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # training_step's self.log outside a Trainer
        for name in models:  # warm-up
            for i, b in enumerate(batches[:2]):
                steps[name](b, i)
        for round_ in range(args.rounds):
            for name in models:
                start = clock()
                for i, b in enumerate(batches):
                    steps[name](b, i)
                seconds = clock() - start
                speeds[name].append(tokens / seconds)
                print(f"round {round_ + 1} {name:<9} {seconds:7.2f} s  {tokens / seconds:8,.0f} tokens/s  "
                      f"{seconds / len(batches):6.3f} s/step", flush=True)
    median = {name: statistics.median(v) for name, v in speeds.items()}
    per_step = tokens / len(batches)
    for name, v in median.items():
        print(f"median {name:<9} {v:8,.0f} tokens/s  {per_step / v:6.3f} s/step")
    print(f"adaptive / full = {median['adaptive'] / median['full']:.2f}x training tokens/s")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
