"""mLSTM: the stabilised step against the paper's unstabilised equations, the parallel form against the recurrent
one (outputs and gradients), padding, stability, gradients and YAML construction."""

from __future__ import annotations

import math

import pytest
import torch

from helpers.recurrent import assert_padding_invariant, mixed_batch, random_bias_cell
from helpers.yaml_build import from_yaml
from onlstm_tasks.encoders.base import SequenceEncoder
from onlstm_tasks.encoders.cell_stack import run_cell
from onlstm_tasks.encoders.mlstm import MLSTM, MLSTMCell

F64 = torch.float64


def batch(dtype=F64, features=5, seed=0):
    return mixed_batch(dtype, features, seed)


def hand_inputs(cell: MLSTMCell, x: torch.Tensor):
    """q, k, v [B, heads, d], o [B, H], input and forget pre-activations [B, heads], from explicit row slices."""
    H, nh, d = cell.hidden_size, cell.num_heads, cell.head_size
    lin = lambda a, b: x @ cell.weight_ih[a:b].t() + cell.bias[a:b]  # noqa: E731
    heads = lambda t: t.reshape(-1, nh, d)  # noqa: E731
    q, k, v = heads(lin(0, H)), heads(lin(H, 2 * H)) / math.sqrt(d), heads(lin(2 * H, 3 * H))
    return q, k, v, torch.sigmoid(lin(3 * H, 4 * H)), lin(4 * H, 4 * H + nh), lin(4 * H + nh, 4 * H + 2 * nh)


def hand_step(cell, x, C, n, forget_gate):
    """The paper's unstabilised step from the true (C, n): returns (h_t, C_t, n_t, log i, log f, |n^T q|)."""
    q, k, v, o, a_i, a_f = hand_inputs(cell, x)
    i = torch.exp(a_i)[..., None]
    f = (torch.sigmoid(a_f) if forget_gate == "sigmoid" else torch.exp(a_f))[..., None]
    C = f[..., None] * C + i[..., None] * torch.einsum("bha,bhc->bhac", v, k)
    n = f * n + i * k
    nq = torch.einsum("bhd,bhd->bh", n, q).abs()
    h = torch.einsum("bhac,bhc->bha", C, q) / torch.clamp(nq, min=1.0)[..., None]
    return o * h.flatten(1), C, n, a_i, torch.log(f[..., 0]), nq


