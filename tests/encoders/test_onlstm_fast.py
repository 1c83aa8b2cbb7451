"""The fast ON-LSTM path (the layer operator with its hand-written backward) against the plain reference cell, which
stays the oracle."""

import pytest
import torch
from helpers.onlstm import batch, compare_with_reference, loss_fn

from onlstm_tasks.encoders import ONLSTM
from onlstm_tasks.encoders.onlstm.layer_op import run_layer
from onlstm_tasks.encoders.onlstm.backends.loop.runs import step_runs


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("master_input", ["paper", "symmetric"])
@pytest.mark.parametrize("bidirectional,num_layers", [(False, 1), (False, 2), (True, 1), (True, 2)])
def test_matches_reference_with_mixed_lengths(dtype, master_input, bidirectional, num_layers):
    torch.manual_seed(0)
    enc = ONLSTM(5, 12, 3, num_layers=num_layers, bidirectional=bidirectional, master_input=master_input).to(dtype)
    x, mask = batch(dtype)
    compare_with_reference(enc, x, mask)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_reference_without_padding_and_when_every_row_ends_early(dtype):
    torch.manual_seed(1)
    enc = ONLSTM(5, 12, 4, num_layers=2, bidirectional=True).to(dtype)
    x, mask = batch(dtype, lengths=[9] * 4)
    compare_with_reference(enc, x, mask)  # full batch: one run of steps over every row
    compare_with_reference(enc, x, mask, fast_out=lambda x: enc(x))  # the same with the mask omitted
    x, mask = batch(dtype, lengths=[6, 3, 6, 2])  # the last three steps are padding everywhere
    compare_with_reference(enc, x, mask)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_matches_reference_when_every_sentence_is_one_token(dtype, bidirectional):
    """No step reads a previous state, so W_hh's gradient is zero (a batch of one-token sentences, as length
    bucketing makes from real corpora; it once crashed the backward)."""
    torch.manual_seed(2)
    enc = ONLSTM(5, 12, 4, num_layers=2, bidirectional=bidirectional).to(dtype)
    for lengths, steps in (([1, 1, 1], 1), ([1, 1], 4)):  # a full batch of one step; one step, then padding
        x, mask = batch(dtype, lengths=lengths, steps=steps)
        compare_with_reference(enc, x, mask)
        out = enc(x, mask)
        out.hidden.sum().backward()
        assert all((cell.weight_hh.grad == 0).all() for cell in enc.cells)
        enc.zero_grad()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dropconnect_in_training_matches_reference_on_the_sampled_weights(dtype):
    enc = ONLSTM(5, 12, 3, num_layers=2, bidirectional=True, dropconnect=0.4).to(dtype).train()
    x, mask = batch(dtype)
    torch.manual_seed(42)
    weights = enc.recurrent_weights()  # what a forward pass under this seed samples: one matrix per cell
    assert all((w == 0).any() for w in weights)

    def fast(x):
        torch.manual_seed(42)
        return enc(x, mask)

    compare_with_reference(enc, x, mask, recurrent_weights=weights, fast_out=fast)


def test_inference_path_equals_the_training_path():
    torch.manual_seed(2)
    enc = ONLSTM(5, 12, 3, num_layers=2, bidirectional=True).double()
    x, mask = batch(torch.float64)
    with torch.no_grad():
        fast = enc(x, mask)
    slow = enc(x.requires_grad_(), mask)
    for a, b in zip((fast.hidden, fast.distances, fast.input_distances),
                    (slow.hidden, slow.distances, slow.input_distances)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_padding_may_hold_nan():
    torch.manual_seed(3)
    enc = ONLSTM(5, 12, 3, bidirectional=True)
    x, mask = batch(torch.float32)
    clean = enc(x, mask)
    x = torch.where(mask[..., None], x, torch.tensor(float("nan"))).requires_grad_()
    out = enc(x, mask)
    torch.testing.assert_close(out.hidden, clean.hidden)
    loss_fn(out.hidden, out.distances, out.input_distances).backward()
    assert (x.grad[~mask] == 0).all() and torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in enc.parameters())


@pytest.mark.parametrize("backend", ["torch", pytest.param("auto", marks=pytest.mark.slow)])  # the same in float64
@pytest.mark.parametrize("symmetric", [False, pytest.param(True, marks=pytest.mark.slow)])  # (both: full suite)
@pytest.mark.parametrize(("dirs", "lengths"), [
    (1, [3, 3, 3]), (2, [3, 3, 3]), (1, [4, 1, 4, 3]),  # the fast tier: each direction count, and a ragged batch
    pytest.param(2, [4, 1, 4, 3], marks=pytest.mark.slow),
    pytest.param(1, [7, 1, 6, 7, 2, 7, 5, 0], marks=pytest.mark.slow),
    pytest.param(2, [7, 1, 6, 7, 2, 7, 5, 0], marks=pytest.mark.slow),
])
def test_gradcheck_through_the_operator(backend, symmetric, dirs, lengths):
    """float64 gradcheck of (x, W_ih, bias, W_hh) -> (h, forget distances, input distances), padding (and a row of
    length 0) included; float64 runs the PyTorch loop whatever the backend asks."""
    torch.manual_seed(4)
    hidden, levels, features = 4, 2, 3
    gates = 4 * hidden + 2 * levels
    steps, rows = max(lengths), len(lengths)
    args = [torch.randn(*shape, dtype=torch.double, requires_grad=True) for shape in
            ((rows, steps, features), (dirs, gates, features), (dirs, gates), (dirs, gates, hidden))]
    lengths = torch.tensor(lengths)
    assert torch.autograd.gradcheck(lambda x, *w: run_layer(x, lengths, *w, symmetric, backend)[:3], args)


@pytest.mark.parametrize("steps", [1, 2, 5])
@pytest.mark.parametrize("carry", [False, True], ids=["zero-state", "carried-state"])
def test_gradcheck_of_a_full_batch_from_a_state(steps, carry):
    """float64 gradcheck of one direction over a full batch, x a slice of a longer batch, from a constant state (the
    step-0 share of dW_hh, the doubled initial cell) or from zeros, through every output, the final cell included."""
    torch.manual_seed(5)
    hidden, levels, features, rows = 4, 2, 3, 3
    gates = 4 * hidden + 2 * levels
    x = torch.randn(rows, steps + 1, features, dtype=torch.double, requires_grad=True)
    weights = [torch.randn(*shape, dtype=torch.double, requires_grad=True)
               for shape in ((1, gates, features), (1, gates), (1, gates, hidden))]
    state = tuple(torch.randn(1, rows, hidden, dtype=torch.double) for _ in range(2)) if carry else None
    lengths = torch.full((rows,), steps)
    assert torch.autograd.gradcheck(lambda x, *w: run_layer(x[:, :steps], lengths, *w, False, "torch", state),
                                    (x, *weights))


def test_double_backward_is_refused():
    args = [torch.randn(*shape, dtype=torch.double, requires_grad=True) for shape in
            ((2, 3, 3), (1, 20, 3), (1, 20), (1, 20, 4))]
    h = run_layer(args[0], torch.tensor([3, 3]), *args[1:], False)[0]
    (grad,) = torch.autograd.grad(h.pow(2).sum(), args[0], create_graph=True)
    with pytest.raises(RuntimeError):
        torch.autograd.grad(grad.sum(), args[0])


def test_segments_shrink_once_enough_rows_have_ended():
    assert step_runs([8, 8, 7, 6, 6, 3, 1, 0]) == [(8, 0, 3), (6, 3, 5), (3, 5, 6), (1, 6, 7)]
    assert step_runs([4] * 5) == [(4, 0, 5)]
