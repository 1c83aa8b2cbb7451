"""The ON-LSTM layer operator (``torch.ops.onlstm_tasks.onlstm_layer``) on every back end, against the reference cell
(the oracle: ``encoders/onlstm/reference.py``, the one written definition of the equations) and against each other;
the operator's registration (``torch.library.opcheck``), ``torch.compile(fullgraph=True)`` of the encoder and of a
tagger's training step, and the compiled DropConnect helpers.

Tests marked ``compiled`` are skipped where the C++ kernels were not built; ``.ci/run`` sets
ONLSTM_REQUIRE_COMPILED=1, which turns such a skip into a failure. Tests marked ``cuda`` are skipped without a GPU;
ONLSTM_REQUIRE_CUDA=1 (set by ``scripts/gpu_check.sh``) turns such a skip into a failure.
"""

from __future__ import annotations


import pytest
import torch
from helpers.paths import REPO
from helpers.onlstm import OUTPUT_SUBSETS, batch, compare_eager_with_operator, compare_layer_backends, \
    compare_with_reference, loss_fn

from onlstm_tasks.encoders import ONLSTM
from onlstm_tasks import native
from onlstm_tasks.native import onlstm as native_onlstm
from onlstm_tasks.encoders.onlstm.tuning import WIDE
from onlstm_tasks.encoders.dropconnect import _CompiledDropConnect, _masked, drop_connect, keep_threshold, \
    random_lanes
from onlstm_tasks.encoders.onlstm.registry import BACKENDS as REGISTRY
from onlstm_tasks.encoders.onlstm.registry import resolve
from onlstm_tasks.encoders.onlstm.layer_op import run_layer
from onlstm_tasks.encoders.onlstm.reference import reference_encode

NOT_BUILT = "the compiled ON-LSTM loop was not built (no C++ compiler, or torch absent, at install time?)"
needs_compiled = [pytest.mark.compiled, pytest.mark.skipif(not native.available(), reason=NOT_BUILT)]
needs_cuda = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]
# every back end of the registry that runs on CPU tensors outside Triton's interpreter (test_onlstm_triton.py tests
# the triton one there); each marked by what it needs
NEEDS = {"compiled": needs_compiled}
BACKENDS = [pytest.param(name, marks=NEEDS.get(name, [])) for name in REGISTRY if name != "triton"]
PACKAGE = REPO / "onlstm_tasks"


def marked(*marks):
    def wrap(test):
        for mark in reversed(marks):
            test = mark(test)
        return test
    return wrap


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"])
def threads(request):
    """The compiled loop cuts its work into pieces, one per thread: one thread and two give the same results."""
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("master_input", ["paper", "symmetric"])
@pytest.mark.parametrize("bidirectional,num_layers", [(False, 1), (False, 2), (True, 2)])
def test_every_backend_matches_the_reference_in_float32(threads, backend, master_input, bidirectional, num_layers):
    """Outputs and every gradient within 1e-5 of the reference cell, on a ragged batch (sorting, runs of steps on
    fewer rows, rows that step past their end inside a run)."""
    torch.manual_seed(0)
    enc = ONLSTM(5, 12, 3, num_layers=num_layers, bidirectional=bidirectional, master_input=master_input,
                 backend=backend)
    x, mask = batch(torch.float32)
    compare_with_reference(enc, x, mask)


@marked(*needs_compiled)
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("dirs", [1, 2])
@pytest.mark.parametrize("lengths,carry", [([6, 6, 6, 6], False), ([6, 6, 6, 6], True), ([1, 1], True),
                                          ([6, 2, 5, 1, 6, 3, 6, 4, 2], False)])
def test_the_compiled_loop_gives_the_pytorch_outputs_and_gradients(threads, symmetric, dirs, lengths, carry):
    """Layer by layer, through every output (the final cell too), from zeros or from a carried state (full batches
    only), hidden sizes whose rows are no multiple of the vector width."""
    compare_layer_backends(("compiled", "torch"), lengths, dirs, symmetric, carry, seed=len(lengths) + dirs)


