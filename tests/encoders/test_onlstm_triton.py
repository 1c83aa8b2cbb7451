"""The ``triton`` back end (:mod:`onlstm_tasks.encoders.onlstm.backends.triton.launcher`): a layer's time loop in Triton kernels
that split each step over many programs, forward and backward, against the reference cell (the oracle) and the
PyTorch loop. Without a GPU the kernels run in Triton's interpreter on CPU tensors (``TRITON_INTERPRET=1``, set by
``conftest.py``), one launch per half-step (the interpreter runs programs one after another, so a grid barrier
would deadlock), at the small sizes the interpreter affords: hidden 32 (chunk 8, so 4 levels: two programs of two
levels each split every step), up to 20 rows and 12 steps. Marked ``triton``: skipped without Triton, required in
CI (ONLSTM_REQUIRE_TRITON=1). On a GPU (tests marked ``cuda``) the persistent launch, one per layer pass with a grid
barrier per half-step, is checked against the per-step launches."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from helpers.paths import REPO
from helpers.onlstm import OUTPUT_SUBSETS, compare_eager_with_operator, compare_layer_backends, \
    compare_with_reference, loss_fn

from onlstm_tasks.encoders import ONLSTM
from onlstm_tasks.encoders.onlstm.registry import resolve
from onlstm_tasks.encoders.onlstm.reference import reference_encode
from helpers.cuda_syncs import is_sync
from helpers.host_reads import count_host_reads

triton = pytest.importorskip("triton", reason="Triton is not installed (pip install triton)")
pytestmark = pytest.mark.triton
RAGGED = [12, 3, 1, 12, 7, 9, 12, 2, 5, 11, 4, 12, 6, 8, 10, 1, 12, 3]  # 18 rows: two programs, the second partial


def ragged_batch(lengths, steps=12, features=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lengths), steps, features, generator=g)
    return x, torch.arange(steps)[None, :] < torch.tensor(lengths)[:, None]


def test_the_kernel_matches_the_reference_on_a_small_ragged_batch():
    """Outputs (hidden states, both distances) and every gradient within 1e-5 of the reference cell, with two
    programs splitting every step of each direction."""
    from onlstm_tasks.encoders.onlstm.backends.triton.launcher import plan

    assert plan(4, 32, 4, 2, False, resident=0).grid == (2, 2, 1)  # directions x level blocks x row tiles
    torch.manual_seed(0)
    enc = ONLSTM(5, 32, 8, bidirectional=True, backend="triton")
    compare_with_reference(enc, *ragged_batch([6, 2, 5, 1], steps=6))


@pytest.mark.slow
def test_the_kernels_compile_for_a_hopper_gpu_without_one(tmp_path):
    """The interpreter runs what a GPU's compiler refuses (a loop-carried variable whose shape changes did): the
    forward and backward kernels compile to sm_90 machine code here at the shipped sizes (hidden 256, 400, 1150),
    with the constants and pointer alignment a launch gives, and each build uses tensor cores (TF32) and spills
    no register; so do the CRF's two kernels (no spill) at the tiles they launch with (read from the machine code
    with Triton's bundled cuobjdump and nvdisasm)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"TRITON_CACHE_DIR": str(tmp_path)}
    script = REPO / "scripts" / "compile_triton_kernels.py"
    done = subprocess.run([sys.executable, str(script), "--quick"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if " sm_90: " in line]
    onlstm = [line for line in lines if line.startswith("onlstm_")]
    crf = [line for line in lines if line.startswith("crf_")]  # the CRF's kernels (log-sum-exps: no tensor cores)
    assert (len(onlstm), len(crf)) == (6, 4), done.stdout
    assert all("spills 0 bytes" in line and "tensor cores yes" in line for line in onlstm), done.stdout
    assert all("spills 0 bytes" in line for line in crf), done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("master_input", ["paper", "symmetric"])
@pytest.mark.parametrize("bidirectional,num_layers", [(False, 1), (True, 1), (True, 2)])
@pytest.mark.parametrize("lengths", [RAGGED, [12] * 20], ids=["ragged", "full"])
def test_the_kernel_matches_the_reference(master_input, bidirectional, num_layers, lengths):
    torch.manual_seed(1)
    enc = ONLSTM(5, 32, 8, num_layers=num_layers, bidirectional=bidirectional, master_input=master_input,
                 backend="triton")
    compare_with_reference(enc, *ragged_batch(lengths), rtol=1e-6)  # float32 sums over 240 positions


@pytest.mark.slow
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("dirs", [1, 2])
@pytest.mark.parametrize("lengths,carry", [([6, 6, 6], False), ([6, 6, 6], True), ([6, 2, 5, 1], False)])
def test_the_kernel_gives_the_pytorch_loop_outputs_and_gradients(symmetric, dirs, lengths, carry):
    """Layer by layer, every output (the final cell state too) and every gradient, from zeros or from a carried
    state, at a hidden size that is not a power of two (12: 3 levels of 4)."""
    compare_layer_backends(("triton", "torch"), lengths, dirs, symmetric, carry, seed=len(lengths) + dirs)


@pytest.mark.slow
def test_inference_keeps_no_buffers_and_gives_the_training_outputs():
    torch.manual_seed(2)
    enc = ONLSTM(5, 32, 8, bidirectional=True, backend="triton").eval()
    x, mask = ragged_batch([12, 5, 9])
    with torch.no_grad():
        inference = enc(x, mask)
    training = enc(x.requires_grad_(), mask)
    for got, want in zip((inference.hidden, inference.distances), (training.hidden, training.distances)):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-6)


