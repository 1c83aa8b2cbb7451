"""Contract tests every SequenceEncoder must pass, plus encoder-specific behaviour."""

import importlib

import pytest
import torch
import yaml

from helpers.yaml_build import from_yaml
from onlstm_tasks.encoders import (
    CIFGLSTM,
    ChildSumTreeLSTM,
    GRU,
    LSTM,
    MLSTM,
    ONLSTM,
    SLSTM,
    NestedLSTM,
    NoForgetLSTM,
    PeepholeLSTM,
    SequenceEncoder,
)
from onlstm_tasks.encoders.base import reverse_padded
from onlstm_tasks.trees.source import HasDistances
from onlstm_tasks.encoders.dropout import locked_dropout
from onlstm_tasks import native
from onlstm_tasks.encoders.dropconnect import drop_connect, keep_threshold, random_lanes
from onlstm_tasks.encoders.onlstm.reference import reference_encode

ENCODERS = {
    "onlstm": lambda: ONLSTM(6, 8, 2),
    "onlstm-bi-2": lambda: ONLSTM(6, 8, 4, num_layers=2, bidirectional=True),
    "onlstm-symmetric": lambda: ONLSTM(6, 8, 2, bidirectional=True, master_input="symmetric"),
    "lstm-bi-2": lambda: LSTM(6, 8, num_layers=2, bidirectional=True),
    "gru-bi": lambda: GRU(6, 8, bidirectional=True),
    "peephole-bi-2": lambda: PeepholeLSTM(6, 8, num_layers=2, bidirectional=True),
    "cifg-bi": lambda: CIFGLSTM(6, 8, bidirectional=True),
    "noforget-bi-2": lambda: NoForgetLSTM(6, 8, num_layers=2, bidirectional=True),
    "nested-bi": lambda: NestedLSTM(6, 8, bidirectional=True),
    "slstm-bi-2": lambda: SLSTM(6, 8, num_layers=2, bidirectional=True, num_heads=2),
    "mlstm-bi-2": lambda: MLSTM(6, 8, num_layers=2, bidirectional=True, num_heads=2),
}
LENGTHS = torch.tensor([7, 5, 2, 1])


def padded_batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 7, 6, generator=g)
    mask = torch.arange(7)[None, :] < LENGTHS[:, None]
    return x, mask


@pytest.mark.parametrize("name", ENCODERS)
def test_padding_invariance_and_zero_padding(name):
    torch.manual_seed(0)
    enc = ENCODERS[name]().eval()
    x, mask = padded_batch()
    out = enc(x, mask)
    assert out.hidden.shape == (4, 7, enc.output_size)
    assert len(out.layers) == enc.num_layers
    # garbage in the padding changes nothing
    noisy = torch.where(mask[..., None], x, torch.randn_like(x) * 100)
    out_noisy = enc(noisy, mask)
    torch.testing.assert_close(out.hidden, out_noisy.hidden)
    for b, n in enumerate(LENGTHS.tolist()):
        alone = enc(x[b : b + 1, :n])  # no padding at all
        torch.testing.assert_close(out.hidden[b, :n], alone.hidden[0], atol=1e-6, rtol=1e-5)
        for layer, layer_alone in zip(out.layers, alone.layers):
            torch.testing.assert_close(layer[b, :n], layer_alone[0], atol=1e-6, rtol=1e-5)
        assert (out.hidden[b, n:] == 0).all()
        for layer in out.layers:
            assert (layer[b, n:] == 0).all()
        if isinstance(out, HasDistances):
            torch.testing.assert_close(out.distances[:, :, b, :n], alone.distances[:, :, 0], atol=1e-6, rtol=1e-5)
            assert (out.distances[:, :, b, n:] == 0).all() and (out.input_distances[:, :, b, n:] == 0).all()


@pytest.mark.parametrize("name", ENCODERS)
def test_nan_in_the_padding_reaches_neither_outputs_nor_gradients(name):
    torch.manual_seed(0)
    enc = ENCODERS[name]()
    x, mask = padded_batch()
    x = torch.where(mask[..., None], x, torch.tensor(float("nan"))).requires_grad_()
    out = enc(x, mask)
    assert not any(bool(layer.isnan().any()) for layer in out.layers)
    assert (out.hidden[~mask] == 0).all()
    out.hidden.sum().backward()
    assert all(bool(p.grad.isfinite().all()) for p in enc.parameters() if p.grad is not None)
    assert (x.grad[~mask] == 0).all()