@marked(*needs_compiled)
@pytest.mark.parametrize("lengths", [[3, 3], [3, 1, 2]])
def test_wide_layers_take_the_compiled_products_and_give_the_pytorch_gradients(lengths):
    """Inputs and hidden states at least WIDE wide (the language model's): the projection and the gradients'
    large products run through the compiled product, with the PyTorch loop's results."""
    g = torch.Generator().manual_seed(11)
    wide = WIDE + 6
    hidden, levels, dirs = WIDE, 4, 2
    gates = 4 * hidden + 2 * levels
    shapes = ((len(lengths), max(lengths), wide), (dirs, gates, wide), (dirs, gates), (dirs, gates, hidden))
    args = [torch.randn(*shape, generator=g) * 0.05 for shape in shapes]
    lengths = torch.tensor(lengths)
    results = []
    for backend in ("compiled", "torch"):
        leaves = [a.clone().requires_grad_() for a in args]
        h, d_f, d_i, _ = run_layer(leaves[0], lengths, *leaves[1:], False, backend)
        results.append((h, d_f, d_i, *torch.autograd.grad(loss_fn(h, d_f, d_i), leaves)))
    for got, want in zip(*results):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("scale", [30.0, 300.0])
def test_saturated_gates_agree_and_stay_finite(backend, scale):
    torch.manual_seed(2)
    enc = ONLSTM(4, 8, 4, bidirectional=True, backend=backend)
    x, mask = batch(torch.float32, features=4)
    with torch.no_grad():
        for p in enc.parameters():
            p.mul_(scale)
        out = enc(x, mask)
        ref = reference_encode(enc, x, mask)
    assert torch.isfinite(out.hidden).all()
    torch.testing.assert_close(out.hidden, ref[0], rtol=0, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_propagates_as_in_pytorch(backend):
    enc = ONLSTM(4, 8, 4, backend=backend)
    x = torch.randn(2, 3, 4)
    x[0, 1, 0] = float("nan")
    with torch.no_grad():
        out = enc(x).hidden
    assert out[0, 1:].isnan().all() and not out[0, 0].isnan().any() and not out[1].isnan().any()


def test_backend_choice_is_checked_and_explained():
    x = torch.zeros(2, 3, 4)
    assert resolve("torch", x).name == "torch"
    assert resolve("auto", x.double()).name == "torch"  # float64: the PyTorch loop
    with pytest.raises(ValueError, match="backend 'compiled' cannot run here: the compiled kernels run float32 CPU"):
        resolve("compiled", x.double())
    with pytest.raises(ValueError, match="backend must be one of auto, compiled, torch, triton; got .fast."):
        ONLSTM(4, 8, 4, backend="fast")
    with pytest.raises(ValueError, match="backend 'triton' cannot run here: the Triton kernels run in float32"):
        resolve("triton", x.double())
    with pytest.raises(ValueError, match="backend 'triton' cannot run here: the Triton kernels run on CUDA devices, "
                                         "not meta"):
        resolve("triton", x.to("meta"))
    if native.available():
        assert resolve("auto", x).name == "compiled"


def _compared_strings(path) -> set[str]:
    """The string constants ``path``'s code compares anything with (``==``, ``!=``, ``in`` and their negations)."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                found |= {item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)}
    return found


def test_only_the_registry_compares_back_end_names():
    """A back end is chosen in one place: no module of the encoders and networks but the registry compares a back
    end's name (DropConnect asks the registry, the loop's steps are objects)."""
    registry = PACKAGE / "encoders" / "onlstm" / "registry.py"
    names = set(REGISTRY) | {"auto"}
    for path in [*(PACKAGE / "encoders").rglob("*.py"), *(PACKAGE / "modules").rglob("*.py")]:
        if path != registry:
            assert not _compared_strings(path) & names, path


def test_the_crf_chooses_its_path_in_one_place():
    """The CRF's modules read no device and no path name; :mod:`onlstm_tasks.modules.crf.paths` alone chooses."""
    import re

    for path in (PACKAGE / "modules" / "crf").glob("*.py"):
        if path.name != "paths.py":
            assert not re.search(r"device\.type\s*(==|!=|in\b|not\s+in\b)", path.read_text()), path


def test_no_ctypes_in_the_package_and_no_environment_reads_in_the_encoders():
    """Choosing a path is an argument (``backend``), never the environment or a module global."""
    for path in PACKAGE.rglob("*.py"):
        assert "ctypes" not in path.read_text(), path
    for path in (PACKAGE / "encoders").rglob("*.py"):
        text = path.read_text()
        assert "os.environ" not in text and "getenv" not in text, path