@pytest.mark.parametrize("forget_gate", ["sigmoid", "exp"])
def test_one_step_equals_the_unstabilised_equations(forget_gate):
    cell = random_bias_cell(MLSTMCell, 3, 4, num_heads=2, forget_gate=forget_gate, seed=0)
    with torch.no_grad():
        cell.bias[16:18] = -4.0  # small input gates, so row 0's tiny n keeps |n^T q| below 1
    x = torch.randn(3, 3, dtype=F64)
    scale = torch.tensor([1e-3, 100.0, 100.0], dtype=F64)[:, None, None]
    C_true, n_true = torch.randn(3, 2, 2, 2, dtype=F64), scale * torch.randn(3, 2, 2, dtype=F64)
    m = torch.randn(3, 2, dtype=F64)  # any stabiliser: the state stores C * exp(-m), n * exp(-m)
    state = (C_true * torch.exp(-m)[..., None, None], n_true * torch.exp(-m)[..., None], m)
    got_h, (C_new, n_new, m_new) = cell.step(cell.project(x), state)
    want_h, want_C, want_n, log_i, log_f, nq = hand_step(cell, x, C_true, n_true, forget_gate)
    assert bool((nq < 1).any()) and bool((nq > 1).any())  # both branches of max(|n^T q|, 1)
    torch.testing.assert_close(got_h, want_h, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(m_new, torch.maximum(log_f + m, log_i), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(C_new * torch.exp(m_new)[..., None, None], want_C, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(n_new * torch.exp(m_new)[..., None], want_n, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("forget_gate", ["sigmoid", "exp"])
def test_a_sequence_from_the_zero_state_equals_the_unstabilised_recurrence(forget_gate):
    cell = random_bias_cell(MLSTMCell, 5, 4, num_heads=2, forget_gate=forget_gate, seed=1)
    x, mask = batch()
    C, n = torch.zeros(4, 2, 2, 2, dtype=F64), torch.zeros(4, 2, 2, dtype=F64)
    recurrent, parallel = run_cell(cell, x, mask), cell.parallel(x, mask)
    for t in range(x.size(1)):
        h, C, n, *_ = hand_step(cell, x[:, t], C, n, forget_gate)
        want = torch.where(mask[:, t, None], h, 0.0)
        torch.testing.assert_close(recurrent[:, t], want, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(parallel[:, t], want, rtol=1e-10, atol=1e-12)


def weighted_sum_and_grads(enc, x, mask, weights):
    x = x.clone().requires_grad_(True)
    out = enc(x, mask)
    loss = sum((layer * w).sum() for layer, w in zip(out.layers, weights))
    grads = torch.autograd.grad(loss, [x, *enc.parameters()])
    return out.layers, grads


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("forget_gate", ["sigmoid", "exp"])
def test_parallel_form_equals_recurrent_form_outputs_and_gradients(bidirectional, forget_gate):
    torch.manual_seed(2)
    enc = MLSTM(5, 8, num_layers=2, bidirectional=bidirectional, num_heads=2, forget_gate=forget_gate).double()
    with torch.no_grad():
        for cell in enc.cells:
            cell.bias.uniform_(-2, 2)  # forget gates well away from 1, so old steps matter less or more per row
    x, mask = batch()
    weights = [torch.randn(4, 6, enc.output_size, dtype=F64) for _ in range(2)]
    assert enc.parallel
    par_layers, par_grads = weighted_sum_and_grads(enc, x, mask, weights)
    enc.parallel = False
    rec_layers, rec_grads = weighted_sum_and_grads(enc, x, mask, weights)
    for a, b in zip(par_layers, rec_layers):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-8)
    for a, b in zip(par_grads, rec_grads):
        assert a.abs().max() > 1e-3  # every parameter (and x) gets a real gradient
        torch.testing.assert_close(a, b, rtol=0, atol=1e-8)


@pytest.mark.parametrize("parallel", [True, False])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_padding_invariance_and_zero_outputs(parallel, bidirectional):
    torch.manual_seed(3)
    enc = MLSTM(5, 4, num_layers=2, bidirectional=bidirectional, num_heads=2, parallel=parallel).double().eval()
    assert len(assert_padding_invariant(enc, *batch(), noise_atol=1e-14).layers) == 2


def test_garbage_padding_gives_no_nan_gradients():
    torch.manual_seed(4)
    enc = MLSTM(5, 4, bidirectional=True, num_heads=2, forget_gate="exp").double()
    x, mask = batch()
    x = torch.where(mask[..., None], x, 1e6).requires_grad_(True)  # exp(huge) if padding reached the gates
    enc(x, mask).hidden.sum().backward()
    assert all(bool(torch.isfinite(p.grad).all()) for p in enc.parameters())
    assert bool((x.grad[~mask] == 0).all())


def test_huge_input_gates_stay_finite_in_float32():
    """Input-gate pre-activations of +-100 and more: exp overflows float32, and one stabiliser for the whole
    sequence (200 here) would underflow the earlier rows (whose maximum is 100); the step-wise / row-wise
    stabilised forms match float64."""
    torch.manual_seed(5)
    enc = MLSTM(5, 4, bidirectional=True, num_heads=2)
    with torch.no_grad():
        for cell in enc.cells:
            cell.weight_ih[16:18] = torch.tensor([1.0, 0, 0, 0, 0])  # input gates (rows 4H .. 4H + heads): i~ = x_0
            cell.bias[16:18] = 0.0
    x, mask = batch(torch.float32)
    x[0, :, 0] = torch.tensor([100.0, 200.0, 10.0, -100.0, 150.0, 0.0])
    want = enc.double()(x.double(), mask).hidden
    enc.float()
    for parallel in (True, False):
        enc.parallel = parallel
        got = enc(x, mask).hidden
        assert bool(torch.isfinite(got).all())
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("parallel", [True, False])
def test_gradcheck_tiny(parallel):
    torch.manual_seed(6)
    cell = MLSTMCell(3, 4, num_heads=2).double()
    x = torch.randn(2, 3, 3, dtype=F64, requires_grad=True)
    mask = torch.tensor([[True, True, True], [True, True, False]])
    run = (lambda x: cell.parallel(x, mask)) if parallel else (lambda x: run_cell(cell, x, mask))
    assert torch.autograd.gradcheck(lambda x, *params: run(x), (x, *cell.parameters()))


def test_builds_from_yaml_through_jsonargparse():
    snippet = ("class_path: onlstm_tasks.encoders.mlstm.MLSTM\ninit_args: {input_size: 6, hidden_size: 8, "
               "num_heads: 4, bidirectional: true, num_layers: 2, parallel: false}")
    enc = from_yaml(SequenceEncoder, snippet)
    assert isinstance(enc, MLSTM) and enc.num_heads == 4 and not enc.parallel and enc.forget_gate == "sigmoid"
    assert enc.cells[0].head_size == 2 and enc.output_size == 16
    x = torch.randn(2, 3, 6)
    assert enc(x, torch.tensor([[True] * 3, [True, False, False]])).hidden.shape == (2, 3, 16)


@pytest.mark.parametrize(
    "kwargs,message",
    [({"hidden_size": 6, "num_heads": 4}, "multiple of num_heads"),
     ({"forget_gate": "relu"}, "forget_gate must be one of")],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MLSTM(3, **kwargs)
