"""Encoder speed at NER shapes: ON-LSTM vs nn.LSTM (and the plain reference cell), as ratios from one run.

    python scripts/benchmark_encoders.py [--quick] [--threads 1,2] [--markdown] [--clock cpu] [--device cuda]
                                         [--batch 32 ...] [--lm]
    python scripts/benchmark_encoders.py --dropconnect-only [--repeats 15]
    python scripts/benchmark_encoders.py --products [--threads 1]

``--threads 1,2`` sweeps thread counts (one table each); ``--markdown`` adds the ratio tables as Markdown (the
form benchmarks/README.md's speed table takes); ``--lm`` adds the language model's shapes (batch 20, 70 steps, the
authors' stack 400 -> 1150 -> 1150 -> 400, chunk 10; full windows, left to right) against a stack of three nn.LSTMs.

For every configuration (uni/bidirectional x 1/2 layers x full/mixed-length mask x inference/forward+backward)
it prints the median time of ``nn.LSTM`` and of :class:`ONLSTM` with the same sizes and their ratio; then
DropConnect on vs off in training, the reference cell (one configuration: it is slow), every encoder of the LSTM
family against nn.LSTM, and the machine.

How it is measured:
- the contenders of one configuration are timed in turns (A B A B ...) and reported as medians, so a load
  that comes and goes affects both alike;
- ``nn.LSTM`` honours a mask the way it can: a packed sequence (pack + run + unpack, all timed); with a full
  mask it runs on the plain tensor. ON-LSTM gets the mask (or none) as its ``forward`` argument;
- inference is eval mode under ``torch.no_grad()``; forward+backward is training mode (no dropout) with
  ``x.requires_grad`` (an embedder sits below) and the loss ``hidden.sum()`` (plus ``distances.sum()`` and
  ``input_distances.sum()`` for ON-LSTM, which later losses use).
The main ON-LSTM column is ``backend="auto"`` (on the CPU the compiled loop of ``csrc/onlstm_cpu.cpp`` where it was
built, see onlstm_tasks/native/library.py; on a GPU the ``triton`` back end, Triton kernels that split each
step of a layer over many programs, forward and backward); the table also times ``backend="torch"`` (``loop ms``: the per-step
PyTorch loop, a dozen kernels per step), so one run shows what the compiled loop or the Triton kernel brings. On a GPU
it adds ``torch.compile`` of the whole encoder (``compiled ms``; ``--no-compile`` leaves it out), and the language
model's table gets the PyTorch loop too.
On a machine shared with other jobs pass ``--threads 1 --clock cpu``: several OpenMP threads competing for busy
cores make every time noisy and many times longer. On CPU ``nn.LSTM`` runs oneDNN's fused RNN kernels (one call per
layer, gates fused), so it sits close to the cost of its matrix products alone; the ON-LSTM runs its whole time loop in
one call of the compiled kernels per layer (with two threads, one piece per direction or block of rows, on ATen's
threads), or in Python with one recurrent product and a dozen PyTorch operations per step (``loop``). On a GPU
``nn.LSTM`` is cuDNN's. Not a test: numbers go in issue notes and benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from onlstm_tasks.encoders import ONLSTM
from onlstm_tasks import native
from onlstm_tasks.native import onlstm as native_onlstm
from onlstm_tasks.encoders.dropconnect import drop_connect
from onlstm_tasks.encoders.onlstm.reference import reference_encode


def interleaved_medians(fns: list[Callable[[], None]], repeats: int, warmup: int = 2,
                        clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """Median milliseconds of each of ``fns``, timed in turns so that background load hits all alike. On a GPU
    each call is followed by a synchronisation (inside the timing), so that the time is the kernels', not the
    launch's."""
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(warmup):
        for fn in fns:
            fn()
    sync()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, ts in zip(fns, times):
            start = clock()
            fn()
            sync()
            ts.append((clock() - start) * 1000)
    return [statistics.median(ts) for ts in times]


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    gpu = f"; GPU {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    return (f"{cpu}{gpu}; {os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads, "
            f"Python {platform.python_version()}")