@pytest.mark.parametrize("backend", BACKENDS)
def test_encoder_stream_windows_carry_the_state(backend):
    """Two windows from the carried state equal one pass over both (the state outlives the window)."""
    torch.manual_seed(3)
    enc = ONLSTM(5, 8, 4, num_layers=2, backend=backend).eval()
    x = torch.randn(3, 10, 5)
    with torch.no_grad():
        whole = enc(x)
        first = enc(x[:, :6])
        second = enc(x[:, 6:], state=first.state)
    torch.testing.assert_close(torch.cat([first.hidden, second.hidden], 1), whole.hidden, rtol=0, atol=1e-6)
    torch.testing.assert_close(second.state[1][1], whole.state[1][1], rtol=0, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropconnect_matches_the_reference_on_the_sampled_weights(backend):
    torch.manual_seed(4)
    enc = ONLSTM(5, 8, 4, num_layers=2, bidirectional=True, dropconnect=0.4, backend=backend).train()
    x, mask = batch(torch.float32)
    torch.manual_seed(9)
    weights = enc.recurrent_weights()
    torch.manual_seed(9)
    compare_with_reference(enc, x, mask, recurrent_weights=weights)


def test_index_maps_made_in_inference_mode_never_reach_autograd():
    """A full batch's index maps are kept across calls; those made under torch.inference_mode() (the Python API
    predicts so) must not be reused by a later training pass (inference tensors cannot be saved for backward)."""
    torch.manual_seed(0)
    encoder = ONLSTM(6, hidden_size=8, chunk_size=4)
    x = torch.randn(3, 5, 6)
    with torch.inference_mode():
        encoder(x)
    out = encoder(x.clone().requires_grad_())
    out.hidden.sum().backward()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("lengths", [pytest.param([4, 4, 4], marks=pytest.mark.slow), [4, 1, 3]])  # fast: ragged
def test_opcheck_of_the_operator(backend, lengths):
    """torch.library.opcheck: schema, fake tensor (meta) shapes, autograd registration, AOT dispatch (dynamic)."""
    torch.manual_seed(5)
    hidden, levels, features, dirs = 4, 2, 3, 2
    gates = 4 * hidden + 2 * levels
    x = torch.randn(len(lengths), max(lengths), features, requires_grad=True)
    weights = [torch.randn(*shape, requires_grad=True) for shape in
               ((dirs, gates, features), (dirs, gates), (dirs, gates, hidden))]
    args = (x, torch.tensor(lengths), *weights, None, None, False, backend, True)
    torch.library.opcheck(torch.ops.onlstm_tasks.onlstm_layer.default, args)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("used", OUTPUT_SUBSETS)
@pytest.mark.parametrize("lengths,carry", [([5, 5, 5], True), ([5, 1, 3], False)])
def test_eager_mode_gives_the_operators_outputs_and_gradients(backend, used, lengths, carry):
    """Eager mode runs the layer through a plain autograd.Function (less host time per call), the operator's own
    forward and backward: bit for bit the operator's results, whichever outputs the loss reads."""
    compare_eager_with_operator(backend, lengths, 2, False, carry, seed=3, used=OUTPUT_SUBSETS[used])


def _compile_and_compare(module, x, mask, loss_of):
    eager_out = module(x, mask)
    eager_grads = torch.autograd.grad(loss_of(eager_out), [x, *module.parameters()])
    compiled = torch.compile(module, fullgraph=True, dynamic=True)
    out = compiled(x, mask)
    grads = torch.autograd.grad(loss_of(out), [x, *module.parameters()])
    for got, want in zip((out.hidden, out.distances, out.input_distances, *grads),
                         (eager_out.hidden, eager_out.distances, eager_out.input_distances, *eager_grads)):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_torch_compile_fullgraph_of_the_encoder_equals_eager(backend, bidirectional):
    """torch.compile(fullgraph=True, dynamic=True) of a 2-layer ON-LSTM on a masked batch: forward and backward
    within 1e-4 of eager mode (one graph: no break, the layer operator taken whole)."""
    torch._dynamo.reset()
    torch.manual_seed(6)
    enc = ONLSTM(5, 8, 4, num_layers=2, bidirectional=bidirectional, dropout=0.0, backend=backend)
    x, mask = batch(torch.float32)
    x.requires_grad_()
    _compile_and_compare(enc, x, mask, lambda out: loss_fn(out.hidden, out.distances, out.input_distances))


@pytest.mark.slow
def test_torch_compile_of_a_tagger_training_step_equals_eager():
    """A whole NERTagger training step (embedder, bidirectional ON-LSTM, CRF likelihood, backward) compiled with
    fullgraph=True gives the eager loss and gradients."""
    from helpers.tree_data import EMBEDDER, tree_data

    from onlstm_tasks.tasks.ner import NERTagger

    torch._dynamo.reset()
    torch.manual_seed(7)
    dm = tree_data()
    tagger = NERTagger(dm.word_vocab, dm.char_vocab, dm.labels, embedder=EMBEDDER, dropout=0.0,
                       encoder=lambda n: ONLSTM(n, 8, 4, num_layers=2, bidirectional=True))
    batch = next(iter(dm.train_dataloader()))
    assert not batch.tokens.mask.all()  # a ragged batch

    def step():
        return tagger.net.loss(batch.tokens, batch.tags, None)

    eager = step()
    eager_grads = torch.autograd.grad(eager, list(tagger.parameters()))
    loss = torch.compile(step, fullgraph=True, dynamic=True)()
    grads = torch.autograd.grad(loss, list(tagger.parameters()))
    torch.testing.assert_close(loss, eager, rtol=0, atol=1e-4)
    for got, want in zip(grads, eager_grads):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bf16_autocast_runs_the_layer_in_float32(backend):
    """Under CPU bf16 autocast the layer gets bf16 inputs (a Linear below it), runs in the weights' float32 (the cell
    state too) and gives float32 outputs close to float32 mode; gradients reach the parameters in float32."""
    torch.manual_seed(8)
    below = torch.nn.Linear(5, 6)
    enc = ONLSTM(6, 8, 4, num_layers=2, bidirectional=True, backend=backend)
    x, mask = batch(torch.float32)
    want = enc(below(x), mask)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inputs = below(x)
        got = enc(inputs, mask)
    assert inputs.dtype == torch.bfloat16 and got.hidden.dtype == torch.float32
    torch.testing.assert_close(got.hidden, want.hidden, rtol=0, atol=3e-2)
    loss_fn(got.hidden, got.distances, got.input_distances).backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in enc.parameters())


