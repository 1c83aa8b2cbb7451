"""The compiled ON-LSTM step (``_onlstm_step.c`` via compiled.py) against the PyTorch loop and the reference cell,
which applies the one written definition of the equations (``encoders/onlstm/equations.py``, ``onlstm_update``).

Marked ``compiled``: skipped where the C file was not built (no compiler at install time); ``.ci/run`` sets
ONLSTM_REQUIRE_COMPILED=1, which turns such a skip into a failure. The PyTorch loop is tested in float32 here too,
since float32 layers on the CPU otherwise run the compiled step.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from test_onlstm_fast import batch, compare_with_reference

from onlstm_tasks.encoders import ONLSTM
from onlstm_tasks.encoders.onlstm import compiled as compiled_step
from onlstm_tasks.encoders.onlstm.dropconnect import _CompiledDropConnect, _masked, drop_connect, keep_threshold, random_lanes
from onlstm_tasks.encoders.onlstm.function import ONLSTMCarryFunction, ONLSTMLayerFunction, onlstm_layer
from onlstm_tasks.encoders.onlstm.layer_pass import LayerPass

NOT_BUILT = "the compiled ON-LSTM step was not built (no C compiler at install time?)"
needs_compiled = [pytest.mark.compiled, pytest.mark.skipif(not compiled_step.built(), reason=NOT_BUILT)]
# the three back ends of a layer pass: the whole time loop in one compiled call ("loop"), one compiled call per step
# ("step"), PyTorch operations ("pytorch")
PATHS = [pytest.param("loop", marks=needs_compiled, id="whole-loop"),
         pytest.param("step", marks=needs_compiled, id="per-step"), pytest.param("pytorch", id="pytorch")]
COMPILED_PATHS = ["loop", "step"]


def on_path(path: str):
    """The switch that selects one of :data:`PATHS`."""
    return compiled_step.switched(path != "pytorch", loop=path == "loop")


def compiled_only(test):
    for mark in reversed(needs_compiled):
        test = mark(test)
    return test


def layer_args(dirs, steps, rows, features, hidden, levels, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    gates = 4 * hidden + 2 * levels
    shapes = ((dirs, steps, rows, features), (dirs, gates, features), (dirs, gates), (dirs, gates, hidden))
    return [torch.randn(*shape, generator=g) * scale for shape in shapes]


def run_layer(path: str, args, batch_sizes, symmetric, save, state=None):
    with on_path(path), torch.no_grad():
        h_init, c_init = state if state is not None else (None, None)
        return LayerPass(*args, batch_sizes, symmetric, save=save, h_init=h_init, c_init=c_init)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("master_input", ["paper", "symmetric"])
@pytest.mark.parametrize("bidirectional,num_layers", [(False, 1), (True, 2)])
def test_every_step_path_matches_the_reference_in_float32(path, master_input, bidirectional, num_layers):
    torch.manual_seed(0)
    enc = ONLSTM(5, 16, 4, num_layers=num_layers, bidirectional=bidirectional, master_input=master_input)
    with on_path(path):
        for lengths in ([7, 9, 1, 8, 9, 5, 2, 8], [9] * 4):
            x, mask = batch(torch.float32, lengths=lengths)
            compare_with_reference(enc, x, mask)


@compiled_only
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("dirs", [1, 2])
@pytest.mark.parametrize("save", [False, True])
@pytest.mark.parametrize("batch_sizes,with_state", [([8, 8, 7, 6, 6, 3, 1, 0], False), ([5] * 6, False),
                                                    ([5] * 6, True)])
@pytest.mark.parametrize("hidden,levels", [(24, 3), (13, 13), (13, 1)])  # odd sizes: vector loop tails
@pytest.mark.parametrize("path", COMPILED_PATHS)
def test_compiled_step_writes_what_the_pytorch_loop_writes(symmetric, dirs, save, batch_sizes, with_state, hidden,
                                                           levels, path):
    steps, rows = len(batch_sizes), batch_sizes[0]
    args = layer_args(dirs, steps, rows, 7, hidden, levels, seed=1)
    state = None
    if with_state:
        g = torch.Generator().manual_seed(2)
        state = (torch.randn(dirs, rows, hidden, generator=g), torch.randn(dirs, rows, hidden, generator=g))
    compiled, plain = (run_layer(p, args, batch_sizes, symmetric, save, state) for p in (path, "pytorch"))
    # the whole loop sums bias, input and recurrent products in its own order (float32 rounding, no more)
    tol = 1e-4 if path == "loop" else 1e-5
    for got, want in zip(compiled.outputs, plain.outputs):
        torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    if with_state:
        torch.testing.assert_close(compiled.final_cell(), plain.final_cell(), rtol=tol, atol=tol)
    if save:  # every buffer the backward reads, at the (step, row) pairs that were computed
        names = ["acts", "masters", "probs", "cells", "tanh_c", "eff", "omega"]
        for name, got, want in zip(names, compiled.saved, plain.saved):
            for t, n in enumerate(compiled.rows_at):
                if name == "cells":  # 2 [c^_t, c_{t-1}] at t; 2 c_t at [t + 1, 1]
                    got_t, want_t = (torch.cat((c[:, t, :n].flatten(-2), c[:, t + 1, :n, 1]), -1) for c in (got, want))
                else:
                    got_t, want_t = got[:, t, :n], want[:, t, :n]
                torch.testing.assert_close(got_t, want_t, rtol=tol, atol=tol, msg=lambda m: f"{name}, step {t}: {m}")


@compiled_only
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("dirs", [1, 2])
@pytest.mark.parametrize("batch_sizes,carry", [([8, 8, 7, 6, 6, 3, 1, 0], False), ([5] * 6, True)])
@pytest.mark.parametrize("hidden,levels", [(24, 3), (13, 13), (13, 1)])
@pytest.mark.parametrize("distances", [True, False], ids=["with-distance-loss", "hidden-only"])
@pytest.mark.parametrize("path", COMPILED_PATHS)
def test_compiled_backward_gives_the_pytorch_gradients(symmetric, dirs, batch_sizes, carry, hidden, levels,
                                                       distances, path):
    """Gradients of every input through the compiled step's backward vs the PyTorch loop's: ragged rows, both
    directions, a cell state carried out of the window (its gradient flows back in), with and without a loss on
    the distances (the constant share of the master gates' gradient)."""
    steps, rows = len(batch_sizes), batch_sizes[0]
    args = [a.requires_grad_() for a in layer_args(dirs, steps, rows, 7, hidden, levels, seed=5)]
    g = torch.Generator().manual_seed(6)
    state = (torch.randn(dirs, rows, hidden, generator=g), torch.randn(dirs, rows, hidden, generator=g))
    w_h, w_f, w_c = (torch.randn(dirs, steps, rows, hidden, generator=g), torch.randn(dirs, steps, rows, generator=g),
                     torch.randn(dirs, rows, hidden, generator=g))
    grads = []
    for p in (path, "pytorch"):
        with on_path(p):
            if carry:
                h, d_forget, d_input, c_last = ONLSTMCarryFunction.apply(*args, symmetric, *state)
                loss = (h * w_h).sum() + (c_last * w_c).sum()
            else:
                h, d_forget, d_input = ONLSTMLayerFunction.apply(*args, batch_sizes, symmetric)
                loss = (h * w_h).sum()
            if distances:
                loss = loss + (d_forget * w_f).sum() + d_input.pow(2).sum()
            grads.append(torch.autograd.grad(loss, args))
    for name, got, want in zip(["x", "weight_ih", "bias", "weight_hh"], *grads):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=lambda m: f"gradient of {name}: {m}")