def lstm_step(lstm: nn.LSTM, x: torch.Tensor, mask: torch.Tensor, grad: bool) -> Callable[[], None]:
    full = bool(mask.all())
    lengths = mask.sum(1).cpu()

    def step() -> None:
        lstm.zero_grad(set_to_none=True)
        with torch.set_grad_enabled(grad):
            inp = x.detach().requires_grad_(grad)
            if full:
                out = lstm(inp)[0]
            else:
                packed = pack_padded_sequence(inp, lengths, batch_first=True, enforce_sorted=False)
                out = pad_packed_sequence(lstm(packed)[0], batch_first=True, total_length=x.size(1))[0]
            if grad:
                out.sum().backward()
    return step


def onlstm_step(enc: ONLSTM, x: torch.Tensor, mask: torch.Tensor | None, grad: bool,
                run: Callable | None = None) -> Callable[[], None]:
    """One timed call of ``enc`` (or of ``run``, e.g. ``torch.compile(enc)``, which shares its parameters)."""
    run = enc if run is None else run

    def step() -> None:
        enc.zero_grad(set_to_none=True)
        with torch.set_grad_enabled(grad):
            out = run(x.detach().requires_grad_(grad), mask)
            if grad:
                (out.hidden.sum() + out.distances.sum() + out.input_distances.sum()).backward()
    return step


def encoder_table(args, x, masks, repeats, clock) -> list[dict]:
    """nn.LSTM vs ONLSTM (``backend="auto"``) for every configuration; also the ONLSTM with ``backend="torch"``
    (``loop``) where the compiled loop runs instead, and on a GPU ``torch.compile`` of the encoder (``compiled``),
    timed in the same turns. Returns one dict per line."""
    loop_column = native.usable(x) or x.device.type == "cuda"
    compile_column = x.device.type == "cuda" and not args.no_compile
    header = f"{'dirs':<5}{'layers':>7}{'mask':>7}  {'mode':<17}{'nn.LSTM ms':>11}{'ONLSTM ms':>11}{'ratio':>8}"
    if loop_column:
        header += f"{'loop ms':>10}{'ratio':>8}"
    if compile_column:
        header += f"{'compiled ms':>12}{'ratio':>8}"
    print(header)
    print("-" * len(header))
    rows = []
    for bi, layers, mask_name, grad in itertools.product((False, True), (1, 2), masks, (False, True)):
        torch.manual_seed(1)
        lstm = nn.LSTM(args.input, args.hidden, num_layers=layers, bidirectional=bi, batch_first=True)
        lstm = lstm.to(x.device).train(grad)
        enc = ONLSTM(args.input, args.hidden, args.chunk, num_layers=layers, bidirectional=bi).to(x.device).train(grad)
        mask = masks[mask_name]
        contenders = [lstm_step(lstm, x, mask, grad), onlstm_step(enc, x, mask, grad)]
        if loop_column:
            plain = ONLSTM(args.input, args.hidden, args.chunk, num_layers=layers, bidirectional=bi, backend="torch")
            plain.load_state_dict(enc.state_dict())
            contenders.append(onlstm_step(plain.to(x.device).train(grad), x, mask, grad))
        if compile_column:
            contenders.append(onlstm_step(enc, x, mask, grad, torch.compile(enc, dynamic=True)))
        t_lstm, t_on, *others = interleaved_medians(contenders, repeats, clock=clock)
        mode = "forward+backward" if grad else "inference"
        line = (f"{'bi' if bi else 'uni':<5}{layers:>7}{mask_name:>7}  {mode:<17}{t_lstm:>11.2f}{t_on:>11.2f}"
                f"{t_on / t_lstm:>7.2f}x")
        for t_other in others:
            line += f"{t_other:>10.2f}{t_other / t_lstm:>7.2f}x"
        print(line)
        rows.append(dict(dirs="bi" if bi else "uni", layers=layers, mask=mask_name, mode=mode, lstm=t_lstm,
                         onlstm=t_on, ratio=t_on / t_lstm, others=[t / t_lstm for t in others]))
    return rows