@pytest.mark.slow
def test_opcheck_of_the_operator_with_the_triton_backend():
    """torch.library.opcheck: schema, fake tensor shapes, autograd registration, AOT dispatch."""
    torch.manual_seed(5)
    hidden, levels, features, dirs = 16, 2, 3, 2
    gates = 4 * hidden + 2 * levels
    lengths = [4, 1, 3]
    x = torch.randn(len(lengths), max(lengths), features, requires_grad=True)
    weights = [torch.randn(*shape, requires_grad=True) for shape in
               ((dirs, gates, features), (dirs, gates), (dirs, gates, hidden))]
    args = (x, torch.tensor(lengths), *weights, None, None, False, "triton", True)
    torch.library.opcheck(torch.ops.onlstm_tasks.onlstm_layer.default, args)


@pytest.mark.parametrize("used", [pytest.param(name, marks=[] if name == "all" else [pytest.mark.slow])
                                  for name in OUTPUT_SUBSETS])
def test_eager_mode_gives_the_operators_outputs_and_gradients_with_the_triton_backend(used):
    """The eager path (a plain autograd.Function around the operator's forward and backward) against the registered
    operator, on a ragged batch with the symmetric master input: bit for bit the same, whichever outputs the loss
    reads."""
    compare_eager_with_operator("triton", [6, 2, 5, 1], 2, True, False, seed=4, used=OUTPUT_SUBSETS[used])


def test_the_triton_pass_reads_nothing_on_the_host():
    """No value of a tensor reaches Python in a forward and backward pass, inside the operator included: the rows'
    lengths stay on the device, where each program reads its own."""
    torch.manual_seed(3)
    enc = ONLSTM(5, 16, 8, bidirectional=True, backend="triton")
    x, mask = ragged_batch([3, 1, 2], steps=3)
    with count_host_reads() as reads:
        out = enc(x.requires_grad_(), mask)
        (out.hidden.sum() + out.distances.sum()).backward()
    assert (reads.total, reads.inside_ops) == (0, 0), reads.where


needs_cuda = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]


def cuda_test(test):
    for mark in reversed(needs_cuda):
        test = mark(test)
    return test


@cuda_test
@pytest.mark.parametrize("bidirectional", [False, True])
def test_cuda_triton_matches_the_reference(bidirectional, monkeypatch):
    """On a GPU, compiled (not interpreted), full float32 products: outputs and gradients within 1e-4 of the
    reference cell on the CPU."""
    monkeypatch.setattr(torch.backends.cudnn.rnn, "fp32_precision", "ieee")
    torch.manual_seed(6)
    enc = ONLSTM(5, 32, 8, num_layers=2, bidirectional=bidirectional, master_input="paper", backend="triton")
    x, mask = ragged_batch(RAGGED)
    gpu = ONLSTM(5, 32, 8, num_layers=2, bidirectional=bidirectional, backend="triton").cuda()
    gpu.load_state_dict(enc.state_dict())
    x_gpu = x.cuda().requires_grad_()
    out = gpu(x_gpu, mask.cuda())
    ref = reference_encode(enc, x.requires_grad_(), mask)
    for got, want in zip((out.hidden, out.distances, out.input_distances), ref):
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=1e-4)
    grads = torch.autograd.grad(loss_fn(*(t.cpu() for t in (out.hidden, out.distances, out.input_distances))),
                                [x_gpu, *gpu.parameters()])
    want = torch.autograd.grad(loss_fn(*ref), [x, *enc.parameters()])
    for got, expected in zip(grads, want):
        torch.testing.assert_close(got.cpu(), expected, rtol=1e-4, atol=1e-4)


