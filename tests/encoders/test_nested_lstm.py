"""Nested LSTM against its equations written out by hand, exact consequences of those equations, the encoder
contract (padding, directions, layers, gradients) and construction from YAML.

The oracle is :func:`reference_step`: one step for one sentence (1-D vectors), one line per equation of the
paper, with every weight block named as in the module docstring. :func:`reference_encode` runs it token by token
on each sentence alone (no padding, no batching, the backward direction by reversing the list of tokens).
"""

from __future__ import annotations


import pytest
import torch
import yaml
from torch import nn

from helpers.paths import REPO
from helpers.yaml_build import from_yaml
from onlstm_tasks.encoders import SequenceEncoder
from onlstm_tasks.encoders.cell_stack import run_cell
from onlstm_tasks.encoders.nested_lstm import NestedLSTM, NestedLSTMCell

LENGTHS = [6, 3, 1, 5]
CONFIGS = REPO / "configs" / "ner"
BIG = 1e4  # sigmoid(+BIG) == 1 and sigmoid(-BIG) == 0 exactly in float64


def batch(dtype=torch.float64, features=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(LENGTHS), max(LENGTHS), features, generator=g, dtype=dtype)
    mask = torch.arange(max(LENGTHS))[None, :] < torch.tensor(LENGTHS)[:, None]
    return x, mask


def blocks(weight: torch.Tensor) -> dict[str, torch.Tensor]:
    """Gate blocks ``[i | f | g | o]`` of a weight or bias by name (``g`` is the paper's candidate ``c``)."""
    return dict(zip("ifgo", weight.chunk(4)))


def reference_step(cell: NestedLSTMCell, x, h, c, c_inner):
    """One Nested LSTM step for one sentence: x [D], h, c, c_inner [H]; returns (h_t, c_t, c~_t)."""
    W, U, b = blocks(cell.weight_ih), blocks(cell.weight_hh), blocks(cell.bias)
    W_, U_, b_ = blocks(cell.inner_weight_ih), blocks(cell.inner_weight_hh), blocks(cell.inner_bias)
    s = torch.sigmoid
    i = s(W["i"] @ x + U["i"] @ h + b["i"])
    f = s(W["f"] @ x + U["f"] @ h + b["f"])
    o = s(W["o"] @ x + U["o"] @ h + b["o"])
    g = torch.tanh(W["g"] @ x + U["g"] @ h + b["g"])
    x_in = i * g  # x~_t
    h_in = f * c  # h~_{t-1}
    i_in = s(W_["i"] @ x_in + U_["i"] @ h_in + b_["i"])
    f_in = s(W_["f"] @ x_in + U_["f"] @ h_in + b_["f"])
    o_in = s(W_["o"] @ x_in + U_["o"] @ h_in + b_["o"])
    g_in = torch.tanh(W_["g"] @ x_in + U_["g"] @ h_in + b_["g"])
    c_inner_t = f_in * c_inner + i_in * g_in
    c_t = o_in * torch.tanh(c_inner_t)  # = h~_t
    h_t = o * torch.tanh(c_t)
    return h_t, c_t, c_inner_t


def reference_direction(cell: NestedLSTMCell, xs: list[torch.Tensor]) -> list[torch.Tensor]:
    h = c = c_inner = xs[0].new_zeros(cell.hidden_size)
    out = []
    for x in xs:
        h, c, c_inner = reference_step(cell, x, h, c, c_inner)
        out.append(h)
    return out


def reference_encode(enc: NestedLSTM, sentence: torch.Tensor) -> list[torch.Tensor]:
    """Every layer's outputs [n, H * directions] for one unpadded sentence [n, D] (dropout off)."""
    xs, layers = list(sentence), []
    for layer in range(enc.num_layers):
        cells = enc.cells[layer * enc.num_directions : (layer + 1) * enc.num_directions]
        outs = [reference_direction(cells[0], xs)]
        if enc.bidirectional:
            outs.append(reference_direction(cells[1], xs[::-1])[::-1])
        xs = [torch.cat(per_token) for per_token in zip(*outs)]
        layers.append(torch.stack(xs))
    return layers


def random_state(hidden: int, rows: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(rows, hidden, generator=g, dtype=torch.float64) for _ in range(3))