@pytest.mark.parametrize("name", ENCODERS)
def test_gradients_reach_every_parameter_and_not_the_padding(name):
    torch.manual_seed(0)
    enc = ENCODERS[name]()
    x, mask = padded_batch()
    x.requires_grad_(True)
    enc(x, mask).hidden.pow(2).sum().backward()
    for pname, p in enc.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, pname
    assert (x.grad[~mask] == 0).all()


@pytest.mark.parametrize("cls", [ONLSTM, LSTM, GRU])
def test_backward_direction_equals_forward_direction_on_reversed_sequences(cls):
    torch.manual_seed(0)
    kwargs = {"chunk_size": 2} if cls is ONLSTM else {}
    bi = cls(6, 8, bidirectional=True, **kwargs).eval()
    uni = cls(6, 8, **kwargs).eval()
    if cls is ONLSTM:
        uni.cell(0).load_state_dict(bi.cell(0, 1).state_dict())
    else:
        uni.rnns[0].load_state_dict({k.replace("_reverse", ""): v for k, v in bi.rnns[0].state_dict().items()
                                     if k.endswith("_reverse")})
    x, mask = padded_batch()
    backward = bi(x, mask).hidden[..., 8:]
    expected = reverse_padded(uni(reverse_padded(x, LENGTHS), mask).hidden, LENGTHS)
    torch.testing.assert_close(backward, expected)
    if cls is ONLSTM:
        d_bi = bi(x, mask).distances[0, 1]
        d_uni = reverse_padded(uni(reverse_padded(x, LENGTHS), mask).distances[0, 0], LENGTHS)
        torch.testing.assert_close(d_bi, d_uni)


def test_dropconnect_one_mask_per_forward_pass_shared_over_time():
    enc = ONLSTM(6, 8, 2, num_layers=2, bidirectional=True, dropconnect=0.5).train()
    x, mask = padded_batch()
    torch.manual_seed(42)
    out = enc(x, mask)
    torch.manual_seed(42)
    weights = enc.recurrent_weights()  # what that pass sampled: one matrix per layer and direction
    assert all((w == 0).float().mean() > 0.3 for w in weights)
    ref_h, ref_f, _ = reference_encode(enc, x, mask, recurrent_weights=weights)  # the same matrix at every step
    torch.testing.assert_close(out.hidden, ref_h, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.distances, ref_f, atol=1e-5, rtol=1e-5)
    # a new pass samples a new mask; eval mode uses the plain weights and is deterministic
    assert not torch.allclose(enc(x, mask).hidden, out.hidden)
    enc.eval()
    torch.testing.assert_close(enc(x, mask).hidden, enc(x, mask).hidden)
    torch.testing.assert_close(enc(x, mask).hidden, reference_encode(enc, x, mask)[0], atol=1e-5, rtol=1e-5)


GENERATORS = [pytest.param(True, id="compiled-xoshiro",
                            marks=[pytest.mark.compiled, pytest.mark.skipif(not native.available(), reason="the compiled kernels were not built")]),
              pytest.param(False, id="torch-random")]


@pytest.mark.parametrize("compiled", GENERATORS)
@pytest.mark.parametrize("keep", [0.5, 0.7, 0.9, 0.999])
def test_dropconnect_keeps_at_the_asked_rate_with_mean_one(keep, compiled):
    torch.manual_seed(0)
    n = 1 << 20
    lanes = random_lanes(n, compiled=compiled)
    (w,) = drop_connect([torch.ones(n)], 1 - keep, training=True, native_ops=compiled)
    threshold, scale = keep_threshold(keep)
    rounded = threshold / 2**15  # the keep probability at the masks' 15-bit resolution
    assert abs(rounded - keep) <= 2**-16 and scale == 1 / rounded  # so the mask's mean is exactly 1
    assert set(w.unique().tolist()) <= {0.0, torch.tensor(scale).item()}  # scale in float32
    sigma = (keep * (1 - keep) / n) ** 0.5
    assert abs((w != 0).float().mean().item() - keep) < 5 * sigma
    # every lane of the random words is uniform, and neighbouring entries (which share a word) are not correlated
    kept = ((lanes & 0x7FFF) < threshold).view(-1, 4).float()
    for lane in range(4):
        assert abs(kept[:, lane].mean().item() - keep) < 10 * sigma
    for a, b in ((0, 1), (2, 3), (0, 3), (1, 2)):
        assert abs((kept[:, a] * kept[:, b]).mean().item() - keep**2) < 10 * sigma
    values = (lanes & 0x7FFF).float()  # uniform on 0..32767: mean and variance of the discrete uniform
    assert abs(values.mean().item() - 16383.5) < 5 * 9459 / n**0.5
    assert abs(values.var().item() / (32768**2 - 1) * 12 - 1) < 0.01


