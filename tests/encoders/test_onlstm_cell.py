"""The ON-LSTM against its oracles: the hard segmented update, the reference cell, gradcheck, and the one-step
cell run by CellStackEncoder like the LSTM variants."""

from functools import partial

import pytest
import torch

from onlstm_tasks.encoders import ONLSTM, CellStackEncoder, ONLSTMCell, RecurrentCell, ReferenceONLSTMCell
from onlstm_tasks import native
from onlstm_tasks.encoders.onlstm.equations import (
    cumax,
    master_input_gate,
    ordered_cell_update,
    regrouped_cell_update,
)
from onlstm_tasks.encoders.onlstm.reference import reference_encode
from helpers.recurrent import mixed_batch

LEVELS, CHUNK = 5, 3


def one_hot_cumax(index: int, levels: int = LEVELS) -> torch.Tensor:
    return (torch.arange(levels) >= index).double()


def segmented_update(c_prev, c_hat, f, i, d_f, d_i):
    """The blog's hard update, level by level, for master gates that switch at levels d_f and d_i.

    f~ = 1 from level d_f upwards, i~ = 1 below level d_i. Levels below both take the new input, levels from
    both upwards keep the old state, levels in between run a plain LSTM update (d_f < d_i) or are erased
    (d_f > d_i).
    """
    out = torch.empty_like(c_prev)
    for k in range(LEVELS):
        s = slice(k * CHUNK, (k + 1) * CHUNK)
        forget_on, input_on = k >= d_f, k < d_i
        if forget_on and input_on:
            out[s] = f[s] * c_prev[s] + i[s] * c_hat[s]
        elif forget_on:
            out[s] = c_prev[s]
        elif input_on:
            out[s] = c_hat[s]
        else:
            out[s] = 0.0
    return out


@pytest.mark.parametrize("d_f,d_i", [(1, 4), (2, 2), (4, 1), (0, 5), (3, 0)])
def test_soft_update_equals_hard_segmented_update(d_f, d_i):
    torch.manual_seed(d_f * 7 + d_i)
    c_prev, c_hat = torch.randn(2, LEVELS * CHUNK, dtype=torch.double)
    f, i = torch.rand(2, LEVELS * CHUNK, dtype=torch.double)
    master_f = one_hot_cumax(d_f).repeat_interleave(CHUNK)
    # the paper's i~ = 1 - cumax(one-hot at d_i) is 1 strictly below level d_i
    master_i = (1 - one_hot_cumax(d_i)).repeat_interleave(CHUNK)
    soft = ordered_cell_update(c_prev, c_hat, f, i, master_f, master_i)
    torch.testing.assert_close(soft, segmented_update(c_prev, c_hat, f, i, d_f, d_i), rtol=0, atol=1e-15)


@pytest.mark.parametrize("d_f,d_i", [(1, 4), (4, 1), (2, 2)])
def test_fast_cell_with_saturated_master_gates_follows_hard_update(d_f, d_i):
    """Drive the batched cell with master logits so large that softmax is exactly one-hot."""
    torch.manual_seed(0)
    hidden = LEVELS * CHUNK
    cell = ONLSTMCell(4, hidden, CHUNK).double()
    with torch.no_grad():
        cell.weight_ih[: 2 * LEVELS] = 0
        cell.weight_hh[: 2 * LEVELS] = 0
        cell.bias_ih[: 2 * LEVELS] = -1e4
        cell.bias_hh[: 2 * LEVELS] = 0
        cell.bias_ih[LEVELS + d_f] = 1e4  # master forget: softmax one-hot at d_f
        cell.bias_ih[d_i] = 1e4  # master input: 1 - cumax(one-hot at d_i) is 1 below level d_i
    x = torch.randn(1, 3, 4, dtype=torch.double)
    h, d_forget, d_input = cell.run(x, None, cell.weight_hh)

    h_prev = torch.zeros(hidden, dtype=torch.double)
    c_prev = torch.zeros(hidden, dtype=torch.double)
    for t in range(3):
        pre = cell.weight_ih @ x[0, t] + cell.bias_ih + cell.weight_hh @ h_prev + cell.bias_hh
        o, g, i, f = pre[2 * LEVELS:].split(hidden)
        c_prev = segmented_update(c_prev, torch.tanh(g), torch.sigmoid(f), torch.sigmoid(i), d_f, d_i)
        h_prev = torch.sigmoid(o) * torch.tanh(c_prev)
        torch.testing.assert_close(h[0, t], h_prev, rtol=0, atol=1e-12)
    torch.testing.assert_close(d_forget[0], torch.full((3,), d_f / LEVELS, dtype=torch.double))
    torch.testing.assert_close(d_input[0], torch.full((3,), d_i / LEVELS, dtype=torch.double))


