"""ChildSumTreeLSTM (Tai et al., 2015): the level-batched passes against the recursive reference (hand-made and
random trees, outputs and gradients, float64), padding, a chain tree as a sequential LSTM, gradcheck, where the
tree comes from (gold / induced / none), clear errors, YAML construction, an NERTagger over gold trees."""

from __future__ import annotations

import functools
import random

import pytest
import torch
import yaml
from helpers.paths import FIXTURES, REPO
from helpers.model_invariants import (
    assert_batched_equals_single,
    assert_checkpoint_round_trip,
    assert_gradients_reach_every_parameter,
)

from helpers.yaml_build import from_yaml
from onlstm_tasks.data.ner.module import NERDataModule
from onlstm_tasks.embedders.word_char import WordCharEmbedder
from onlstm_tasks.encoders import LSTM, ONLSTM, SequenceEncoder, TreeEncoder, TreeOutput
from onlstm_tasks.encoders.base import combine_directions
from onlstm_tasks.encoders.tree_lstm import ChildSumTreeLSTM, reference_tree_lstm, tree_levels
from onlstm_tasks.tasks.ner import EncoderFactory, NERTagger
from onlstm_tasks.trees.heads import heads_to_tensor
from onlstm_tasks.trees.induce import heads_tensor
from onlstm_tasks.trees.source import HasDistances

torch.set_num_threads(1)

CONFIGS = REPO / "configs"
TREES = FIXTURES / "ner" / "trees"
D, H = 5, 4
INNER = functools.partial(ONLSTM, hidden_size=8, chunk_size=2, bidirectional=True)
# 0-based, a root points to itself
HAND_MADE = {
    "one token": [0],
    "star": [2, 2, 2, 2, 2],  # token 2 heads everything: four children summed at once
    "deep and bushy": [1, 1, 1, 4, 1, 4, 5, 5],  # several children at several heights
    "forest": [0, 0, 3, 3, 3, 4],  # two roots (a sentence cut for length)
    "right chain": [1, 2, 3, 3],
    "left chain": [0, 0, 1, 2],
}


def tree_lstm(seed=0, top_down=True, dtype=torch.float64, **options) -> ChildSumTreeLSTM:
    torch.manual_seed(seed)
    return ChildSumTreeLSTM(D, H, top_down=top_down, **options).to(dtype)


def random_tree(n: int, rng: random.Random) -> list[int]:
    """A random (possibly non-projective) tree: tokens attached in random order to an already attached token."""
    order = list(range(n))
    rng.shuffle(order)
    heads = [0] * n
    heads[order[0]] = order[0]
    for k, t in enumerate(order[1:], start=1):
        heads[t] = order[rng.randrange(k)]
    return heads


def batch_of(trees: list[list[int]], seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    T = max(len(t) for t in trees)
    x = torch.randn(len(trees), T, D, generator=g, dtype=dtype)
    mask = torch.arange(T)[None, :] < torch.tensor([len(t) for t in trees])[:, None]
    heads = heads_to_tensor([[0 if h == t else h + 1 for t, h in enumerate(tree)] for tree in trees], T)
    return x, mask, heads


def assert_matches_reference(model: ChildSumTreeLSTM, trees: list[list[int]], seed=0) -> None:
    """Outputs and the gradients of a random projection of them (w.r.t. x and every parameter)."""
    x, mask, heads = batch_of(trees, seed)
    x.requires_grad_(True)
    out = model(x, mask, heads).hidden
    probe = torch.randn_like(out)
    params = [p for p in model.parameters()]
    grads = torch.autograd.grad((out * probe).sum(), [x, *params])
    ref_loss = 0
    for b, tree in enumerate(trees):
        n = len(tree)
        ref = reference_tree_lstm(model, x[b, :n], tree)
        torch.testing.assert_close(out[b, :n], ref, atol=1e-12, rtol=1e-10)
        ref_loss = ref_loss + (ref * probe[b, :n]).sum()
    ref_grads = torch.autograd.grad(ref_loss, [x, *params])
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-10)


# ---- the passes against the reference ---------------------------------------------------------------------