@cuda_test
@pytest.mark.parametrize("hidden,chunk,rows", [(256, 8, 32), (1150, 10, 20)])
def test_cuda_the_persistent_launch_gives_the_per_step_launches_results(hidden, chunk, rows, monkeypatch):
    """One launch with a grid barrier per half-step (every program resident) against one launch per half-step (the
    interpreter's order): the same outputs and gradients, at the NER and the language model's sizes."""
    from onlstm_tasks.encoders.onlstm.backends.triton import launcher as backend_triton

    monkeypatch.setattr(torch.backends.cudnn.rnn, "fp32_precision", "ieee")
    torch.manual_seed(9)
    dirs = 2 if hidden < 1000 else 1
    enc = ONLSTM(16, hidden, chunk, bidirectional=dirs == 2, backend="triton").cuda()
    x, mask = ragged_batch((RAGGED * 2)[:rows], features=16)
    x, mask = x.cuda(), mask.cuda()
    assert backend_triton.plan(rows, hidden, hidden // chunk, dirs, False,
                               backend_triton.resident_programs(x.device)).persistent
    results = []
    for resident in (None, 0):
        if resident == 0:
            monkeypatch.setattr(backend_triton, "resident_programs", lambda device: 0)
        xr = x.clone().requires_grad_()
        out = enc(xr, mask)
        loss = loss_fn(out.hidden.cpu(), out.distances.cpu(), out.input_distances.cpu())
        grads = torch.autograd.grad(loss, [xr, *enc.parameters()])
        results.append((out.hidden, out.distances, *grads))
    for persistent, per_step in zip(*results):
        torch.testing.assert_close(persistent, per_step, rtol=1e-5, atol=1e-5)


@cuda_test
def test_cuda_auto_is_the_triton_kernel():
    x = torch.zeros(1, device="cuda")
    assert resolve("auto", x, hidden=256).name == "triton"
    assert resolve("auto", x, hidden=1150).name == "triton"  # every size: the language model's too


@cuda_test
def test_cuda_bf16_autocast_runs_the_kernel_in_float32():
    torch.manual_seed(7)
    enc = ONLSTM(16, 32, 8, bidirectional=True).cuda()
    x, mask = ragged_batch(RAGGED, features=16)
    x, mask = x.cuda(), mask.cuda()
    full = enc(x, mask)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        low = enc(x.bfloat16(), mask)
    assert low.hidden.dtype == torch.float32
    torch.testing.assert_close(low.hidden, full.hidden, rtol=0, atol=3e-2)


def _synthetic_ner_batch(labels: int, words: int, steps: int, device: str):
    from onlstm_tasks.data.core.batching import TokenBatch
    from onlstm_tasks.data.ner.module import NERBatch

    g = torch.Generator().manual_seed(steps)
    rows = 16
    tokens = TokenBatch(word_ids=torch.randint(2, words, (rows, steps), generator=g),
                        char_ids=torch.randint(2, 20, (rows, steps, 6), generator=g),
                        mask=torch.arange(steps)[None, :] < torch.randint(1, steps + 1, (rows, 1), generator=g),
                        words=[["w"] * steps for _ in range(rows)])
    tokens.mask[0] = True
    tokens = TokenBatch(word_ids=tokens.word_ids.to(device), char_ids=tokens.char_ids.to(device),
                        mask=tokens.mask.to(device), words=tokens.words)
    return NERBatch(tokens=tokens, tags=torch.randint(0, labels, (rows, steps), generator=g).to(device),
                    index=list(range(rows)))


@cuda_test
def test_cuda_host_syncs_of_a_training_step_do_not_grow_with_the_steps():
    """``torch.cuda.set_sync_debug_mode``: a whole NER training step (embedder, bidirectional ON-LSTM, CRF loss,
    backward) never syncs with the host, at 8 steps as at 32. Both shapes are warmed up first. On the H200 (2026-11-27
    and -28) the first measured shape counted one "sync" and the later one none, and "error" mode never met it: it was
    torch's once-per-process notice that the mode is a prototype, counted as a sync (:mod:`helpers.cuda_syncs`)."""
    import warnings

    from onlstm_tasks.tasks.ner import NERTagger

    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    words, chars = [f"w{i}" for i in range(50)], [chr(97 + i) for i in range(20)]
    torch.manual_seed(8)
    model = NERTagger(["<pad>", "<unk>", *words], ["<pad>", "<unk>", *chars], labels).cuda().train()
    batches = {steps: _synthetic_ner_batch(len(labels), len(words), steps, "cuda") for steps in (8, 32)}
    for _ in range(2):  # warm-up of both shapes: the kernels compile, lazy inits run, the allocator grows
        for batch in batches.values():
            model.training_step(batch, 0).backward()
    torch.cuda.synchronize()
    counts, sites = [], []
    for steps, batch in batches.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                model.training_step(batch, 0).backward()
            finally:
                torch.cuda.set_sync_debug_mode("default")
        syncs = [w for w in caught if is_sync(w.message)]
        counts.append(len(syncs))
        sites += [f"{steps} steps: {w.filename}:{w.lineno}" for w in syncs]
    assert counts == [0, 0], (counts, sites, _first_sync_traceback(model, len(labels), len(words)))


def _first_sync_traceback(model, labels: int, words: int) -> str:
    """Where a training step first syncs: ``set_sync_debug_mode("error")`` raises there (for the failure message;
    a sync in the autograd engine's thread is only attributed, in "warn" mode, to a later Python line)."""
    import traceback

    for steps in (8, 32):
        batch = _synthetic_ner_batch(labels, words, steps, "cuda")
        torch.cuda.set_sync_debug_mode("error")
        try:
            model.training_step(batch, 0).backward()
        except RuntimeError:
            return f"{steps} steps:\n" + traceback.format_exc()[-4000:]
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return "no sync raised in error mode"
