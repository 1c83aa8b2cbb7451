"""The whole-loop path of the compiled ON-LSTM (a layer's time loop, recurrent products included, in one compiled
call per direction or half of the rows; ``onlstm_forward_loop`` / ``onlstm_backward_loop`` in ``_onlstm_step.c``)
against the reference cell, the float64 reference and the PyTorch loop, with one and with two threads (two threads
split the work: the directions of a bidirectional layer, the rows of a unidirectional one), and its matrix product
(``onlstm_pack`` / ``onlstm_product``) against PyTorch's.

The compiled code is float32 only, so its gradients are checked against the float64 reference cell's at float32
tolerance; the float64 ``gradcheck`` runs on the PyTorch loop (``test_onlstm_fast.test_gradcheck_through_the_function``
and ``test_state_carry``), which these tests tie the compiled paths to. Marked ``compiled`` as test_fused_step.py.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest
import torch
from test_fused_step import compiled_only, layer_args, on_path
from test_onlstm_fast import batch, compare_with_reference, loss_fn

from onlstm_tasks.encoders import ONLSTM
from onlstm_tasks.encoders.onlstm import compiled as compiled_step
from onlstm_tasks.encoders.onlstm import function, layer_pass
from onlstm_tasks.encoders.onlstm.function import ONLSTMCarryFunction, ONLSTMLayerFunction
from onlstm_tasks.encoders.onlstm.reference import reference_encode

MIXED = [7, 9, 1, 8, 9, 5, 2, 8, 9, 3]  # ten rows: a unidirectional layer is split over two threads


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"])
def threads(request):
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


@pytest.fixture(params=[True, False], ids=["projection-in-loop", "projection-first"])
def projection(request, monkeypatch):
    """Both ways the whole loop gets its input projection (layer_pass.project_in_loop), whatever the sizes."""
    monkeypatch.setattr(layer_pass, "PROJECT_IN_LOOP", request.param)
    return request.param


@pytest.fixture
def counted(monkeypatch):
    """Counts the whole-loop calls (forward, backward), so that a test knows the path really ran."""
    calls = {"forward": 0, "backward": 0}
    for cls, name in ((compiled_step.FusedSteps, "forward"), (compiled_step.FusedBackwardSteps, "backward")):
        original = cls.run_all

        def run_all(self, *args, _original=original, _name=name, **kwargs):
            calls[_name] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "run_all", run_all)
    return calls


@compiled_only
@pytest.mark.parametrize("master_input", ["paper", "symmetric"])
@pytest.mark.parametrize("bidirectional,num_layers", [(False, 1), (False, 2), (True, 1), (True, 2)])
@pytest.mark.parametrize("lengths", [MIXED, [9] * 10, [6, 3, 6, 2]], ids=["mixed", "full", "padding-at-the-end"])
def test_whole_loop_matches_the_reference_cell(threads, counted, master_input, bidirectional, num_layers, lengths):
    torch.manual_seed(0)
    enc = ONLSTM(5, 16, 4, num_layers=num_layers, bidirectional=bidirectional, master_input=master_input)
    x, mask = batch(torch.float32, lengths=lengths)
    with on_path("loop"):
        compare_with_reference(enc, x, mask)
    assert counted["forward"] == num_layers and counted["backward"] == num_layers


@compiled_only
@pytest.mark.parametrize("path", ["loop", "step", "pytorch"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("lengths", [MIXED, [9] * 10], ids=["mixed", "full"])
def test_inference_outputs_are_the_reference_cells_on_every_path(threads, path, bidirectional, lengths):
    """Without gradients the compiled step writes the distances itself and keeps the master gates in a scratch
    buffer; one direction over a full batch reads its inputs and writes its states batch-major, without gathers.
    All three paths give the reference cell's outputs, in contiguous tensors that callers may change in place."""
    torch.manual_seed(6)
    enc = ONLSTM(5, [16, 12], 4, num_layers=2, bidirectional=bidirectional, master_input="symmetric").eval()
    x, mask = batch(torch.float32, lengths=lengths)
    with on_path(path), torch.no_grad():
        out = enc(x, mask)
        ref = reference_encode(enc, x, mask)
    for got, want in zip((out.hidden, out.distances, out.input_distances), ref):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    for layer in out.layers:
        assert layer.is_contiguous()
    with on_path(path):
        hidden = enc(x.requires_grad_(), mask).hidden
    hidden.mul_(2.0)  # an output the caller changes in place (as an in-place dropout would)
    hidden.sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