def test_one_step_matches_the_equations_by_hand():
    torch.manual_seed(0)
    cell = NestedLSTMCell(3, 4).double()
    x = torch.randn(5, 3, dtype=torch.float64)
    state = random_state(4, 5, seed=1)  # a non-zero inner memory, so its term is exercised
    h_t, (h_state, c_t, c_inner_t) = cell.step(cell.project(x[:, None])[:, 0], state)
    assert h_state is h_t
    for row in range(5):
        want = reference_step(cell, x[row], *(s[row] for s in state))
        for got, expected in zip((h_t[row], c_t[row], c_inner_t[row]), want):
            torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
    # the inner memory is read: another c~_{t-1} gives another step
    other = (state[0], state[1], state[2] + 1.0)
    assert not torch.allclose(cell.step(cell.project(x[:, None])[:, 0], other)[0], h_t)


@pytest.mark.parametrize("bidirectional,num_layers", [(False, 1), (True, 2)])
def test_encoder_matches_the_reference_run_sentence_by_sentence(bidirectional, num_layers):
    torch.manual_seed(2)
    enc = NestedLSTM(5, 4, num_layers=num_layers, bidirectional=bidirectional, dropout=0.3).double().eval()
    x, mask = batch()
    out = enc(x, mask)
    for b, n in enumerate(LENGTHS):
        for got, want in zip(out.layers, reference_encode(enc, x[b, :n]), strict=True):
            torch.testing.assert_close(got[b, :n], want, rtol=0, atol=1e-12)
            assert bool((got[b, n:] == 0).all())


def saturated_cell(fill_inner) -> NestedLSTMCell:
    """A random cell whose inner gate rows have zero weights and bias ``fill_inner(name)`` (``±BIG``: the gate is
    exactly 0 or 1); the inner candidate rows are left to the caller."""
    torch.manual_seed(3)
    cell = NestedLSTMCell(3, 4).double()
    with torch.no_grad():
        for name in "ifo":
            blocks(cell.inner_weight_ih)[name].zero_()
            blocks(cell.inner_weight_hh)[name].zero_()
            blocks(cell.inner_bias)[name].fill_(fill_inner(name))
    return cell


def test_inner_lstm_passing_its_input_through_squashes_the_plain_lstm_memory_update():
    """Inner gates i~ = o~ = 1, f~ = 0 and inner candidate weights W~_c = U~_c = I, b~_c = 0 give
    g~_t = tanh(x~_t + h~_{t-1}) = tanh(i_t * g_t + f_t * c_{t-1}), so c~_t = tanh(c^LSTM_t) and
    c_t = tanh(tanh(c^LSTM_t)), where c^LSTM_t is what nn.LSTMCell (same outer weights) computes from the same
    (h_{t-1}, c_{t-1}); and h_t = o_t * tanh(c_t) while nn.LSTMCell's h = o_t * tanh(c^LSTM_t). This is exact, and
    it is the closest the equations come to a plain LSTM (the tanh squashings cannot be undone)."""
    cell = saturated_cell(lambda name: -BIG if name == "f" else BIG)
    lstm = nn.LSTMCell(3, 4).double()
    with torch.no_grad():
        eye = torch.eye(4, dtype=torch.float64)
        blocks(cell.inner_weight_ih)["g"].copy_(eye)
        blocks(cell.inner_weight_hh)["g"].copy_(eye)
        blocks(cell.inner_bias)["g"].zero_()
        lstm.weight_ih.copy_(cell.weight_ih)
        lstm.weight_hh.copy_(cell.weight_hh)
        lstm.bias_ih.copy_(cell.bias)
        lstm.bias_hh.zero_()
    x = torch.randn(2, 7, 3, dtype=torch.float64)
    state = random_state(4, 2, seed=4)
    for t in range(7):
        h_lstm, c_lstm = lstm(x[:, t], state[:2])
        h_t, state = cell.step(cell.project(x[:, t : t + 1])[:, 0], state)
        torch.testing.assert_close(state[2], torch.tanh(c_lstm), rtol=0, atol=1e-12)
        torch.testing.assert_close(state[1], torch.tanh(torch.tanh(c_lstm)), rtol=0, atol=1e-12)
        torch.testing.assert_close(h_t * torch.tanh(c_lstm), h_lstm * torch.tanh(state[1]), rtol=0, atol=1e-12)


def test_inner_memory_persists_across_time_as_part_of_the_state():
    """Inner gates f~ = o~ = 1, i~ = 0: c~_t = c~_{t-1} exactly, whatever the inputs, so the outer memory is
    c_t = tanh(c~_0) at every step: the inner memory is carried by the state, not rebuilt each step."""
    cell = saturated_cell(lambda name: -BIG if name == "i" else BIG)
    x = torch.randn(2, 7, 3, dtype=torch.float64) * 3
    state = random_state(4, 2, seed=5)
    c_inner_0 = state[2]
    for t in range(7):
        _, state = cell.step(cell.project(x[:, t : t + 1])[:, 0], state)
        assert torch.equal(state[2], c_inner_0)
        assert torch.equal(state[1], torch.tanh(c_inner_0))