def lm_table(args, repeats, clock) -> list[dict]:
    """The language model's shapes: the authors' stack ONLSTM(400, [1150, 1150, 400], chunk 10) against three
    chained nn.LSTMs of the same sizes, batch 20, 70 steps, full windows, left to right."""
    device = torch.device(args.device)
    batch, steps, sizes = 20, 70, [400, 1150, 1150, 400]
    print(f"\nlanguage model shapes: batch {batch}, {steps} steps, stack {' -> '.join(map(str, sizes))}, chunk 10, "
          "full windows (uni)")
    torch.manual_seed(2)
    x = torch.randn(batch, steps, sizes[0], device=device)
    lstms = nn.ModuleList(nn.LSTM(a, b, batch_first=True) for a, b in zip(sizes, sizes[1:])).to(device)
    enc = ONLSTM(sizes[0], sizes[1:], 10, num_layers=3).to(device)

    def lstm_stack(grad: bool) -> Callable[[], None]:
        def step() -> None:
            lstms.zero_grad(set_to_none=True)
            with torch.set_grad_enabled(grad):
                out = x.detach().requires_grad_(grad)
                for lstm in lstms:
                    out = lstm(out)[0]
                if grad:
                    out.sum().backward()
        return step

    loop = None
    if device.type == "cuda":  # the per-step PyTorch loop beside the Triton kernel
        loop = ONLSTM(sizes[0], sizes[1:], 10, num_layers=3, backend="torch").to(device)
        loop.load_state_dict(enc.state_dict())
    rows = []
    for grad in (False, True):
        lstms.train(grad)
        enc.train(grad)
        contenders = [lstm_stack(grad), onlstm_step(enc, x, None, grad)]
        if loop is not None:
            contenders.append(onlstm_step(loop.train(grad), x, None, grad))
        t_lstm, t_on, *t_loop = interleaved_medians(contenders, repeats, clock=clock)
        mode = "forward+backward" if grad else "inference"
        extra = f"; PyTorch loop {t_loop[0]:.1f} ms: {t_loop[0] / t_lstm:.2f}x" if t_loop else ""
        print(f"{mode:<17} nn.LSTM {t_lstm:.1f} ms, ON-LSTM {t_on:.1f} ms: {t_on / t_lstm:.2f}x{extra}")
        rows.append(dict(dirs="LM", layers=3, mask="full", mode=mode, lstm=t_lstm, onlstm=t_on, ratio=t_on / t_lstm))
    return rows


def markdown_tables(tables: dict[int, list[dict]]) -> None:
    """The ratios ON-LSTM / nn.LSTM of every thread count's table as Markdown: one row per dirs x layers, one column
    per mask and mode; where the table has more ON-LSTM columns (``loop``, ``compiled``) their ratios follow, in that
    order, after a slash."""
    for threads, rows in tables.items():
        masks = list(dict.fromkeys(r["mask"] for r in rows if r["dirs"] != "LM"))
        modes = ("inference", "forward+backward")
        print(f"\n**{threads} thread{'s' if threads != 1 else ''}** (ON-LSTM / nn.LSTM, median times)\n")
        print("| dirs x layers | " + " | ".join(f"{mask}, {mode}" for mask in masks for mode in modes) + " |")
        print("|---|" + "---|" * (len(masks) * len(modes)))
        for dirs, layers in dict.fromkeys((r["dirs"], r["layers"]) for r in rows):
            cells = {(r["mask"], r["mode"]): " / ".join(f"{v:.2f}x" for v in (r["ratio"], *r.get("others", ())))
                     for r in rows if (r["dirs"], r["layers"]) == (dirs, layers)}
            label = "LM stack (B 20, T 70, 400-1150-1150-400)" if dirs == "LM" else f"{dirs} x {layers}"
            print(f"| {label} | " + " | ".join(cells.get((m, mode), "") for m in masks for mode in modes) + " |")


