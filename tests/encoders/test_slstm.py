"""sLSTM: the stabilised step against the paper's unstabilised equations, head-wise memory mixing, padding, gradients
and YAML construction."""

from __future__ import annotations

import pytest
import torch

from helpers.recurrent import LENGTHS, assert_padding_invariant, mixed_batch, random_bias_cell
from helpers.yaml_build import from_yaml
from onlstm_tasks.encoders.base import SequenceEncoder
from onlstm_tasks.encoders.cell_stack import run_cell
from onlstm_tasks.encoders.slstm import SLSTM, SLSTMCell

F64 = torch.float64


def batch(dtype=F64, features=5, seed=0):
    return mixed_batch(dtype, features, seed)


def hand_pre_activations(cell: SLSTMCell, x: torch.Tensor, h: torch.Tensor) -> list[torch.Tensor]:
    """``W x + R h + b`` with R built as an explicit block-diagonal matrix per gate; ``[i, f, z, o]``."""
    H = cell.hidden_size
    out = []
    for g in range(4):
        R = torch.block_diag(*cell.weight_hh[g])  # [H, H]
        rows = slice(g * H, (g + 1) * H)
        out.append(x @ cell.weight_ih[rows].t() + h @ R.t() + cell.bias[rows])
    return out


def hand_step(cell, x, h, c_true, n_true, forget_gate):
    """The paper's unstabilised step: returns (h_t, c_t, n_t, log i, log f)."""
    a_i, a_f, a_z, a_o = hand_pre_activations(cell, x, h)
    i = torch.exp(a_i)
    f = torch.sigmoid(a_f) if forget_gate == "sigmoid" else torch.exp(a_f)
    c = f * c_true + i * torch.tanh(a_z)
    n = f * n_true + i
    return torch.sigmoid(a_o) * c / n, c, n, a_i, torch.log(f)