@pytest.mark.parametrize("backend", BACKENDS + [pytest.param("triton", marks=[pytest.mark.triton, pytest.mark.slow])])
def test_autocast_reaches_no_operation_inside_the_layer(backend):
    """The layer runs wholly in float32 under autocast, its input projection too (under autocast a GEMM inside it
    would run in bf16, and the Triton kernels would read bf16 pre-activations, which a GPU's compiler refuses in
    the backward): with inputs that bf16 holds exactly, its outputs and gradients under autocast are float32's."""
    torch.manual_seed(9)
    enc = ONLSTM(5, 8, 4, bidirectional=True, backend=backend)
    x, mask = batch(torch.float32)
    x = x.bfloat16()

    def run():
        out = enc(x, mask)
        grads = torch.autograd.grad(loss_fn(out.hidden, out.distances, out.input_distances), list(enc.parameters()))
        return out.hidden, grads

    want, want_grads = run()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, got_grads = run()
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    for g, w in zip(got_grads, want_grads):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


@marked(*needs_compiled)
@pytest.mark.parametrize("p", [0.3, 0.5, 0.999])
def test_compiled_dropconnect_gives_the_pytorch_weights_and_gradients(p):
    """The same lanes give bit-identical masked weights and gradients on both back ends; sizes not a multiple of the
    vector width exercise the loop tails."""
    g = torch.Generator().manual_seed(5)
    params = [torch.randn(*shape, generator=g).requires_grad_() for shape in ((37, 5), (1, 3), (64, 16))]
    upstream = [torch.randn(w.shape, generator=g) for w in params]
    lanes = [random_lanes(w.numel()) for w in params]
    threshold, scale = keep_threshold(1 - p)
    results = []
    for apply in (_CompiledDropConnect.apply, _masked):
        weights = [apply(w, lane, threshold, scale) for w, lane in zip(params, lanes)]
        torch.autograd.backward(weights, upstream)
        results.append(([w.detach() for w in weights], [w.grad.clone() for w in params]))
        for w in params:
            w.grad = None
    (w_on, g_on), (w_off, g_off) = results
    for a, b in zip(w_on + g_on, w_off + g_off):
        assert torch.equal(a, b)
    for weight, w, grad, up in zip(params, w_on, g_on, upstream):
        kept = w != 0
        assert torch.equal(w[kept], weight.detach()[kept] * scale)
        assert torch.equal(grad[~kept], torch.zeros_like(grad[~kept]))
        assert torch.equal(grad[kept], up[kept] * scale)


def xoshiro128pp(state: list[int], count: int) -> list[int]:
    """The reference xoshiro128++ (Blackman & Vigna), one generator, in Python: ``count`` words from state
    ``[s0, s1, s2, s3]``."""
    def rotl(x, k):
        return ((x << k) | (x >> (32 - k))) & 0xFFFFFFFF
    s0, s1, s2, s3 = state
    out = []
    for _ in range(count):
        out.append((rotl((s0 + s3) & 0xFFFFFFFF, 7) + s0) & 0xFFFFFFFF)
        t = (s1 << 9) & 0xFFFFFFFF
        s2 ^= s0
        s3 ^= s1
        s1 ^= s2
        s0 ^= s3
        s2 ^= t
        s3 = rotl(s3, 11)
    return out