@compiled_only
@pytest.mark.parametrize("bidirectional,num_layers", [(False, 2), (True, 2)])
@pytest.mark.parametrize("lengths", [MIXED, [9] * 10], ids=["mixed", "full"])
def test_whole_loop_gradients_are_the_float64_references(threads, projection, bidirectional, num_layers, lengths):
    """Outputs and gradients of the float32 whole loop against the float64 reference cell (same weights): within
    float32 rounding. The float64 gradcheck of the same equations runs on the PyTorch loop. Full batches of one
    direction run on batch-major buffers (see LayerPass)."""
    torch.manual_seed(3)
    enc = ONLSTM(5, 16, 4, num_layers=num_layers, bidirectional=bidirectional)
    enc64 = copy.deepcopy(enc).double()
    x, mask = batch(torch.float64, lengths=lengths)
    x32 = x.float().requires_grad_()
    x64 = x.clone().requires_grad_()
    with on_path("loop"):
        out = enc(x32, mask)
        outputs = (out.hidden, out.distances, out.input_distances)
        # the loss's random weights in float64 for both (loss_fn draws them in the outputs' dtype)
        grads = torch.autograd.grad(loss_fn(*(o.double() for o in outputs)), [x32, *enc.parameters()])
    ref = reference_encode(enc64, x64, mask)
    ref_grads = torch.autograd.grad(loss_fn(*ref), [x64, *enc64.parameters()])
    for got, want in zip(outputs, ref):
        torch.testing.assert_close(got.double(), want, rtol=0, atol=1e-5)
    names = ["x", *(n for n, _ in enc.named_parameters())]
    for name, got, want in zip(names, grads, ref_grads):
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4, msg=lambda m: f"gradient of {name}: {m}")


@compiled_only
@pytest.mark.parametrize("lengths,bidirectional", [(MIXED, True), ([9] * 10, False), ([9] * 10, True)],
                         ids=["mixed-bi", "full-uni", "full-bi"])
def test_gradients_through_the_compiled_product(threads, monkeypatch, lengths, bidirectional):
    """The input and weight gradients through the compiled product (used for wide layers, see function._input_grad
    and _weight_grads), forced here for narrow ones, against the float64 reference cell: gathered rows (mixed
    lengths), batch-major rows (one direction's full batch) and time-major ones (both directions' full batch)."""
    monkeypatch.setattr(function, "COMPILED_GRAD_WIDTH", 0)
    torch.manual_seed(4)
    enc = ONLSTM(5, 16, 4, num_layers=2, bidirectional=bidirectional)
    enc64 = copy.deepcopy(enc).double()
    x, mask = batch(torch.float64, lengths=lengths)
    x32, x64 = x.float().requires_grad_(), x.clone().requires_grad_()
    with on_path("loop"):
        out = enc(x32, mask)
        got = torch.autograd.grad(loss_fn(out.hidden.double(), out.distances.double(), out.input_distances.double()),
                                  [x32, *enc.parameters()])
    want = torch.autograd.grad(loss_fn(*reference_encode(enc64, x64, mask)), [x64, *enc64.parameters()])
    names = ["x", *(n for n, _ in enc.named_parameters())]
    for name, g, w in zip(names, got, want):
        torch.testing.assert_close(g.double(), w, rtol=1e-4, atol=1e-4, msg=lambda m: f"gradient of {name}: {m}")


@compiled_only
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("dirs", [1, 2])
def test_whole_loop_carries_state_like_the_pytorch_loop(threads, counted, projection, symmetric, dirs):
    """The carry Function (a language model's windows) from a nonzero state: outputs, final cell and every
    gradient, the final cell's included, as the PyTorch loop computes them."""
    steps, rows, hidden, levels = 6, 10, 24, 3
    args = [a.requires_grad_() for a in layer_args(dirs, steps, rows, 7, hidden, levels, seed=8)]
    g = torch.Generator().manual_seed(9)
    state = (torch.randn(dirs, rows, hidden, generator=g), torch.randn(dirs, rows, hidden, generator=g))
    w_h, w_c = torch.randn(dirs, steps, rows, hidden, generator=g), torch.randn(dirs, rows, hidden, generator=g)
    results = []
    for path in ("loop", "pytorch"):
        with on_path(path):
            h, d_forget, d_input, c_last = ONLSTMCarryFunction.apply(*args, symmetric, *state)
            loss = (h * w_h).sum() + (c_last * w_c).sum() + d_forget.sum() + d_input.pow(2).sum()
            results.append(((h, d_forget, d_input, c_last), torch.autograd.grad(loss, args)))
    (outs, grads), (want_outs, want_grads) = results
    # float32 both, but the whole loop sums bias, input and recurrent products in its own order
    for got, want in zip((*outs, *grads), (*want_outs, *want_grads)):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert counted == {"forward": 1, "backward": 1}