@pytest.mark.parametrize("top_down", [True, False])
def test_hand_made_trees_match_the_reference(top_down):
    model = tree_lstm(top_down=top_down)
    assert model.output_size == (2 * H if top_down else H)
    assert_matches_reference(model, list(HAND_MADE.values()))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_trees_match_the_reference_one_call_per_level(seed):
    rng = random.Random(seed)
    trees = [random_tree(n, rng) for n in (9, 3, 7, 1, 9, 5)]
    model = tree_lstm(seed)
    calls = {"child_proj": 0, "top_down": 0}
    for name, module in (("child_proj", model.bottom_up.child_proj), ("top_down", model.top_down.cell)):
        module.register_forward_hook(lambda *_, name=name: calls.__setitem__(name, calls[name] + 1))
    assert_matches_reference(model, trees, seed)
    # batched by level: one step per height (bottom-up) and per depth (top-down) of the whole batch, not per node
    x, mask, heads = batch_of(trees, seed)
    height, depth = tree_levels(heads, mask)
    assert calls == {"child_proj": int(height.max()) + 1, "top_down": int(depth.max()) + 1}


def test_tree_levels_on_a_hand_made_tree():
    x, mask, heads = batch_of([HAND_MADE["deep and bushy"], HAND_MADE["forest"]])
    height, depth = tree_levels(heads, mask)
    assert height.tolist() == [[0, 3, 0, 0, 2, 1, 0, 0], [1, 0, 0, 2, 1, 0, -1, -1]]
    assert depth.tolist() == [[1, 0, 1, 2, 1, 2, 3, 3], [0, 1, 1, 0, 1, 2, -1, -1]]


def test_padding_invariance_and_zero_padding():
    trees = [random_tree(n, random.Random(n)) for n in (7, 5, 2, 1)]
    x, mask, heads = batch_of(trees, dtype=torch.float32)
    for model in (tree_lstm(dtype=torch.float32).eval(),
                  tree_lstm(dtype=torch.float32, encoder=INNER, tree_source="induced").eval()):
        out = model(x, mask, heads)
        noisy = torch.where(mask[..., None], x, torch.randn_like(x) * 100)
        torch.testing.assert_close(model(noisy, mask, heads).hidden, out.hidden)
        for b, tree in enumerate(trees):
            n = len(tree)
            alone = model(x[b : b + 1, :n], None, heads[b : b + 1, :n])
            torch.testing.assert_close(out.hidden[b, :n], alone.hidden[0], atol=1e-6, rtol=1e-5)
            assert torch.equal(out.heads[0][b, :n], alone.heads[0][0])
            assert (out.hidden[b, n:] == 0).all() and all((layer[b, n:] == 0).all() for layer in out.layers)


def test_a_chain_tree_is_a_sequential_lstm():
    """Heads t -> t + 1 (the last token the root): every node has one child, its left neighbour, so the bottom-up
    pass is a left-to-right LSTM over x (f_j,j-1 is the LSTM forget gate) and the top-down pass a right-to-left
    LSTM over the bottom-up states. Checked against torch's nn.LSTM with the weights copied in."""
    model = tree_lstm()
    T = 6
    x, mask, heads = batch_of([[t + 1 for t in range(T - 1)] + [T - 1]])
    out = model(x, mask, heads).hidden[0]

    bu = model.bottom_up
    W_i, W_f, W_o, W_u = bu.input_proj.weight.chunk(4)
    b_i, b_f, b_o, b_u = bu.input_proj.bias.chunk(4)
    U_i, U_o, U_u = bu.child_proj.weight.chunk(3)
    forward = torch.nn.LSTM(D, H, batch_first=True).double()  # gate order i, f, g (= u), o
    with torch.no_grad():
        forward.weight_ih_l0.copy_(torch.cat((W_i, W_f, W_u, W_o)))
        forward.weight_hh_l0.copy_(torch.cat((U_i, bu.forget_proj.weight, U_u, U_o)))
        forward.bias_ih_l0.copy_(torch.cat((b_i, b_f, b_u, b_o)))
        forward.bias_hh_l0.zero_()
    up = forward(x)[0][0]
    torch.testing.assert_close(out[:, :H], up, atol=1e-12, rtol=1e-10)

    cell = model.top_down.cell
    backward = torch.nn.LSTM(H, H, batch_first=True).double()
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            getattr(backward, f"{name}_l0").copy_(getattr(cell, name))
    down = backward(up.flip(0)[None])[0][0].flip(0)
    torch.testing.assert_close(out[:, H:], down, atol=1e-12, rtol=1e-10)

    # and by hand for the first (leaf) token: c = i * u, h = o * tanh(c)
    x0 = x[0, 0]
    c0 = torch.sigmoid(W_i @ x0 + b_i) * torch.tanh(W_u @ x0 + b_u)
    torch.testing.assert_close(out[0, :H], torch.sigmoid(W_o @ x0 + b_o) * torch.tanh(c0))


