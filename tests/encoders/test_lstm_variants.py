"""Peephole, CIFG and no-forget-gate LSTMs against nn.LSTM where their equations say they reduce to it.

(The shared contract tests, padding invariance, gradients, YAML construction, run on them in test_encoders.py.)
"""

from __future__ import annotations

import pytest
import torch

from onlstm_tasks.encoders import CIFGLSTM, LSTM, NoForgetLSTM, PeepholeLSTM
from onlstm_tasks.encoders.cell_stack import run_cell
from onlstm_tasks.encoders.lstm_variants import CIFGCell, NoForgetCell, PeepholeCell
from helpers.recurrent import mixed_batch



def batch(dtype=torch.float32, features=5, seed=0):
    return mixed_batch(dtype, features, seed)


def lstm_rows(cell, weight: torch.Tensor, which: str) -> dict[str, torch.Tensor]:
    """A variant's gate blocks by name, from a [gates * H, ...] weight (or bias)."""
    names = {PeepholeCell: "ifgo", CIFGCell: "fgo", NoForgetCell: "igo"}[type(cell)]
    return dict(zip(names, weight.chunk(len(names))))


def matching_lstm(variant, fill) -> LSTM:
    """An :class:`LSTM` encoder of the variant's sizes whose weights make it compute what the variant computes;
    ``fill(name, blocks)`` gives nn.LSTM's ``[i | f | g | o]`` block ``name`` from the variant's blocks."""
    enc = LSTM(variant.input_size, variant.hidden_size, num_layers=variant.num_layers,
               bidirectional=variant.bidirectional).double()
    with torch.no_grad():
        for layer, rnn in enumerate(enc.rnns):
            for direction in range(variant.num_directions):
                cell = variant.cells[layer * variant.num_directions + direction]
                suffix = "_l0" + ("_reverse" if direction else "")
                for ours, theirs in (("weight_ih", "weight_ih"), ("weight_hh", "weight_hh"), ("bias", "bias_ih")):
                    blocks = lstm_rows(cell, getattr(cell, ours), ours)
                    target = getattr(rnn, theirs + suffix)
                    target.copy_(torch.cat([fill(name, blocks, ours) for name in "ifgo"]))
                getattr(rnn, "bias_hh" + suffix).zero_()
    return enc


def assert_same_outputs(variant, reference) -> None:
    x, mask = batch(torch.float64)
    got, want = variant(x, mask), reference(x, mask)
    for a, b in zip(got.layers, want.layers):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


@pytest.mark.parametrize("bidirectional,num_layers", [(False, 1), (True, 2)])
def test_peephole_lstm_with_zero_peepholes_is_nn_lstm(bidirectional, num_layers):
    torch.manual_seed(0)
    variant = PeepholeLSTM(5, 4, num_layers=num_layers, bidirectional=bidirectional).double().eval()
    assert all(bool((cell.peephole == 0).all()) for cell in variant.cells)
    assert_same_outputs(variant, matching_lstm(variant, lambda name, blocks, _: blocks[name]).eval())


def test_peepholes_matter_and_follow_the_equations():
    """One step by hand: the input and forget gates see c_{t-1}, the output gate sees c_t."""
    torch.manual_seed(1)
    cell = PeepholeCell(3, 2).double()
    with torch.no_grad():
        cell.peephole.normal_()
    x = torch.randn(1, 3, dtype=torch.float64)
    h, c = torch.randn(1, 2, dtype=torch.float64), torch.randn(1, 2, dtype=torch.float64)
    pre = x @ cell.weight_ih.t() + cell.bias + h @ cell.weight_hh.t()
    a_i, a_f, a_g, a_o = pre.chunk(4, dim=-1)
    p_i, p_f, p_o = cell.peephole
    c_t = torch.sigmoid(a_f + p_f * c) * c + torch.sigmoid(a_i + p_i * c) * torch.tanh(a_g)
    h_t = torch.sigmoid(a_o + p_o * c_t) * torch.tanh(c_t)
    got_h, (_, got_c) = cell.step(cell.project(x[:, None])[:, 0], (h, c))
    torch.testing.assert_close(got_c, c_t)
    torch.testing.assert_close(got_h, h_t)
    # and the peepholes matter: the same step without them differs
    with torch.no_grad():
        cell.peephole.zero_()
    assert not torch.allclose(cell.step(cell.project(x[:, None])[:, 0], (h, c))[0], h_t)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_cifg_is_an_lstm_whose_input_gate_mirrors_the_forget_gate(bidirectional):
    """``1 - sigmoid(a) = sigmoid(-a)``: an nn.LSTM with input-gate rows = -(forget-gate rows) is a CIFG."""
    torch.manual_seed(2)
    variant = CIFGLSTM(5, 4, bidirectional=bidirectional).double().eval()
    fill = lambda name, blocks, _: -blocks["f"] if name == "i" else blocks[name]  # noqa: E731
    assert_same_outputs(variant, matching_lstm(variant, fill).eval())


@pytest.mark.parametrize("bidirectional", [False, True])
def test_no_forget_gate_is_an_lstm_whose_forget_gate_is_always_open(bidirectional):
    """An nn.LSTM with zero forget-gate weights and a huge forget bias (sigmoid = 1 exactly) keeps all of c."""
    torch.manual_seed(3)
    variant = NoForgetLSTM(5, 4, bidirectional=bidirectional).double().eval()

    def fill(name, blocks, which):
        if name != "f":
            return blocks[name]
        return torch.full_like(blocks["i"], 1e4 if which == "bias" else 0.0)

    assert_same_outputs(variant, matching_lstm(variant, fill).eval())


@pytest.mark.parametrize("cell_type", [PeepholeCell, CIFGCell, NoForgetCell])
def test_gradcheck_tiny_cells(cell_type):
    torch.manual_seed(4)
    cell = cell_type(3, 2).double()
    if cell_type is PeepholeCell:
        with torch.no_grad():
            cell.peephole.normal_()
    x = torch.randn(2, 3, 3, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True, True, True], [True, True, False]])

    def f(x, *params):
        return run_cell(cell, x, mask)

    assert torch.autograd.gradcheck(f, (x, *cell.parameters()))


def test_cells_have_the_gate_rows_their_equations_need():
    assert PeepholeCell(3, 2).weight_ih.shape == (8, 3)
    assert CIFGCell(3, 2).weight_ih.shape == (6, 3) and NoForgetCell(3, 2).weight_hh.shape == (6, 2)


@pytest.mark.parametrize("encoder,cell_type", [(PeepholeLSTM, PeepholeCell), (CIFGLSTM, CIFGCell),
                                               (NoForgetLSTM, NoForgetCell)])
def test_each_variant_stacks_its_own_cell_in_every_layer_and_direction(encoder, cell_type):
    enc = encoder(3, 2, num_layers=2, bidirectional=True)
    assert len(enc.cells) == 4 and all(type(cell) is cell_type for cell in enc.cells)
    assert [cell.input_size for cell in enc.cells] == [3, 3, 4, 4]  # layer 1 reads both directions of layer 0
    assert all(cell.hidden_size == 2 for cell in enc.cells)