@compiled_only
def test_encoder_stream_windows_on_the_whole_loop(threads):
    """ONLSTM with state carry (LM stream mode): two windows chained by the state equal one run over both, and the
    per-step path, in inference and in training."""
    torch.manual_seed(4)
    enc = ONLSTM(5, [16, 8], 4, num_layers=2)
    x = torch.randn(10, 12, 5)
    with on_path("loop"), torch.no_grad():
        whole = enc(x).hidden
        first = enc(x[:, :6])
        second = enc(x[:, 6:], state=first.state)
    torch.testing.assert_close(torch.cat((first.hidden, second.hidden), 1), whole, rtol=0, atol=1e-5)
    grads = []
    for path in ("loop", "step"):
        with on_path(path):
            out = enc(x[:, 6:].requires_grad_(), state=first.state)
            grads.append(torch.autograd.grad(out.hidden.pow(2).sum(), list(enc.parameters())))
    for got, want in zip(*grads):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@compiled_only
def test_whole_loop_with_dropconnect_matches_the_reference_on_the_sampled_weights(threads):
    torch.manual_seed(5)
    enc = ONLSTM(5, 16, 4, bidirectional=True, dropconnect=0.3).train()
    x, mask = batch(torch.float32, lengths=MIXED)
    with on_path("loop"):
        torch.manual_seed(6)
        weights = enc.recurrent_weights()  # what a forward pass under this seed samples

        def fast(x):
            torch.manual_seed(6)
            return enc(x, mask)

        compare_with_reference(enc, x, mask, recurrent_weights=weights, fast_out=fast)


@compiled_only
@pytest.mark.parametrize("batch_sizes", [[8, 8, 7, 6, 6, 3, 1, 0], [1] * 4, [20] * 3])
def test_layer_function_on_both_compiled_paths(threads, projection, batch_sizes):
    """The layer Function straight: every output and gradient of the whole loop equals the per-step path's."""
    steps, rows = len(batch_sizes), batch_sizes[0]
    args = [a.requires_grad_() for a in layer_args(1, steps, rows, 7, 24, 3, seed=10)]
    weights = torch.randn(1, steps, rows, 24, generator=torch.Generator().manual_seed(11))
    results = []
    for path in ("loop", "step"):
        with on_path(path):
            h, d_forget, d_input = ONLSTMLayerFunction.apply(*args, batch_sizes, False)
            loss = (h * weights).sum() + d_forget.sum() + d_input.sum()
            results.append((h, d_forget, d_input, *torch.autograd.grad(loss, args)))
    for got, want in zip(*results):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_loop_pieces_share_the_work_without_synchronisation():
    full = [32] * 40
    assert compiled_step.loop_pieces(1, full, threads=1) == [(0, 1, 0, 32)]
    assert compiled_step.loop_pieces(2, full, threads=1) == [(0, 2, 0, 32)]
    assert compiled_step.loop_pieces(2, full, threads=2) == [(0, 1, 0, 32), (1, 2, 0, 32)]
    assert compiled_step.loop_pieces(1, full, threads=2) == [(0, 1, 0, 16), (0, 1, 16, 32)]
    assert compiled_step.loop_pieces(2, full, threads=4) == [(0, 1, 0, 16), (0, 1, 16, 32), (1, 2, 0, 16),
                                                              (1, 2, 16, 32)]
    # rows of about equal work: row r of 32 runs 32 - r steps; the first 10 rows do just over half of it
    assert compiled_step.loop_pieces(1, list(range(32, 0, -1)), threads=2) == [(0, 1, 0, 10), (0, 1, 10, 32)]
    # never fewer than MIN_PIECE_ROWS rows a piece
    assert compiled_step.loop_pieces(1, [10] * 5 + [2] * 10, threads=4) == [(0, 1, 0, 4), (0, 1, 4, 10)]
    assert compiled_step.loop_pieces(1, [5] * 3, threads=2) == [(0, 1, 0, 5)]
    assert compiled_step.loop_pieces(1, [9] * 3, threads=8) == [(0, 1, 0, 5), (0, 1, 5, 9)]