@pytest.mark.parametrize("bidirectional", [False, True])
def test_padding_changes_nothing_and_padded_outputs_are_zero(bidirectional):
    torch.manual_seed(6)
    enc = NestedLSTM(5, 8, num_layers=2, bidirectional=bidirectional).eval()
    x, mask = batch(torch.float32)
    out = enc(x, mask)
    assert out.hidden.shape == (4, max(LENGTHS), enc.output_size) and len(out.layers) == 2
    assert all(bool((layer[~mask] == 0).all()) for layer in out.layers)
    noisy = enc(torch.where(mask[..., None], x, torch.randn_like(x) * 100), mask)
    torch.testing.assert_close(noisy.hidden, out.hidden, rtol=0, atol=0)
    for b, n in enumerate(LENGTHS):
        alone = enc(x[b : b + 1, :n])
        for layer, layer_alone in zip(out.layers, alone.layers, strict=True):
            torch.testing.assert_close(layer[b, :n], layer_alone[0], atol=1e-6, rtol=1e-5)


def test_every_parameter_gets_a_gradient():
    torch.manual_seed(7)
    enc = NestedLSTM(5, 4, num_layers=2, bidirectional=True)
    x, mask = batch(torch.float32)
    enc(x, mask).hidden.pow(2).sum().backward()
    for name, p in enc.named_parameters():
        assert p.grad is not None and bool(p.grad.abs().sum() > 0), name


def test_gradcheck_tiny_cell():
    torch.manual_seed(8)
    cell = NestedLSTMCell(3, 2).double()
    x = torch.randn(2, 3, 3, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True, True, True], [True, True, False]])

    def f(x, *params):
        return run_cell(cell, x, mask)

    assert torch.autograd.gradcheck(f, (x, *cell.parameters()))


def test_cell_parameter_shapes():
    cell = NestedLSTMCell(3, 2)
    assert cell.weight_ih.shape == (8, 3) and cell.weight_hh.shape == (8, 2) and cell.bias.shape == (8,)
    assert cell.inner_weight_ih.shape == (8, 2) and cell.inner_weight_hh.shape == (8, 2)
    assert cell.inner_bias.shape == (8,)
    assert [s.shape for s in cell.initial_state(5, torch.zeros(1))] == [(5, 2)] * 3


def build_from_yaml(snippet: str) -> SequenceEncoder:
    return from_yaml(SequenceEncoder, snippet)


def test_builds_from_yaml_through_jsonargparse():
    enc = build_from_yaml("class_path: onlstm_tasks.encoders.nested_lstm.NestedLSTM\n"
                          "init_args: {input_size: 6, hidden_size: 8, num_layers: 2, bidirectional: true, "
                          "dropout: 0.1}")
    assert isinstance(enc, NestedLSTM) and (enc.input_size, enc.output_size, enc.num_layers) == (6, 16, 2)
    x = torch.randn(4, 7, 6)
    mask = torch.arange(7)[None, :] < torch.tensor([7, 5, 2, 1])[:, None]
    assert enc(x, mask).hidden.shape == (4, 7, 16)


def test_ontonotes_config_differs_from_the_lstm_baseline_only_in_the_encoder():
    nested = yaml.safe_load((CONFIGS / "ontonotes_nested_lstm_crf.yaml").read_text())
    lstm = yaml.safe_load((CONFIGS / "ontonotes_lstm_crf.yaml").read_text())
    nested_encoder = nested["model"]["init_args"].pop("encoder")
    lstm_encoder = lstm["model"]["init_args"].pop("encoder")
    assert nested == lstm
    assert nested_encoder["class_path"] == "onlstm_tasks.encoders.NestedLSTM"
    shared = ("hidden_size", "bidirectional")
    assert {k: nested_encoder["init_args"][k] for k in shared} == {k: lstm_encoder["init_args"][k] for k in shared}


def test_ontonotes_config_encoder_block_builds():
    """Needs ``NestedLSTM`` exported from ``onlstm_tasks.encoders`` (the config's class_path)."""
    block = yaml.safe_load((CONFIGS / "ontonotes_nested_lstm_crf.yaml").read_text())["model"]["init_args"]["encoder"]
    block["init_args"]["input_size"] = 6
    enc = build_from_yaml(yaml.safe_dump(block))
    assert type(enc) is NestedLSTM and enc.output_size == 512