@compiled_only
@pytest.mark.parametrize("scale", [30.0, 1e4, 1e15])  # pre-activations up to ~1e30
@pytest.mark.parametrize("path", COMPILED_PATHS)
def test_saturated_gates_agree_and_stay_finite(scale, path):
    """Pre-activations far beyond the exponential's range saturate every gate the way torch.sigmoid does."""
    args = layer_args(2, 5, 4, 6, 16, 4, seed=3, scale=scale)
    results = []
    for p in (path, "pytorch"):
        with on_path(p), torch.no_grad():
            results.append(onlstm_layer(*args, [4] * 5, False))
    for got, want in zip(*results):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@compiled_only
@pytest.mark.parametrize("path", COMPILED_PATHS)
def test_nan_propagates_as_in_pytorch(path):
    """A NaN weight (a diverged run) must show as NaN, never be clamped into a plausible number."""
    args = layer_args(1, 4, 3, 5, 8, 2, seed=4)
    args[3][0, 20, 2] = float("nan")  # one recurrent weight of the cell candidate's block
    results = []
    for p in (path, "pytorch"):
        with on_path(p), torch.no_grad():
            results.append(onlstm_layer(*args, [3] * 4, False)[0])
    assert torch.equal(results[0].isnan(), results[1].isnan())
    assert results[0].isnan().any() and not results[0][:, 0].isnan().any()