@compiled_only
@pytest.mark.parametrize("rows", [1, 2, 5, 6, 7, 13, 32])
@pytest.mark.parametrize("depth,n", [(3, 16), (6, 30), (256, 1088), (300, 17), (600, 47)])
def test_the_compiled_product_is_pytorchs(rows, depth, n):
    """c += a B through the packed weights: every register block (1..6 rows: blocks of about equal rows, e.g. 4 + 3
    for 7, 6 + 6 + 5 + 5 + 5 + 5 for 32), edge panels (n not a multiple of
    16), long depths, rows of a and c at strides wider than their widths, and B packed both from a contiguous matrix
    and from a transposed view (as the forward packs its weights)."""
    g = torch.Generator().manual_seed(rows * 1000 + depth + n)
    a = torch.randn(rows, depth + 5, generator=g)[:, 2 : depth + 2]
    for b in (torch.randn(depth, n, generator=g), torch.randn(n, depth, generator=g).t()):
        c = torch.randn(rows, n + 3, generator=g)[:, :n]
        want = c.double() + a.double() @ b.double()
        compiled_step.product(c, a, compiled_step.packed(b[None])[0])
        torch.testing.assert_close(c.double(), want, rtol=1e-5, atol=1e-5 * depth ** 0.5)


@compiled_only
@pytest.mark.parametrize("rows,n", [(7, 30), (32, 1088), (5, 47)])
@pytest.mark.parametrize("inputs,hidden", [(9, 20), (300, 250)], ids=["one-pass", "in-passes"])
def test_the_compiled_product_of_a_step(rows, n, inputs, hidden):
    """The forward's form: c = bias + x W_ih + h W_hh, weights packed from transposed views with a scale per column
    (as layer_pass packs them); c's old values are overwritten. Shallow terms take one pass, deep ones several."""
    g = torch.Generator().manual_seed(rows + n)
    x, h = torch.randn(rows, inputs, generator=g), torch.randn(rows, hidden, generator=g)
    w_ih, w_hh = torch.randn(n, inputs, generator=g), torch.randn(n, hidden, generator=g)
    bias = torch.randn(n, generator=g)
    scale = torch.randn(n, generator=g)
    c = torch.full((rows, n), float("nan"))
    compiled_step.product(c, x, compiled_step.packed(w_ih.t()[None], scale)[0], h,
                          compiled_step.packed(w_hh.t()[None], scale)[0], init=bias)
    want = bias.double() + x.double() @ (w_ih.double() * scale.double()[:, None]).t() \
        + h.double() @ (w_hh.double() * scale.double()[:, None]).t()
    torch.testing.assert_close(c.double(), want, rtol=1e-5, atol=1e-5 * (inputs + hidden) ** 0.5)


@compiled_only
@pytest.mark.parametrize("rows,depth,n", [(250, 300, 47), (7, 20, 16), (121, 1150, 90)])
def test_the_compiled_projection_is_pytorchs(threads, rows, depth, n):
    """act[k] = bias[k] + x[k] W_k for two directions at once, in chunks of 120 rows (a last chunk of fewer, one
    chunk only), shallow (one pass) and deep (passes), on one thread and on a team of two; act's rows wider than G and
    x's rows wider than D, as views of larger buffers are."""
    g = torch.Generator().manual_seed(rows + depth + n)
    x = torch.randn(2, rows, depth + 3, generator=g)[..., :depth]
    w, bias = torch.randn(2, depth, n, generator=g), torch.randn(2, n, generator=g)
    act = torch.full((2, rows, n + 5), float("nan"))[..., :n]
    compiled_step.project(act, x, compiled_step.packed(w), bias)
    want = bias.double()[:, None] + x.double() @ w.double()
    torch.testing.assert_close(act.double(), want, rtol=1e-5, atol=1e-5 * depth ** 0.5)
    with pytest.raises(ValueError, match="packed"):
        compiled_step.project(act, x, compiled_step.packed(w[:, 1:]), bias)  # packed for depth - 1


@compiled_only
def test_packed_weights_hold_panels_of_16_columns():
    b = torch.arange(3 * 20, dtype=torch.float32).view(3, 20)
    p = compiled_step.packed(torch.stack((b, -b)))
    assert p.shape == (2, 2 * 16 * 3)
    first, second = p[0].view(2, 3, 16)
    assert torch.equal(first, b[:, :16]) and torch.equal(second[:, :4], b[:, 16:]) and not second[:, 4:].any()
    assert torch.equal(p[1], -p[0])


