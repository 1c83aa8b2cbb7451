"""State carry across the windows of a contiguous stream (truncated BPTT): :class:`StatefulEncoder` encoders.

Oracles: one run over 2T steps against two runs of T steps chained by the state; the plain reference cell started
from the same state (forward and gradients, float64); ``gradcheck`` of the fast path's Function from a nonzero
initial state; runs of each row alone for the paths that carry no state.
"""

import re

import pytest
import torch

from onlstm_tasks.encoders import GRU, LSTM, ONLSTM
from onlstm_tasks.encoders.base import StatefulEncoder, detach_state
from onlstm_tasks.encoders.onlstm.layer_op import run_layer
from onlstm_tasks.encoders.onlstm.reference import reference_step
from onlstm_tasks.trees.source import HasDistances

TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-10}
FEATURES = 5

ENCODERS = {
    "onlstm-paper": lambda: ONLSTM(FEATURES, 12, 3, master_input="paper"),
    "onlstm-symmetric": lambda: ONLSTM(FEATURES, 12, 3, master_input="symmetric"),
    "onlstm-2-paper": lambda: ONLSTM(FEATURES, [12, 8], 4, num_layers=2, master_input="paper"),
    "onlstm-2-symmetric": lambda: ONLSTM(FEATURES, 12, 3, num_layers=2, master_input="symmetric"),
    "lstm": lambda: LSTM(FEATURES, 8),
    "lstm-2": lambda: LSTM(FEATURES, 8, num_layers=2),
    "gru": lambda: GRU(FEATURES, 8),
    "gru-2": lambda: GRU(FEATURES, 8, num_layers=2),
}


def stream(dtype, batch=3, steps=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, steps, FEATURES, generator=g, dtype=dtype)


def build(name, dtype, mode):
    """``mode``: ``eval`` (run under no_grad: the fast path's scratch buffers) or ``train`` (dropout 0, with
    gradients: the autograd Function and its saved buffers)."""
    torch.manual_seed(0)
    enc = ENCODERS[name]().to(dtype)
    return enc.train() if mode == "train" else enc.eval()


def run(enc, mode, x, mask=None, state=None):
    with torch.set_grad_enabled(mode == "train"):
        return enc(x.requires_grad_(mode == "train"), mask, state=state)


def assert_outputs_close(got, want, tol):
    torch.testing.assert_close(got.hidden, want.hidden, rtol=0, atol=tol)
    assert len(got.layers) == len(want.layers)
    for a, b in zip(got.layers, want.layers):
        torch.testing.assert_close(a, b, rtol=0, atol=tol)
    assert type(got) is type(want)
    if isinstance(got, HasDistances):
        for a, b in ((got.distances, want.distances), (got.input_distances, want.input_distances)):
            torch.testing.assert_close(a, b, rtol=0, atol=tol)


def assert_states_close(got, want, tol):
    assert len(got) == len(want)
    for layer_got, layer_want in zip(got, want):
        assert len(layer_got) == len(layer_want)
        for a, b in zip(layer_got, layer_want):
            torch.testing.assert_close(a, b, rtol=0, atol=tol)


def cat_windows(first, second):
    """The outputs of two consecutive windows joined along time, as one run over both would return them."""
    joined = {"hidden": torch.cat((first.hidden, second.hidden), 1),
              "layers": tuple(torch.cat((a, b), 1) for a, b in zip(first.layers, second.layers))}
    if isinstance(first, HasDistances):
        joined.update(distances=torch.cat((first.distances, second.distances), -1),
                      input_distances=torch.cat((first.input_distances, second.input_distances), -1))
    return type(first)(**joined)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize("name", ENCODERS)