@pytest.mark.parametrize("forget_gate", ["sigmoid", "exp"])
def test_one_step_equals_the_unstabilised_equations(forget_gate):
    cell = random_bias_cell(SLSTMCell, 3, 4, num_heads=2, forget_gate=forget_gate, seed=0)  # exp(f~) moderate
    x, h = torch.randn(2, 3, dtype=F64), torch.randn(2, 4, dtype=F64)
    c_true, n_true = torch.randn(2, 4, dtype=F64), torch.rand(2, 4, dtype=F64) + 0.5
    m = torch.randn(2, 4, dtype=F64)  # any stabiliser: the state stores c * exp(-m), n * exp(-m)
    state = (h, c_true * torch.exp(-m), n_true * torch.exp(-m), m)
    got_h, (h_new, c_new, n_new, m_new) = cell.step(cell.project(x), state)
    want_h, want_c, want_n, log_i, log_f = hand_step(cell, x, h, c_true, n_true, forget_gate)
    torch.testing.assert_close(got_h, want_h, rtol=1e-12, atol=1e-12)
    assert h_new is got_h
    torch.testing.assert_close(m_new, torch.maximum(log_f + m, log_i), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(c_new * torch.exp(m_new), want_c, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(n_new * torch.exp(m_new), want_n, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("forget_gate", ["sigmoid", "exp"])
def test_a_sequence_from_the_zero_state_equals_the_unstabilised_recurrence(forget_gate):
    cell = random_bias_cell(SLSTMCell, 5, 4, num_heads=2, forget_gate=forget_gate, seed=1)
    x, mask = batch()
    got = run_cell(cell, x, mask)
    h = c = n = torch.zeros(len(LENGTHS), 4, dtype=F64)
    for t in range(x.size(1)):
        h, c, n, _, _ = hand_step(cell, x[:, t], h, c, n, forget_gate)
        real = mask[:, t, None]
        torch.testing.assert_close(got[:, t], torch.where(real, h, 0.0), rtol=1e-10, atol=1e-12)


def test_first_step_survives_a_tiny_input_gate():
    """m_0 = -inf makes i'_1 = 1: with m_0 = 0, exp(-200 - m_1) underflows, n_1 = 0 and h_1 is NaN."""
    torch.manual_seed(2)
    cell = SLSTMCell(3, 4, num_heads=2)
    with torch.no_grad():
        cell.bias[:4] = -200.0
    x = torch.randn(1, 3)
    p = cell.project(x)
    h, (_, c, n, m) = cell.step(p, cell.initial_state(1, x))
    _, _, z, o = p.chunk(4, dim=-1)
    torch.testing.assert_close(n, torch.ones_like(n))
    torch.testing.assert_close(h, torch.sigmoid(o) * torch.tanh(z))
    torch.testing.assert_close(m, p[:, :4])  # m_1 = log i_1


def test_huge_gates_stay_finite_in_float32():
    """Input-gate pre-activations of +-100 and more (exp overflows float32) match the float64 result."""
    torch.manual_seed(6)
    enc = SLSTM(5, 4, bidirectional=True, num_heads=2)
    with torch.no_grad():
        for cell in enc.cells:
            cell.weight_ih[:4] = torch.tensor([1.0, 0, 0, 0, 0])  # input-gate rows: i~ = x_0 + R h + b
    x, mask = batch(torch.float32)
    x[0, :, 0] = torch.tensor([100.0, 200.0, 10.0, -100.0, 150.0, 0.0])
    want = enc.double()(x.double(), mask).hidden
    got = enc.float()(x, mask).hidden
    assert bool(torch.isfinite(got).all())
    torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-5)


def test_head_wise_mixing_keeps_heads_apart():
    """Perturbing head 1's h_{t-1} changes head 1's gate pre-activations only (head 0's are untouched)."""
    torch.manual_seed(3)
    cell = SLSTMCell(3, 6, num_heads=3).double()
    x_t = cell.project(torch.randn(2, 3, dtype=F64))
    h = torch.randn(2, 6, dtype=F64)
    bumped = h.clone()
    bumped[:, 2:4] += torch.randn(2, 2, dtype=F64)  # head 1 = units 2, 3
    for before, after in zip(cell.pre_activations(x_t, h), cell.pre_activations(x_t, bumped)):
        torch.testing.assert_close(after[:, :2], before[:, :2], rtol=0, atol=0)  # head 0
        torch.testing.assert_close(after[:, 4:], before[:, 4:], rtol=0, atol=0)  # head 2
        assert (after[:, 2:4] - before[:, 2:4]).abs().min() > 1e-6  # head 1 does see its own h
    # so a whole step's head-0 output ignores head 1's previous hidden state (c, n, m are elementwise)
    c, n, m = torch.randn(2, 6, dtype=F64), torch.rand(2, 6, dtype=F64) + 0.5, torch.zeros(2, 6, dtype=F64)
    out, out_bumped = cell.step(x_t, (h, c, n, m))[0], cell.step(x_t, (bumped, c, n, m))[0]
    torch.testing.assert_close(out_bumped[:, :2], out[:, :2], rtol=0, atol=0)
    assert not torch.allclose(out_bumped[:, 2:4], out[:, 2:4])


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("forget_gate", ["sigmoid", "exp"])
def test_padding_invariance_and_zero_outputs(bidirectional, forget_gate):
    torch.manual_seed(4)
    enc = SLSTM(5, 4, num_layers=2, bidirectional=bidirectional, num_heads=2, forget_gate=forget_gate).double()
    assert len(assert_padding_invariant(enc.eval(), *batch()).layers) == 2


@pytest.mark.parametrize("forget_gate", ["sigmoid", "exp"])
def test_gradcheck_tiny(forget_gate):
    torch.manual_seed(5)
    cell = SLSTMCell(3, 4, num_heads=2, forget_gate=forget_gate).double()
    x = torch.randn(2, 3, 3, dtype=F64, requires_grad=True)
    mask = torch.tensor([[True, True, True], [True, True, False]])
    assert torch.autograd.gradcheck(lambda x, *params: run_cell(cell, x, mask), (x, *cell.parameters()))


def test_forget_gate_starts_at_long_memory_for_both_kinds():
    lo, hi = torch.sigmoid(torch.tensor(3.0)), torch.sigmoid(torch.tensor(6.0))
    for kind in ("sigmoid", "exp"):
        cell = SLSTMCell(3, 8, num_heads=2, forget_gate=kind)
        pre = cell.bias[8:16]
        f = torch.sigmoid(pre) if kind == "sigmoid" else torch.exp(pre)
        assert bool(((f >= lo - 1e-6) & (f <= hi + 1e-6)).all())


def test_builds_from_yaml_through_jsonargparse():
    snippet = ("class_path: onlstm_tasks.encoders.slstm.SLSTM\ninit_args: {input_size: 6, hidden_size: 8, "
               "num_heads: 4, bidirectional: true, num_layers: 2, forget_gate: exp}")
    enc = from_yaml(SequenceEncoder, snippet)
    assert isinstance(enc, SLSTM) and enc.num_heads == 4 and enc.forget_gate == "exp"
    assert enc.cells[0].weight_hh.shape == (4, 4, 2, 2) and enc.output_size == 16
    x = torch.randn(2, 3, 6)
    assert enc(x, torch.tensor([[True] * 3, [True, False, False]])).hidden.shape == (2, 3, 16)


@pytest.mark.parametrize(
    "kwargs,message",
    [({"hidden_size": 6, "num_heads": 4}, "multiple of num_heads"),
     ({"hidden_size": 8, "num_heads": 0}, "multiple of num_heads"),
     ({"forget_gate": "tanh"}, "forget_gate must be one of")],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SLSTM(3, **kwargs)