def dropconnect_lines(args, x, masks, repeats, clock) -> None:
    """What DropConnect costs in training: the same ONLSTM with p=0.3 vs p=0, and p=0 against itself as a control
    (the noise of this measurement), in the same turns, with three times the repeats (a small gap). Then the masks
    alone (one forward pass's weights, forward and backward) on both back ends of ``drop_connect``."""
    print("\nDropConnect (p=0.3) in training, forward+backward: ON-LSTM with vs without (control: without vs itself)")
    for bi, layers, mask_name in ((False, 1, "full"), (True, 2, "mixed")):
        torch.manual_seed(1)
        off = ONLSTM(args.input, args.hidden, args.chunk, num_layers=layers, bidirectional=bi).to(x.device).train()
        on = ONLSTM(args.input, args.hidden, args.chunk, num_layers=layers, bidirectional=bi, dropconnect=0.3)
        on.load_state_dict(off.state_dict())
        on.to(x.device).train()
        mask = masks[mask_name]
        step_off = onlstm_step(off, x, mask, True)
        t_off, t_on, t_control = interleaved_medians([step_off, onlstm_step(on, x, mask, True), step_off],
                                                     3 * repeats, clock=clock)
        print(f"{'bi' if bi else 'uni':<5}{layers:>7}{mask_name:>7}  off {t_off:.2f} ms, on {t_on:.2f} ms: "
              f"{100 * (t_on / t_off - 1):+.1f}% (control {100 * (t_control / t_off - 1):+.1f}%)")
        if native.usable(x) and not bi:
            weights = [cell.weight_hh for cell in on.cells]

            def masks_only(compiled: bool, model: ONLSTM = on, weights: list = weights) -> Callable[[], None]:
                def step() -> None:
                    model.zero_grad(set_to_none=True)
                    sampled = drop_connect(weights, 0.3, training=True, native_ops=compiled)
                    torch.autograd.backward(sampled, [torch.ones_like(w) for w in sampled])
                return step
            t_c, t_t = interleaved_medians([masks_only(True), masks_only(False)], 3 * repeats, clock=clock)
            print(f"{'':<19}its masks alone (forward+backward): compiled {t_c:.2f} ms, PyTorch operations "
                  f"{t_t:.2f} ms ({t_t / t_c:.1f}x)")


def product_lines(repeats: int, clock) -> None:
    """The compiled product (onlstm_cpu.cpp's own, the weight packed once per call) against ATen's ``torch.bmm``
    (MKL), ``out += a @ W`` at the shapes the layer runs: a NER step's recurrent product (32 or 16 rows), a NER
    layer's input projection, a language-model step and its large gradient products. The packing is included."""
    print("\nproducts: compiled (packing included) vs torch.bmm, median times")
    shapes = [("NER step, 32 rows", 32, 256, 1088), ("NER step, 16 rows (one of 2 pieces)", 16, 256, 1088),
              ("NER projection", 1280, 128, 1088), ("LM step, 20 rows", 20, 1150, 4830),
              ("LM projection", 1400, 1150, 4830), ("LM input gradient", 1400, 4830, 1150)]
    for name, m, depth, n in shapes:
        torch.manual_seed(0)
        a, w, out = torch.randn(1, m, depth), torch.randn(1, depth, n), torch.zeros(1, m, n)
        t_c, t_b = interleaved_medians([lambda: native_onlstm.product(out, a, w), lambda: torch.bmm(a, w)], repeats,
                                       clock=clock)
        print(f"{name:<36} {m:>5} x {depth:>5} x {n:>5}: compiled {t_c:8.2f} ms, bmm {t_b:8.2f} ms "
              f"({t_c / t_b:.2f}x)")


def reference_lines(args, x, mask, repeats, clock) -> None:
    """The plain reference cell (one sentence and one step at a time) against nn.LSTM, one configuration."""
    print("\nreference cell (uni, 1 layer, full mask; one sentence and one step at a time)")
    torch.manual_seed(1)
    lstm = nn.LSTM(args.input, args.hidden, batch_first=True).to(x.device)
    enc = ONLSTM(args.input, args.hidden, args.chunk).to(x.device)

    def reference(grad: bool) -> Callable[[], None]:
        def step() -> None:
            with torch.set_grad_enabled(grad):
                out = reference_encode(enc, x, mask)[0]
                if grad:
                    out.sum().backward()
        return step

    for grad in (False, True):
        t_lstm, t_ref = interleaved_medians([lstm_step(lstm, x, mask, grad), reference(grad)], repeats, warmup=0,
                                            clock=clock)
        mode = "forward+backward" if grad else "inference"
        print(f"{mode:<17} nn.LSTM {t_lstm:.2f} ms, reference {t_ref:.1f} ms: {t_ref / t_lstm:.1f}x")