def test_two_windows_chained_by_the_state_equal_one_run(name, mode, dtype):
    enc = build(name, dtype, mode)
    assert isinstance(enc, StatefulEncoder)
    x, tol = stream(dtype), TOLERANCE[dtype]
    whole = run(enc, mode, x.clone())
    first = run(enc, mode, x[:, :4].clone())
    second = run(enc, mode, x[:, 4:].clone(), state=detach_state(first.state))
    assert_outputs_close(cat_windows(first, second), whole, tol)
    assert_states_close(second.state, whole.state, tol)
    for out in (whole, first, second):  # one (h, c) per layer (GRU: (h,)), h the layer's last step
        assert len(out.state) == enc.num_layers
        for layer, layer_state in enumerate(out.state):
            assert len(layer_state) == (1 if isinstance(enc, GRU) else 2)
            torch.testing.assert_close(layer_state[0], out.layers[layer][:, -1], rtol=0, atol=tol)
    # an all-True mask is a full batch too
    with_mask = run(enc, mode, x[:, 4:].clone(), torch.ones(3, 4, dtype=torch.bool), detach_state(first.state))
    assert_outputs_close(with_mask, second, tol)
    assert_states_close(with_mask.state, second.state, tol)


def reference_window(enc, x, state=None):
    """The oracle for a unidirectional :class:`ONLSTM` from ``state`` (None: zeros): each row alone, each layer in
    turn, :func:`reference_step` at every step. Returns (hidden, distances, input distances, final state)."""
    batch, steps, _ = x.shape
    rows, finals = [], [[[], []] for _ in range(enc.num_layers)]
    dist_f = [[None] * batch for _ in range(enc.num_layers)]
    dist_i = [[None] * batch for _ in range(enc.num_layers)]
    for b in range(batch):
        layer_input = x[b]
        for layer in range(enc.num_layers):
            cell = enc.cell(layer)
            if state is None:
                h = c = x.new_zeros(cell.hidden_size)
            else:
                h, c = state[layer][0][b], state[layer][1][b]
            hs, dfs, dis = [], [], []
            for t in range(steps):
                h, c, d_f, d_i = reference_step(layer_input[t], h, c, cell.weight_ih, cell.bias_ih, cell.weight_hh,
                                                cell.bias_hh, enc.chunk_size, enc.master_input)
                hs.append(h)
                dfs.append(d_f)
                dis.append(d_i)
            layer_input = torch.stack(hs)
            dist_f[layer][b], dist_i[layer][b] = torch.stack(dfs), torch.stack(dis)
            finals[layer][0].append(h)
            finals[layer][1].append(c)
        rows.append(layer_input)

    def distances(d):
        return torch.stack([torch.stack(per_row) for per_row in d])[:, None]  # [layers, 1, B, T]

    final = tuple((torch.stack(hs), torch.stack(cs)) for hs, cs in finals)
    return torch.stack(rows), distances(dist_f), distances(dist_i), final


def weighted_loss(hidden, distances, input_distances, state, seed=1):
    """Weights every output (the final h and c too) differently, so that every gradient path is exercised."""
    g = torch.Generator().manual_seed(seed)
    outputs = [hidden, distances, input_distances, *(t for layer in state for t in layer)]
    return sum((t * torch.randn(t.shape, generator=g, dtype=t.dtype)).sum() for t in outputs)


@pytest.mark.parametrize("master_input", ["paper", "symmetric"])
@pytest.mark.parametrize("num_layers", [1, 2])
def test_second_window_and_its_gradients_match_the_reference_started_from_the_state(master_input, num_layers):
    torch.manual_seed(0)
    enc = ONLSTM(4, 6, 2, num_layers=num_layers, master_input=master_input).double().train()
    x = stream(torch.float64, steps=7)[..., :4]
    tol = TOLERANCE[torch.float64]
    first = enc(x[:, :3])
    ref_h, ref_f, ref_i, ref_state = reference_window(enc, x[:, :3])
    torch.testing.assert_close(first.hidden, ref_h, rtol=0, atol=tol)
    assert_states_close(first.state, ref_state, tol)  # the final c too, which no output shows
    state = detach_state(first.state)
    assert all(c.abs().max() > 0.1 for _, c in state)  # a state that matters

    x2 = x[:, 3:].clone().requires_grad_()
    out = enc(x2, state=state)
    ref = reference_window(enc, x2, state)
    for got, want in zip((out.hidden, out.distances, out.input_distances), ref[:3]):
        torch.testing.assert_close(got, want, rtol=0, atol=tol)
    assert_states_close(out.state, ref[3], tol)
    params = [x2, *enc.parameters()]
    fast = torch.autograd.grad(weighted_loss(out.hidden, out.distances, out.input_distances, out.state), params)
    slow = torch.autograd.grad(weighted_loss(*ref), params)
    names = ["x", *(n for n, _ in enc.named_parameters())]
    for name, g_fast, g_slow in zip(names, fast, slow):
        torch.testing.assert_close(g_fast, g_slow, rtol=0, atol=tol, msg=lambda m: f"gradient of {name}: {m}")