@pytest.mark.parametrize("compiled", GENERATORS)
def test_dropconnect_masks_follow_torch_manual_seed_and_differ_between_calls(compiled):
    w = torch.randn(50, 40)
    torch.manual_seed(7)
    a, b = drop_connect([w, w], 0.5, training=True, native_ops=compiled)
    torch.manual_seed(7)
    a2, b2 = drop_connect([w, w], 0.5, training=True, native_ops=compiled)
    c, _ = drop_connect([w, w], 0.5, training=True, native_ops=compiled)
    assert torch.equal(a, a2) and torch.equal(b, b2)
    assert not torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize("compiled", GENERATORS)
def test_dropconnect_weights_are_zero_or_scaled_and_get_masked_gradients(compiled):
    enc = ONLSTM(6, 8, 2, dropconnect=0.3, backend="auto" if compiled else "torch").train()
    torch.manual_seed(3)
    (w,) = enc.recurrent_weights()
    kept = w != 0
    scale = 2**15 / round(0.7 * 2**15)
    torch.testing.assert_close(w[kept], enc.cells[0].weight_hh[kept] * scale)
    (w * torch.arange(w.numel()).view_as(w)).sum().backward()
    grad = enc.cells[0].weight_hh.grad
    assert (grad[~kept] == 0).all()
    torch.testing.assert_close(grad[kept], torch.arange(w.numel()).view_as(w)[kept].float() * scale)


def test_dropconnect_on_library_lstm():
    enc = LSTM(6, 8, dropconnect=0.5).train()
    x, mask = padded_batch()
    a, b = enc(x, mask).hidden, enc(x, mask).hidden
    assert not torch.allclose(a, b)
    enc.eval()
    torch.testing.assert_close(enc(x, mask).hidden, enc(x, mask).hidden)


def test_locked_dropout_between_layers_only_in_training():
    enc = ONLSTM(6, 8, 2, num_layers=2, dropout=0.5)
    x, mask = padded_batch()
    enc.train()
    assert not torch.allclose(enc(x, mask).hidden, enc(x, mask).hidden)
    enc.eval()
    torch.testing.assert_close(enc(x, mask).hidden, enc(x, mask).hidden)


def test_locked_dropout_one_mask_per_sequence_shared_over_time():
    torch.manual_seed(0)
    B, T, D, p = 4, 7, 64, 0.5
    x = torch.rand(B, T, D) + 0.5  # no zeros of its own: every zero below is the mask's
    out = locked_dropout(x, p, training=True)
    dropped = out == 0  # [B, T, D]
    # the same features are dropped at every time step of a sequence...
    assert torch.equal(dropped, dropped[:, :1].expand(B, T, D))
    # ...but each sequence (batch row) has its own mask
    rows = dropped[:, 0]  # [B, D]
    assert all(not torch.equal(rows[a], rows[b]) for a in range(B) for b in range(a + 1, B))
    assert 0.3 < rows.float().mean() < 0.7
    torch.testing.assert_close(out[~dropped], x[~dropped] / (1 - p))  # inverted scaling of what is kept
    assert locked_dropout(x, p, training=False) is x and locked_dropout(x, 0.0, training=True) is x