def test_master_gates_are_monotone_and_distances_in_unit_interval():
    logits = torch.randn(64, 16) * 5
    f = cumax(logits)
    assert (f[:, 1:] >= f[:, :-1] - 1e-6).all()
    torch.testing.assert_close(f[:, -1], torch.ones(64))
    for variant in ("paper", "symmetric"):
        i = master_input_gate(logits, variant)
        assert (i[:, 1:] <= i[:, :-1] + 1e-6).all()
    assert torch.allclose(master_input_gate(logits, "paper")[:, -1], torch.zeros(64), atol=1e-6)
    assert torch.allclose(master_input_gate(logits, "symmetric")[:, 0], torch.ones(64), atol=1e-6)

    enc = ONLSTM(6, 16, 4, num_layers=2, bidirectional=True)
    out = enc(torch.randn(4, 9, 6) * 3)
    for d in (out.distances, out.input_distances):
        assert d.shape == (2, 2, 4, 9)
        assert (d >= 0).all() and (d <= 1).all()


@pytest.mark.parametrize("master_input", ["paper", "symmetric"])
@pytest.mark.parametrize("bidirectional,num_layers", [(False, 1), (True, 2)])
def test_fast_encoder_matches_reference_outputs_and_gradients(master_input, bidirectional, num_layers):
    torch.manual_seed(1)
    enc = ONLSTM(5, 12, 3, num_layers=num_layers, bidirectional=bidirectional, master_input=master_input).double()
    x = torch.randn(3, 7, 5, dtype=torch.double, requires_grad=True)
    mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3, [1] + [0] * 6], dtype=torch.bool)
    weights = torch.randn(3, 7, enc.output_size, dtype=torch.double)

    out = enc(x, mask)
    ref_h, ref_f, ref_i = reference_encode(enc, x, mask)
    torch.testing.assert_close(out.hidden, ref_h, rtol=0, atol=1e-10)
    torch.testing.assert_close(out.distances, ref_f, rtol=0, atol=1e-10)
    torch.testing.assert_close(out.input_distances, ref_i, rtol=0, atol=1e-10)

    params = [x, *enc.parameters()]
    loss = lambda h, d_f, d_i: (h * weights).sum() + d_f.pow(2).sum() + d_i.sum()  # noqa: E731
    fast_grads = torch.autograd.grad(loss(out.hidden, out.distances, out.input_distances), params)
    ref_grads = torch.autograd.grad(loss(ref_h, ref_f, ref_i), params)
    for g_fast, g_ref in zip(fast_grads, ref_grads):
        torch.testing.assert_close(g_fast, g_ref, rtol=0, atol=1e-10)


def test_float32_fast_path_within_1e_5_of_reference():
    torch.manual_seed(2)
    enc = ONLSTM(8, 32, 8, num_layers=2, bidirectional=True)
    x = torch.randn(4, 10, 8)
    mask = torch.arange(10)[None, :] < torch.tensor([10, 7, 3, 1])[:, None]
    out = enc(x, mask)
    ref_h, ref_f, _ = reference_encode(enc, x, mask)
    assert (out.hidden - ref_h).abs().max() < 1e-5
    assert (out.distances - ref_f).abs().max() < 1e-5


def test_reference_cell_runs_like_a_one_layer_encoder():
    torch.manual_seed(3)
    ref = ReferenceONLSTMCell(4, 8, 2).double()
    enc = ONLSTM(4, 8, 2).double()
    enc.cell(0).load_state_dict(ref.state_dict())
    xs = torch.randn(6, 4, dtype=torch.double)
    h, d_f, d_i = ref.run(xs)
    out = enc(xs[None])
    torch.testing.assert_close(out.hidden[0], h)
    torch.testing.assert_close(out.distances[0, 0, 0], d_f)
    torch.testing.assert_close(out.input_distances[0, 0, 0], d_i)