def test_gradcheck():
    model = ChildSumTreeLSTM(3, 2).double()
    trees = [[1, 1, 1, 2], [1, 1]]
    x, mask, heads = batch_of(trees)
    x = x[..., :3].clone().requires_grad_(True)
    names = [name for name, _ in model.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for p in model.parameters())

    def run(x, *weights):
        return torch.func.functional_call(model, dict(zip(names, weights)), (x, mask, heads)).hidden

    assert torch.autograd.gradcheck(run, (x, *params))


# ---- where the tree comes from ----------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["mean", "forward"])
def test_induced_tree_comes_from_the_inner_encoder_distances(how):
    model = tree_lstm(encoder=INNER, tree_source="induced", direction_combination=how)
    trees = [random_tree(n, random.Random(n)) for n in (7, 5, 2)]
    x, mask, gold = batch_of(trees)
    out = model(x, mask, gold)  # gold heads are ignored
    inner = model.encoder(x, mask)
    torch.testing.assert_close(out.distances, inner.distances)
    torch.testing.assert_close(out.input_distances, inner.input_distances)
    expected = heads_tensor(combine_directions(inner.distances[-1], how, dim=0), mask)
    assert len(out.heads) == 1 and torch.equal(out.heads[0], expected)
    assert len(out.layers) == 2 and out.layers[-1] is out.hidden
    torch.testing.assert_close(out.layers[0], inner.hidden)
    # the Tree-LSTM reads the inner encoder's states over the induced tree
    for b, tree in enumerate(trees):
        n = len(tree)
        ref = reference_tree_lstm(model, inner.hidden[b, :n], expected[b, :n].tolist())
        torch.testing.assert_close(out.hidden[b, :n], ref, atol=1e-12, rtol=1e-10)


def test_induced_defaults_to_a_bidirectional_onlstm_and_gold_to_no_encoder():
    induced = ChildSumTreeLSTM(D, H, tree_source="induced")
    assert isinstance(induced.encoder, ONLSTM) and induced.encoder.bidirectional
    assert induced.bottom_up.input_proj.in_features == induced.encoder.output_size == 512
    assert ChildSumTreeLSTM(D, H).encoder is None and isinstance(induced, TreeEncoder)


def test_gold_heads_are_used_with_or_without_an_inner_encoder():
    trees = [HAND_MADE["deep and bushy"], HAND_MADE["forest"]]
    x, mask, gold = batch_of(trees)
    other = torch.where(mask, torch.zeros_like(gold), gold)  # token 0 heads everything
    model = tree_lstm()
    out = model(x, mask, gold)
    assert torch.equal(out.heads[0], gold) and not isinstance(out, HasDistances) and len(out.layers) == 1
    assert not torch.allclose(out.hidden, model(x, mask, other).hidden)
    lstm = tree_lstm(encoder=functools.partial(LSTM, hidden_size=3))
    out = lstm(x, mask, gold)
    inner = lstm.encoder(x, mask).hidden
    assert not isinstance(out, HasDistances) and torch.equal(out.heads[0], gold)
    ref = reference_tree_lstm(lstm, inner[0, :8], trees[0])
    torch.testing.assert_close(out.hidden[0], ref, atol=1e-12, rtol=1e-10)


def test_no_tree_makes_every_token_a_leaf_root():
    model = tree_lstm(tree_source="none")
    x, mask, gold = batch_of([HAND_MADE["deep and bushy"], HAND_MADE["forest"]])
    out = model(x, mask, gold)
    assert not isinstance(out, TreeOutput)
    torch.testing.assert_close(out.hidden, model(x, mask).hidden)  # gold heads ignored
    # each token's output depends on its own vector only
    for t in range(x.size(1)):
        torch.testing.assert_close(out.hidden[:1, t], model(x[:1, t : t + 1]).hidden[:, 0])