@marked(*needs_compiled)
@pytest.mark.parametrize("words", [1, 16, 37, 160])
def test_compiled_random_words_are_sixteen_interleaved_xoshiro128pp_generators(words):
    torch.manual_seed(words)
    streams = native_onlstm.STREAMS
    state = torch.randint(-2**31, 2**31, (4 * streams,), dtype=torch.int32)
    before = [v & 0xFFFFFFFF for v in state.tolist()]
    got = [v & 0xFFFFFFFF for v in native_onlstm.random_words(words, state).tolist()]
    for stream in range(streams):
        expected = xoshiro128pp(before[stream::streams], -(-words // streams))
        assert got[stream::streams] == expected[: len(got[stream::streams])]
    chunks = -(-words // streams)  # the state moved on by whole chunks of one word per generator
    again = [v & 0xFFFFFFFF for v in native_onlstm.random_words(streams, state).tolist()]
    assert again == [xoshiro128pp(before[s::streams], chunks + 1)[-1] for s in range(streams)]


@marked(*needs_compiled)
def test_compiled_dropconnect_is_used_only_where_it_applies_and_refuses_bad_lanes():
    w = torch.randn(6, 4)
    with pytest.raises(RuntimeError, match="int32 CPU state of 64 words"):
        native_onlstm.random_words(3, torch.zeros(63, dtype=torch.int32))
    assert type(drop_connect([w.requires_grad_()], 0.3, True)[0].grad_fn).__name__ == "_CompiledDropConnectBackward"
    assert type(drop_connect([w], 0.3, True, native_ops=False)[0].grad_fn).__name__ != "_CompiledDropConnectBackward"
    for other in (w.double(), w.detach().to(torch.bfloat16)):
        assert drop_connect([other], 0.3, True)[0].dtype == other.dtype  # the PyTorch mask instead
    assert drop_connect([w], 0.3, training=False)[0] is w
    with pytest.raises(RuntimeError, match="24 contiguous int16 lanes"):
        native_onlstm.masked(w.detach(), torch.zeros(23, dtype=torch.int16), 100, 1.0)


@marked(*needs_compiled)
def test_compiled_dropconnect_keeps_exactly_the_lanes_below_the_threshold():
    """Only the low 15 bits count, and the comparison is strict: a lane equal to the threshold is dropped."""
    threshold = 22938
    lanes = torch.tensor([threshold - 1, threshold, threshold + 1, 0, 0x7FFF, -0x8000 + threshold - 1,
                          -0x8000 + threshold, -1], dtype=torch.int16)
    out = native_onlstm.masked(torch.full((8,), 2.0), lanes, threshold, 1.5)
    assert out.tolist() == [3.0, 0.0, 0.0, 3.0, 0.0, 3.0, 0.0, 0.0]


@marked(*needs_cuda)
def test_cuda_bf16_autocast_keeps_float32_states():
    """Under bf16 autocast the layer operator runs in float32 (its inputs are cast up), so the cell state stays
    float32; the outputs stay close to float32 mode."""
    torch.manual_seed(1)
    enc = ONLSTM(5, 16, 4, num_layers=2, bidirectional=True).cuda()
    x, mask = batch(torch.float32)
    x, mask = x.cuda(), mask.cuda()
    with torch.no_grad():
        want = enc(x, mask).hidden
        with torch.autocast("cuda", dtype=torch.bfloat16):
            got = enc(x, mask).hidden
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=0, atol=5e-2)


@marked(*needs_cuda)
def test_cuda_torch_compile_fullgraph_of_the_encoder():
    torch._dynamo.reset()
    torch.manual_seed(6)
    enc = ONLSTM(5, 8, 4, num_layers=2, bidirectional=True).cuda()
    x, mask = batch(torch.float32)
    x = x.cuda().requires_grad_()
    _compile_and_compare(enc, x, mask.cuda(), lambda out: loss_fn(out.hidden.cpu(), out.distances.cpu(),
                                                                   out.input_distances.cpu()))


@pytest.mark.slow
def test_the_layer_call_benchmark_times_both_paths():
    """``scripts/benchmark_layer_call.py`` runs and prints, for each size and clock, the operator's and the eager
    path's time per call and their ratio."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, str(REPO / "scripts" / "benchmark_layer_call.py"), "--repeats", "3"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.split() for line in done.stdout.splitlines() if "operator / eager" in line]
    assert [row[:2] for row in rows] == [["tiny", "cpu"], ["tiny", "wall"], ["shipped", "cpu"], ["shipped", "wall"]]
    assert all(float(row[-1].rstrip("x")) > 0 for row in rows)