def family() -> dict[str, Callable[[int, int], torch.nn.Module]]:
    """The LSTM relatives (issue: swappable encoders), each ``(input_size, hidden_size) -> encoder``."""
    from onlstm_tasks import encoders as e

    return {
        "ON-LSTM": lambda i, h: e.ONLSTM(i, h, 8, bidirectional=True),
        "LSTM (nn.LSTM)": lambda i, h: e.LSTM(i, h, bidirectional=True),
        "GRU (nn.GRU)": lambda i, h: e.GRU(i, h, bidirectional=True),
        "peephole LSTM": lambda i, h: e.PeepholeLSTM(i, h, bidirectional=True),
        "CIFG LSTM": lambda i, h: e.CIFGLSTM(i, h, bidirectional=True),
        "no-forget LSTM": lambda i, h: e.NoForgetLSTM(i, h, bidirectional=True),
        "nested LSTM": lambda i, h: e.NestedLSTM(i, h, bidirectional=True),
        "sLSTM (4 heads)": lambda i, h: e.SLSTM(i, h, bidirectional=True, num_heads=4),
        "mLSTM (4 heads, parallel)": lambda i, h: e.MLSTM(i, h, bidirectional=True, num_heads=4),
        "child-sum Tree-LSTM (+top-down)": lambda i, h: e.ChildSumTreeLSTM(i, h, tree_source="gold"),
    }


def family_lines(args, x, mask, repeats, clock) -> None:
    """Every encoder of the family, bidirectional, 1 layer, mixed lengths, against nn.LSTM (packed) in one run.
    The Tree-LSTM reads a right-branching chain as its gold tree (its cost depends on the tree's height)."""
    print("\nencoder family (bidirectional, 1 layer, mixed lengths): ms per batch and ratio to nn.LSTM")
    lengths = mask.sum(1)
    steps = torch.arange(x.size(1), device=x.device)
    chain = torch.where(steps[None] + 1 < lengths[:, None], steps[None] + 1, steps[None]).expand(x.size(0), -1)
    torch.manual_seed(1)
    lstm = nn.LSTM(args.input, args.hidden, bidirectional=True, batch_first=True).to(x.device)
    print(f"{'encoder':<33}{'inference':>10}{'ratio':>8}{'fwd+bwd':>10}{'ratio':>8}")
    for name, build in family().items():
        enc = build(args.input, args.hidden).to(x.device)
        cells = []
        for grad in (False, True):
            enc.train(grad)

            def step(grad=grad, enc=enc) -> None:
                enc.zero_grad(set_to_none=True)
                with torch.set_grad_enabled(grad):
                    inp = x.detach().requires_grad_(grad)
                    out = enc(inp, mask, chain) if "Tree" in name else enc(inp, mask)
                    if grad:
                        out.hidden.sum().backward()

            t_lstm, t_enc = interleaved_medians([lstm_step(lstm, x, mask, grad), step], repeats, clock=clock)
            cells += [t_enc, t_enc / t_lstm]
        print(f"{name:<33}{cells[0]:>10.1f}{cells[1]:>7.2f}x{cells[2]:>10.1f}{cells[3]:>7.2f}x")