@pytest.mark.parametrize("symmetric", [False, pytest.param(True, marks=pytest.mark.slow)])  # (both: full suite)
@pytest.mark.parametrize("dirs", [1, 2])
@pytest.mark.parametrize("with_state", [True, False])
def test_gradcheck_through_the_operator_with_state(symmetric, dirs, with_state):
    """float64 gradcheck of (x, W_ih, bias, W_hh) -> (h, distances, final c) from a constant nonzero h0, c0 (the
    step-0 share of dW_hh, the doubled initial cell) or from zeros (the final c's gradient alone)."""
    torch.manual_seed(4)
    steps, rows, hidden, levels, features = 3, 2, 4, 2, 3
    gates = 4 * hidden + 2 * levels
    args = [torch.randn(*shape, dtype=torch.double, requires_grad=True) for shape in
            ((rows, steps, features), (dirs, gates, features), (dirs, gates), (dirs, gates, hidden))]
    state = tuple(torch.randn(dirs, rows, hidden, dtype=torch.double) for _ in range(2)) if with_state else None
    lengths = torch.full((rows,), steps)
    assert torch.autograd.gradcheck(lambda *a: run_layer(*a[:1], lengths, *a[1:], symmetric, "torch", state), args)
    if not with_state:  # from zeros, the same outputs as an explicit zero state
        zeros = tuple(torch.zeros(dirs, rows, hidden, dtype=torch.double) for _ in range(2))
        with torch.no_grad():
            plain = run_layer(args[0], lengths, *args[1:], symmetric, "torch")
            carried = run_layer(args[0], lengths, *args[1:], symmetric, "torch", zeros)
        for a, b in zip(carried, plain):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize("name", ["onlstm-2-paper", "lstm-2", "gru-2"])
def test_no_gradient_flows_into_the_given_state(name):
    enc = build(name, torch.float64, "train")
    x = stream(torch.float64).requires_grad_()
    first = enc(x[:, :4])  # not detached: the encoder treats the state as a constant all the same
    second = enc(x[:, 4:], state=first.state)
    (grad,) = torch.autograd.grad(second.hidden.pow(2).sum(), x)
    assert (grad[:, :4] == 0).all() and (grad[:, 4:] != 0).any()


def test_dropconnect_in_training_carries_state_through_the_library_lstm():
    enc = LSTM(FEATURES, 8, num_layers=2, dropconnect=0.5).train()
    x = stream(torch.float32)
    first = enc(x[:, :4])
    second = enc(x[:, 4:], state=detach_state(first.state))
    assert [tuple(t.shape) for layer in second.state for t in layer] == [(3, 8)] * 4
    second.hidden.sum().backward()
    assert all(p.grad is not None for p in enc.parameters())


BIDIRECTIONAL = {
    "onlstm": lambda: ONLSTM(FEATURES, 12, 3, num_layers=2, bidirectional=True),
    "lstm": lambda: LSTM(FEATURES, 8, bidirectional=True),
    "gru": lambda: GRU(FEATURES, 8, num_layers=2, bidirectional=True),
}
UNIDIRECTIONAL = {"onlstm": lambda: ONLSTM(FEATURES, 12, 3, num_layers=2), "lstm": lambda: LSTM(FEATURES, 8),
                  "gru": lambda: GRU(FEATURES, 8, num_layers=2)}
RAGGED = torch.arange(8)[None, :] < torch.tensor([8, 5, 1])[:, None]