def test_gradcheck_tiny_cell_double_precision():
    torch.manual_seed(4)
    cell = ONLSTMCell(3, 4, 2).double()
    x = torch.randn(2, 3, 3, dtype=torch.double, requires_grad=True)
    mask = torch.tensor([[True, True, True], [True, True, False]])
    w_hh = cell.weight_hh.detach().clone().requires_grad_()
    # the recurrent weight is an explicit argument of run(), so gradcheck can vary it with the input
    assert torch.autograd.gradcheck(lambda x, w: cell.run(x, mask, w), (x, w_hh))
    assert torch.autograd.gradcheck(lambda x: reference_encode_one(cell, x), (x,))


def reference_encode_one(cell, x):
    from onlstm_tasks.encoders.onlstm.reference import run_sequence

    return run_sequence(x[0], cell.weight_ih, cell.bias_ih, cell.weight_hh, cell.bias_hh, cell.chunk_size)[0]


def test_regrouped_update_of_the_fast_back_ends_is_the_papers_update():
    torch.manual_seed(6)
    c_prev, c_hat = torch.randn(2, 4, 15, dtype=torch.double).unbind(0)
    forget, input, master_forget, master_input = torch.rand(4, 4, 15, dtype=torch.double).unbind(0)
    torch.testing.assert_close(regrouped_cell_update(c_prev, c_hat, forget, input, master_forget, master_input),
                               ordered_cell_update(c_prev, c_hat, forget, input, master_forget, master_input),
                               rtol=0, atol=1e-12)


def cell_stack_like(fast: ONLSTM) -> CellStackEncoder:
    """A CellStackEncoder of ONLSTMCells with ``fast``'s sizes, options and weights."""
    stack = CellStackEncoder(fast.input_size, fast.hidden_size, partial(ONLSTMCell, chunk_size=fast.chunk_size,
                                                                        master_input=fast.master_input),
                             num_layers=fast.num_layers, bidirectional=fast.bidirectional)
    stack.load_state_dict(fast.state_dict())  # strict: the same parameter names, cell for cell
    return stack.to(next(fast.parameters()).dtype).train(fast.training)


@pytest.mark.parametrize("master_input", ["paper", "symmetric"])
@pytest.mark.parametrize("bidirectional,num_layers", [(False, 1), (True, 2)])
def test_cell_stack_of_onlstm_cells_gives_the_fast_path_outputs_and_gradients(master_input, bidirectional,
                                                                               num_layers):
    """ONLSTMCell's one-step method (the RecurrentCell protocol), run by CellStackEncoder on a padded batch, gives
    the hidden states of every layer of ONLSTM (its fast time loop) with the same weights, and the same gradients."""
    torch.manual_seed(5)
    fast = ONLSTM(5, 12, 3, num_layers=num_layers, bidirectional=bidirectional, master_input=master_input).double()
    stack = cell_stack_like(fast)
    assert all(isinstance(cell, RecurrentCell) for cell in stack.cells)
    x, mask = mixed_batch(torch.float64)
    x = x.masked_fill(~mask[..., None], float("nan"))  # padding never reaches a real position
    weights = torch.randn(*x.shape[:2], fast.output_size, dtype=torch.float64)

    fast_out, stack_out = fast(x, mask), stack(x, mask)
    assert len(stack_out.layers) == len(fast_out.layers) == num_layers
    for got, want in zip(stack_out.layers, fast_out.layers):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-10)
    assert not stack_out.hidden[~mask].any()  # zero at padded steps, as the fast path

    fast_grads = torch.autograd.grad((fast_out.hidden * weights).sum(), list(fast.parameters()))
    stack_grads = torch.autograd.grad((stack_out.hidden * weights).sum(), list(stack.parameters()))
    for got, want in zip(stack_grads, fast_grads):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-10)


@pytest.mark.parametrize("backend", [pytest.param("compiled", marks=[
    pytest.mark.compiled, pytest.mark.skipif(not native.available(), reason="the compiled ON-LSTM loop was not built")]),
    "torch"])
def test_cell_stack_of_onlstm_cells_within_1e_5_of_the_fast_path_in_float32(backend):
    """The same in float32 against both back ends of the fast path (the compiled step and the PyTorch loop): both
    compute the equations ONLSTMCell.step applies."""
    torch.manual_seed(7)
    fast = ONLSTM(8, 32, 8, num_layers=2, bidirectional=True, backend=backend).eval()
    stack = cell_stack_like(fast)
    x, mask = mixed_batch(torch.float32, features=8)
    with torch.no_grad():
        want = fast(x, mask).hidden
    with torch.no_grad():
        got = stack(x, mask).hidden
    assert (got - want).abs().max() < 1e-5