def set_recurrent_precision(precision: str) -> None:
    """The float32 precision of both sides' recurrent products: cuDNN's LSTM and the ON-LSTM's Triton kernel follow
    ``torch.backends.cudnn.rnn.fp32_precision`` (before PyTorch 2.9, ``torch.backends.cudnn.allow_tf32``)."""
    rnn = getattr(torch.backends.cudnn, "rnn", None)
    if rnn is not None and hasattr(rnn, "fp32_precision"):
        rnn.fp32_precision = precision
    else:
        torch.backends.cudnn.allow_tf32 = precision == "tf32"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--length", type=int, default=40)
    ap.add_argument("--input", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--chunk", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=15, help="timed runs per contender and configuration")
    ap.add_argument("--quick", action="store_true", help="5 repeats, reference cell skipped")
    ap.add_argument("--reference-repeats", type=int, default=1)
    ap.add_argument("--family", action="store_true", help="time the LSTM family even with --quick")
    ap.add_argument("--dropconnect-only", action="store_true",
                    help="only the DropConnect lines (to repeat that small measurement on its own)")
    ap.add_argument("--threads", default=None,
                    help="torch.set_num_threads: one count, or a comma-separated sweep such as 1,2 (one table per "
                         "count; default: torch's own)")
    ap.add_argument("--markdown", action="store_true", help="also print the ratio tables as Markdown")
    ap.add_argument("--no-compile", action="store_true", help="on a GPU, leave out the torch.compile column")
    ap.add_argument("--products", action="store_true",
                    help="only the compiled product against torch.bmm at the layer's shapes (CPU)")
    ap.add_argument("--lm", action="store_true", help="also time the language model's shapes (see above)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                    help="where to run (default: the GPU when there is one)")
    ap.add_argument("--precision", choices=("tf32", "ieee"), default="tf32",
                    help="on a GPU, the recurrent products of both sides: TF32 (PyTorch's default for recurrent "
                         "layers, torch.backends.cudnn.rnn.fp32_precision, which cuDNN's LSTM and the ON-LSTM's "
                         "kernel both follow) or full float32")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall time, or this process's CPU time (steadier on a busy machine; with several threads "
                         "it adds up their times)")
    args = ap.parse_args()
    if args.device != "cpu" and args.clock == "cpu":
        ap.error("--clock cpu measures this process's CPU time, which says nothing about a GPU: use --clock wall")
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    set_recurrent_precision(args.precision)
    try:
        sweep = [int(n) for n in args.threads.split(",")] if args.threads else [torch.get_num_threads()]
    except ValueError:
        ap.error(f"--threads takes counts separated by commas, got {args.threads!r}")
    if any(n < 1 for n in sweep):
        ap.error("--threads counts must be positive")
    torch.set_num_threads(sweep[0])
    repeats = 5 if args.quick else args.repeats
    torch.manual_seed(0)
    device = torch.device(args.device)
    x = torch.randn(args.batch, args.length, args.input, device=device)
    # mixed lengths: uniform in [length/4, length], one row full
    lengths = torch.randint(args.length // 4, args.length + 1, (args.batch,))
    lengths[0] = args.length
    masks = {
        "full": torch.ones(args.batch, args.length, dtype=torch.bool, device=device),
        "mixed": (torch.arange(args.length)[None, :] < lengths[:, None]).to(device),
    }

    print(f"machine: {machine()}")
    reason = native.why_not(x)
    print(f"compiled ON-LSTM loop: {'in use' if reason is None else 'not used'} for these inputs"
          + ("" if reason is None else f" ({reason})"))
    print(f"device: {device}; recurrent products in {args.precision} on both sides (GPU)")
    print(f"shapes: batch {args.batch}, length {args.length}, input {args.input}, hidden {args.hidden}, "
          f"chunk {args.chunk}; mixed lengths {args.length // 4}..{args.length} (mean "
          f"{lengths.float().mean():.1f}); median of {repeats} interleaved runs, {args.clock} clock")
    if args.dropconnect_only:
        dropconnect_lines(args, x, masks, repeats, clock)
        return
    if args.products:
        if not native.usable(x):
            ap.error(f"--products needs the compiled loop: {native.why_not(x)}")
        for threads in sweep:
            torch.set_num_threads(threads)
            print(f"\n{threads} thread{'s' if threads != 1 else ''}")
            product_lines(max(repeats, 9), clock)
        return
    tables = {}
    for threads in sweep:
        torch.set_num_threads(threads)
        print(f"\n{threads} thread{'s' if threads != 1 else ''}")
        tables[threads] = encoder_table(args, x, masks, repeats, clock)
        if args.lm:
            tables[threads] += lm_table(args, repeats, clock)
    if args.markdown:
        print(f"\nMarkdown ({machine()}; {args.clock} clock)")
        markdown_tables(tables)
    torch.set_num_threads(sweep[0])
    dropconnect_lines(args, x, masks, repeats, clock)
    if not args.quick:
        reference_lines(args, x, masks["full"], args.reference_repeats, clock)
    if args.family or not args.quick:
        family_lines(args, x, masks["mixed"], max(3, repeats // 3), clock)


if __name__ == "__main__":
    main()