@pytest.mark.parametrize(
    "snippet",
    [
        "class_path: onlstm_tasks.encoders.ONLSTM\ninit_args: {input_size: 6, hidden_size: 8, chunk_size: 2, "
        "bidirectional: true, num_layers: 2, dropconnect: 0.1}",
        "class_path: onlstm_tasks.encoders.LSTM\ninit_args: {input_size: 6, hidden_size: 8, bidirectional: true}",
        "class_path: onlstm_tasks.encoders.GRU\ninit_args: {input_size: 6, hidden_size: 8}",
        "class_path: onlstm_tasks.encoders.PeepholeLSTM\ninit_args: {input_size: 6, hidden_size: 8, num_layers: 2}",
        "class_path: onlstm_tasks.encoders.CIFGLSTM\ninit_args: {input_size: 6, hidden_size: 8, bidirectional: true}",
        "class_path: onlstm_tasks.encoders.NoForgetLSTM\ninit_args: {input_size: 6, hidden_size: 8, dropout: 0.1}",
        # the module path of ONLSTM before issue 17 (now its package), as older YAML configs and checkpoints name it
        "class_path: onlstm_tasks.encoders.onlstm.ONLSTM\ninit_args: {input_size: 6, hidden_size: 12, chunk_size: 3, "
        "master_input: symmetric, dropout: 0.2}",
    ],
)
def test_encoders_build_from_yaml_through_jsonargparse(snippet):
    """The YAML builds the class its ``class_path`` names, with every ``init_args`` value applied."""
    spec = yaml.safe_load(snippet)
    module, _, name = spec["class_path"].rpartition(".")
    enc = from_yaml(SequenceEncoder, spec)
    assert type(enc) is getattr(importlib.import_module(module), name)
    for key, value in spec["init_args"].items():
        assert getattr(enc, key) == value, key
    directions = 2 if spec["init_args"].get("bidirectional") else 1
    assert enc.output_size == spec["init_args"]["hidden_size"] * directions
    x, mask = padded_batch()
    out = enc.eval()(x, mask)
    assert out.hidden.shape == (*x.shape[:2], enc.output_size)
    assert len(out.layers) == spec["init_args"].get("num_layers", 1)


@pytest.mark.parametrize(
    "build,message",
    [
        (lambda: ONLSTM(6, 10, 4), "hidden_size must be a positive multiple of chunk_size"),
        (lambda: ONLSTM(6, 8, 2, dropout=1.0), "dropout must be in"),
        (lambda: ONLSTM(6, 8, 2, master_input="reverse"), "master_input must be one of"),
        (lambda: LSTM(6, 8, num_layers=0), "num_layers must be at least 1"),
    ],
)
def test_bad_constructor_arguments(build, message):
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.parametrize("enc", [ONLSTM(6, 8, 2), LSTM(6, 8)])
def test_bad_inputs_name_the_argument(enc):
    x, mask = padded_batch()
    with pytest.raises(ValueError, match=r"x must be \[batch, time, 6\]"):
        enc(x[0], mask[0])
    with pytest.raises(ValueError, match="input_size=6"):
        enc(torch.randn(4, 7, 5), mask)
    with pytest.raises(ValueError, match="mask must be a bool tensor"):
        enc(x, mask.long())
    with pytest.raises(ValueError, match="mask row 1 has no true token"):
        enc(x, mask & (torch.arange(4) != 1)[:, None])
    with pytest.raises(ValueError, match="left-aligned"):
        enc(x, mask.flip(1))
    with pytest.raises(ValueError, match="mask must have shape"):
        enc(x, mask[:, :3])


def test_combined_distances():
    enc = ONLSTM(6, 8, 2, num_layers=2, bidirectional=True)
    out = enc(*padded_batch())
    forward, backward = out.distances[:, 0], out.distances[:, 1]
    aligned = torch.cat((torch.zeros_like(backward[..., :1]), backward[..., :-1]), dim=-1)  # see test_direction_alignment
    torch.testing.assert_close(out.combined_distances("mean"), (forward + aligned) / 2)
    torch.testing.assert_close(out.combined_distances("forward"), forward)
    backward_input = out.input_distances[:, 1]
    torch.testing.assert_close(out.combined_distances("backward", which="input")[..., 1:], backward_input[..., :-1])
    assert out.combined_distances("max").shape == (2, 4, 7)
    with pytest.raises(ValueError, match="which must be one of"):
        out.combined_distances(which="output")
    assert not isinstance(LSTM(6, 8)(*padded_batch()), HasDistances)  # the capability only where it is


def test_nan_in_the_padding_of_a_tree_lstm_stays_there():
    torch.manual_seed(0)
    enc = ChildSumTreeLSTM(6, 8, tree_source="gold")
    x, mask = padded_batch()
    steps = torch.arange(7)
    chain = torch.where(steps[None] + 1 < LENGTHS[:, None], steps[None] + 1, steps[None]).expand(4, 7)
    x = torch.where(mask[..., None], x, torch.tensor(float("nan"))).requires_grad_()
    out = enc(x, mask, chain)
    assert not bool(out.hidden.isnan().any()) and (out.hidden[~mask] == 0).all()
    out.hidden.sum().backward()
    assert all(bool(p.grad.isfinite().all()) for p in enc.parameters() if p.grad is not None)