@compiled_only
def test_the_compiled_step_is_used_only_where_it_applies():
    with compiled_step.switched(True):
        assert compiled_step.usable(torch.zeros(1))
        assert not compiled_step.usable(torch.zeros(1, dtype=torch.float64))
    with compiled_step.switched(False):
        assert not compiled_step.usable(torch.zeros(1))
    code = "from onlstm_tasks.encoders.onlstm import compiled; import torch; print(compiled.usable(torch.zeros(1)))"
    env = {**os.environ, compiled_step.ENV: "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_buffers_the_compiled_step_cannot_read_are_refused():
    with pytest.raises(ValueError, match="float32 CPU buffers"):
        compiled_step.strided(torch.zeros(1, 2, 3, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="float32 CPU buffers"):
        compiled_step.strided(torch.zeros(1, 2, 4, 3).transpose(-1, -2))
    with pytest.raises(ValueError, match=r"\[K, T, B, n\] or \[K, B, n\]"):
        compiled_step.strided(torch.zeros(2, 3))


@compiled_only
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
    dropped = torch.cat([(w == 0).flatten() for w in w_on]).float().mean()
    assert 0 < dropped < 1 if p < 0.9 else dropped > 0.9
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


@compiled_only
@pytest.mark.parametrize("words", [1, 16, 37, 160])
def test_compiled_random_words_are_sixteen_interleaved_xoshiro128pp_generators(words):
    torch.manual_seed(words)
    state = torch.randint(-2**31, 2**31, (4 * compiled_step.STREAMS,), dtype=torch.int32)
    before = [v & 0xFFFFFFFF for v in state.tolist()]
    got = [v & 0xFFFFFFFF for v in compiled_step.random_words(words, state).tolist()]
    streams = compiled_step.STREAMS
    for stream in range(streams):
        expected = xoshiro128pp(before[stream::streams], -(-words // streams))
        assert got[stream::streams] == expected[: len(got[stream::streams])]
    # the state moved on by whole chunks of one word per generator
    chunks = -(-words // streams)
    again = [v & 0xFFFFFFFF for v in compiled_step.random_words(streams, state).tolist()]
    assert again == [xoshiro128pp(before[s::streams], chunks + 1)[-1] for s in range(streams)]


@compiled_only
def test_compiled_dropconnect_is_used_only_where_it_applies_and_refuses_bad_lanes():
    w = torch.randn(6, 4)
    with pytest.raises(ValueError, match="int32 CPU state of 64 words"):
        compiled_step.random_words(3, torch.zeros(63, dtype=torch.int32))
    assert type(drop_connect([w.requires_grad_()], 0.3, True)[0].grad_fn).__name__ == "_CompiledDropConnectBackward"
    for other in (w.double(), w.detach().to(torch.bfloat16)):
        assert drop_connect([other], 0.3, True)[0].dtype == other.dtype  # the PyTorch mask instead
    assert drop_connect([w], 0.3, training=False)[0] is w
    with pytest.raises(ValueError, match="24 contiguous int16 lanes"):
        compiled_step.masked(w.detach(), torch.zeros(23, dtype=torch.int16), 100, 1.0)
    with pytest.raises(ValueError, match="float32 CPU"):
        compiled_step.masked(w.detach().double(), torch.zeros(24, dtype=torch.int16), 100, 1.0)


@compiled_only
def test_compiled_dropconnect_keeps_exactly_the_lanes_below_the_threshold():
    """Only the low 15 bits count (the top lane of a random word never has its sign bit, the others may), and the
    comparison is strict: a lane equal to the threshold is dropped."""
    threshold = 22938
    lanes = torch.tensor([threshold - 1, threshold, threshold + 1, 0, 0x7FFF, -0x8000 + threshold - 1,
                          -0x8000 + threshold, -1], dtype=torch.int16)
    out = compiled_step.masked(torch.full((8,), 2.0), lanes, threshold, 1.5)
    assert out.tolist() == [3.0, 0.0, 0.0, 3.0, 0.0, 3.0, 0.0, 0.0]