@compiled_only
def test_the_whole_loop_is_used_only_where_it_applies():
    with compiled_step.switched(True, loop=True):  # whatever the environment says
        assert compiled_step.loop_usable(torch.zeros(1))
        assert not compiled_step.loop_usable(torch.zeros(1, dtype=torch.float64))
    with compiled_step.switched(True, loop=False):
        assert not compiled_step.loop_usable(torch.zeros(1)) and compiled_step.usable(torch.zeros(1))
    with compiled_step.switched(False):
        assert not compiled_step.loop_usable(torch.zeros(1))
    code = "from onlstm_tasks.encoders.onlstm import compiled; import torch; x = torch.zeros(1); " \
           "print(compiled.loop_usable(x), compiled.usable(x))"
    env = {**os.environ, compiled_step.LOOP_ENV: "0", compiled_step.ENV: "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]


def test_index_maps_made_in_inference_mode_never_reach_autograd():
    """A full batch's index maps are kept across forward passes; those made under torch.inference_mode() (the Python
    API predicts so) must not be reused by a later training pass (inference tensors cannot be saved for backward)."""
    torch.manual_seed(0)
    encoder = ONLSTM(6, hidden_size=8, chunk_size=4)
    x = torch.randn(3, 5, 6)
    with torch.inference_mode():
        encoder(x)
    out = encoder(x.clone().requires_grad_())
    out.hidden.sum().backward()


def test_the_input_projection_runs_in_the_loop_when_its_weights_are_small(monkeypatch):
    monkeypatch.setattr(layer_pass, "PROJECT_IN_LOOP", None)
    small, ner = 4 * 128 + 2 * 16, 4 * 256 + 2 * 32
    assert layer_pass.project_in_loop(1, 64, 128, small, threads=1)  # 0.4 MiB
    assert layer_pass.project_in_loop(2, 256, 128, small, threads=2)  # one direction a thread: 0.8 MiB
    assert not layer_pass.project_in_loop(2, 256, 128, small, threads=1)  # both directions on one thread: 1.6 MiB
    assert not layer_pass.project_in_loop(1, 128, 256, ner, threads=1)  # a NER layer: 1.6 MiB
    assert not layer_pass.project_in_loop(1, 1150, 1150, 4 * 1150 + 230, threads=2)  # the LM's middle layer
    monkeypatch.setattr(layer_pass, "PROJECT_IN_LOOP", True)
    assert layer_pass.project_in_loop(1, 128, 256, ner, threads=2)


@compiled_only
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("runner", ["openmp", "pool"])
def test_loop_pieces_run_on_openmp_workers_or_a_pool(monkeypatch, runner, bidirectional):
    """With two threads the pieces run on PyTorch's OpenMP workers (GOMP_parallel found beside PyTorch) or, where
    there is none, on a thread pool of our own; both give the reference cell's results."""
    pool_calls = []
    original = compiled_step._run_pieces
    monkeypatch.setattr(compiled_step, "_run_pieces", lambda fn, calls: (pool_calls.append(len(calls)),
                                                                          original(fn, calls)))
    if runner == "pool":
        monkeypatch.setattr(compiled_step, "_PARALLEL", None)
    elif compiled_step._PARALLEL is None:
        pytest.skip("no OpenMP runtime beside PyTorch (a build with another parallel back end)")
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.manual_seed(0)
        enc = ONLSTM(5, 16, 4, bidirectional=bidirectional)
        x, mask = batch(torch.float32, lengths=MIXED)
        with on_path("loop"):
            compare_with_reference(enc, x, mask)
    finally:
        torch.set_num_threads(before)
    assert (pool_calls and max(pool_calls) == 2) if runner == "pool" else all(n == 1 for n in pool_calls)


@compiled_only
def test_packing_on_two_threads_is_packing_on_one(threads):
    """With two threads packed() cuts each matrix into ranges of panels on PyTorch's OpenMP workers."""
    g = torch.Generator().manual_seed(12)
    w, scale = torch.randn(2, 70, 30, generator=g).transpose(1, 2), torch.randn(70, generator=g)
    got = compiled_step.packed(w, scale)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        want = compiled_step.packed(w, scale)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(got, want)
    assert torch.equal(want[1].view(5, 30, 16)[0, :, :3], (w[1] * scale)[:, :3])