def some_state(enc, batch=3):
    """A valid state for ``enc``'s unidirectional twin: one zero (h, c) (GRU: (h,)) per layer."""
    parts = 1 if isinstance(enc, GRU) else 2
    sizes = getattr(enc, "hidden_sizes", [enc.hidden_size] * enc.num_layers)
    return tuple(tuple(torch.zeros(batch, size) for _ in range(parts)) for size in sizes)


@pytest.mark.parametrize("name", BIDIRECTIONAL)
def test_state_with_a_bidirectional_encoder_is_refused(name):
    enc = BIDIRECTIONAL[name]().eval()
    with pytest.raises(ValueError, match="state carry is for left-to-right encoders"):
        enc(stream(torch.float32), state=some_state(enc))


@pytest.mark.parametrize("name", UNIDIRECTIONAL)
def test_state_with_a_ragged_batch_is_refused(name):
    enc = UNIDIRECTIONAL[name]().eval()
    with pytest.raises(ValueError, match="state carry needs a full batch"):
        enc(stream(torch.float32), RAGGED, state=some_state(enc))


@pytest.mark.parametrize("name", UNIDIRECTIONAL)
def test_malformed_states_are_refused_with_clear_messages(name):
    enc = UNIDIRECTIONAL[name]().eval()
    x, good = stream(torch.float32), some_state(enc)
    enc(x, state=good)  # the well-formed state passes
    parts = "(h)" if isinstance(enc, GRU) else "(h, c)"
    cases = [
        (good[:-1] if len(good) > 1 else good + good,
         re.escape(f"state must be a tuple with one {parts} per layer ({enc.num_layers}), got ")),
        (torch.zeros(3, 8), r"state must be a tuple with one .* per layer \(\d\), got Tensor"),
        ((good[0] + (torch.zeros(3, 8),), *good[1:]), r"state\[0\] must be a tuple \(h"),
        (tuple((torch.zeros(2, t.size(1)),) + layer[1:] for layer in good for t in layer[:1]),
         r"state\[0\] h must have shape \(3, \d+\) \[batch, hidden\], got \(2, "),
        (tuple(tuple(torch.zeros(3, t.size(1) + 1) for t in layer) for layer in good),
         r"state\[0\] h must have shape \(3, \d+\)"),
        (tuple(tuple(t.double() for t in layer) for layer in good), r"state\[0\] h must have x's dtype"),
    ]
    for state, message in cases:
        with pytest.raises(ValueError, match=message):
            enc(x, state=state)


@pytest.mark.parametrize("kind", ["bidirectional-full", "bidirectional-ragged", "unidirectional-ragged"])
@pytest.mark.parametrize("name", ["onlstm", "lstm", "gru"])
def test_without_a_state_the_other_batches_run_as_before_and_return_none(name, kind):
    """No state for bidirectional encoders or ragged batches, and outputs unchanged: each row equals a run of that
    row alone over its own length (every row then full, the mask omitted)."""
    torch.manual_seed(0)
    enc = (BIDIRECTIONAL if kind.startswith("bi") else UNIDIRECTIONAL)[name]().eval()
    x = stream(torch.float32)
    mask = RAGGED if kind.endswith("ragged") else None
    out = enc(x, mask)
    assert out.state is None
    lengths = [8] * 3 if mask is None else mask.sum(1).tolist()
    for b, n in enumerate(lengths):
        alone = enc(x[b : b + 1, :n])
        assert (alone.state is None) == enc.bidirectional
        torch.testing.assert_close(out.hidden[b : b + 1, :n], alone.hidden, rtol=0, atol=1e-5)
        assert (out.hidden[b, n:] == 0).all()


def test_detach_state():
    assert detach_state(None) is None
    h = torch.randn(2, 3, requires_grad=True)
    state = ((h * 2, h * 3), [h * 4])
    detached = detach_state(state)
    assert isinstance(detached, tuple) and isinstance(detached[1], tuple)
    flat = [t for layer in detached for t in layer]
    assert len(flat) == 3 and not any(t.requires_grad for t in flat)
    torch.testing.assert_close(flat[2], h.detach() * 4)
    with pytest.raises(TypeError, match="nested tuples"):
        detach_state({"h": h})