def test_clear_errors():
    x, mask, gold = batch_of([HAND_MADE["deep and bushy"], HAND_MADE["forest"]])
    lstm = functools.partial(LSTM, hidden_size=3)
    with pytest.raises(ValueError, match=r"tree_source='induced' needs .* but LSTM returns none"):
        tree_lstm(encoder=lstm, tree_source="induced")(x, mask)
    with pytest.raises(ValueError, match=r"tree_source='gold' needs gold dependency heads.*batch has none"):
        tree_lstm()(x, mask)
    soft = torch.nn.functional.one_hot(gold, gold.size(1)).double()
    with pytest.raises(ValueError, match="needs a discrete tree"):
        tree_lstm()(x, mask, soft)
    with pytest.raises(ValueError, match="cycle"):
        tree_lstm()(x, mask, torch.tensor([[1, 2, 0, 0, 0, 0, 0, 0], [0, 0, 3, 3, 3, 4, 6, 7]]))
    with pytest.raises(ValueError, match="tree_source must be one of"):
        tree_lstm(tree_source="parser")
    with pytest.raises(ValueError, match="distance_layer=2 is out of range"):
        tree_lstm(encoder=INNER, tree_source="induced", distance_layer=2)(x, mask)


# ---- configuration and the NER tagger ---------------------------------------------------------------------


def test_builds_from_yaml_through_jsonargparse():
    snippet = """
    class_path: onlstm_tasks.encoders.tree_lstm.ChildSumTreeLSTM
    init_args:
      input_size: 5
      hidden_size: 4
      tree_source: induced
      encoder:
        class_path: onlstm_tasks.encoders.ONLSTM
        init_args: {hidden_size: 8, chunk_size: 2, bidirectional: true}
      top_down: false
    """
    enc = from_yaml(SequenceEncoder, snippet)
    assert type(enc) is ChildSumTreeLSTM and enc.input_size == 5 and enc.output_size == 4
    assert isinstance(enc.encoder, ONLSTM) and enc.encoder.output_size == 16 and enc.top_down is None
    x, mask, _ = batch_of([[0, 0, 1], [0]], dtype=torch.float32)
    assert enc(x, mask).hidden.shape == (2, 3, 4)


def test_config_differs_from_the_dependency_guided_gold_config_only_in_the_encoder():
    load = lambda name: yaml.safe_load((CONFIGS / "ner" / name).read_text())  # noqa: E731
    tree, dg = load("uner_tree_lstm_crf.yaml"), load("uner_onlstm_crf_dg_gold.yaml")
    encoder = tree["model"]["init_args"].pop("encoder")
    dg["model"]["init_args"].pop("encoder")
    assert tree == dg
    assert encoder["class_path"] == "onlstm_tasks.encoders.ChildSumTreeLSTM"
    assert encoder["init_args"]["tree_source"]["kind"] == "gold"  # the whole TreeSource


EMBEDDER = functools.partial(WordCharEmbedder, word_dim=8, char_dim=4, char_features=4, dropout=0.0)


def encoder_factory(**options) -> EncoderFactory:
    return from_yaml(EncoderFactory, {"class_path": "onlstm_tasks.encoders.tree_lstm.ChildSumTreeLSTM",
                                      "init_args": {"hidden_size": 6, "tree_source": "gold", **options}})


@pytest.fixture(scope="module")
def dm() -> NERDataModule:
    dm = NERDataModule(path=str(TREES), data_dir=None, revision=None, format="conllx", batch_size=3,
                       eval_batch_size=3)
    dm.setup("fit")
    return dm


@pytest.mark.filterwarnings("ignore:You are trying to `self.log")
def test_ner_tagger_over_gold_trees_trains_and_round_trips(dm, tmp_path):
    torch.manual_seed(0)
    model = NERTagger(dm.word_vocab, dm.char_vocab, dm.labels, embedder=EMBEDDER, dropout=0.0,
                      encoder=encoder_factory())
    assert type(model.net.encoder) is ChildSumTreeLSTM and model.net.encoder.output_size == 12
    batch = next(iter(dm.train_dataloader()))
    assert batch.heads is not None
    loss = model.training_step(batch, 0)
    assert_gradients_reach_every_parameter(model, loss)
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    with torch.no_grad():
        assert model.training_step(batch, 0) < loss

    model.eval()
    collate = dm.val_dataloader().collate_fn

    def predict(batch):
        emissions, encoded = model.net.emissions(batch.tokens, batch.heads)
        assert torch.equal(encoded.heads[0], batch.heads)
        return [emissions[b, :n] for b, n in enumerate(batch.tokens.mask.sum(1).tolist())]

    with torch.no_grad():
        assert_batched_equals_single(predict, collate, [0, 1, 2])
    batch = collate([0, 1, 2])
    loaded = assert_checkpoint_round_trip(NERTagger, model, tmp_path, lambda m: m.net.decode(batch.tokens, batch.heads))
    assert type(loaded.net.encoder) is ChildSumTreeLSTM
