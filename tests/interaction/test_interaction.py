"""Interaction functions g(h_i, h_p(i)) on hand-made trees: parent states (hard, soft, none), the GCN graph, every
function's formula and shape, gradients through soft heads, and construction from YAML."""

import math

import pytest
import torch

from helpers.yaml_build import from_yaml
from onlstm_tasks.interaction import (
    AdditionInteraction,
    ConcatInteraction,
    GatedInteraction,
    GCNInteraction,
    Interaction,
    InteractionFactory,
    MLPInteraction,
    SelfInteraction,
    head_matrix,
    parent_states,
    tree_adjacency,
)
from onlstm_tasks.trees.heads import heads_to_tensor
from onlstm_tasks.trees.induce import soft_heads

torch.set_num_threads(1)
H = 5
# sentence 0: tokens 0..3, 1-based heads [2, 0, 2, 3] (token 1 is the root; 0 and 2 its children; 3 under 2);
# sentence 1: two tokens, token 0 the root heading token 1, then padding
HEADS = heads_to_tensor([[2, 0, 2, 3], [0, 1]], 4)  # [[1, 1, 1, 2], [0, 0, 2, 3]]
MASK = torch.tensor([[True] * 4, [True, True, False, False]])
INTERACTIONS = {
    "self": SelfInteraction,
    "concat": ConcatInteraction,
    "addition": AdditionInteraction,
    "mlp": MLPInteraction,
    "gated": GatedInteraction,
    "gcn": GCNInteraction,
}


def states(seed=0):
    return torch.randn(2, 4, H, generator=torch.Generator().manual_seed(seed)) * MASK[..., None]


def test_hard_heads_tensor_form():
    assert HEADS.tolist() == [[1, 1, 1, 2], [0, 0, 2, 3]]


def test_parent_states_gather_hard_heads():
    h = states()
    parent = parent_states(h, HEADS)
    for b, t, p in [(0, 0, 1), (0, 1, 1), (0, 2, 1), (0, 3, 2), (1, 0, 0), (1, 1, 0)]:
        torch.testing.assert_close(parent[b, t], h[b, p])  # the root (0,1) and (1,0) gets its own state
    assert parent_states(h, None) is h  # no tree: every token is its own parent


def test_parent_states_of_one_hot_weights_equal_the_gather_and_soft_weights_mix():
    h = states()
    weights = head_matrix(HEADS, MASK)
    assert weights.shape == (2, 4, 4) and (weights[1, 2:] == 0).all() and (weights[1, :, 2:] == 0).all()
    torch.testing.assert_close(parent_states(h, weights) * MASK[..., None], parent_states(h, HEADS) * MASK[..., None])
    soft = torch.zeros(2, 4, 4)
    soft[0, 3, 1], soft[0, 3, 2] = 0.25, 0.75
    torch.testing.assert_close(parent_states(h, soft)[0, 3], 0.25 * h[0, 1] + 0.75 * h[0, 2])


def test_parent_states_reject_mismatched_trees():
    with pytest.raises(ValueError, match="do not match"):
        parent_states(states(), HEADS[:, :3])
    with pytest.raises(ValueError, match=r"\[B, T\] \(hard\) or \[B, T, T\]"):
        parent_states(states(), HEADS[0])


def test_gcn_adjacency_is_the_degree_normalised_tree_with_self_loops():
    A = tree_adjacency(HEADS, MASK)
    torch.testing.assert_close(A, A.transpose(1, 2))
    # sentence 0: edges 0-1, 1-2, 2-3 plus self loops -> degrees 2, 3, 3, 2
    degree = [2, 3, 3, 2]
    expected = torch.zeros(4, 4)
    for i, j in [(0, 0), (1, 1), (2, 2), (3, 3), (0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)]:
        expected[i, j] = 1 / math.sqrt(degree[i] * degree[j])
    torch.testing.assert_close(A[0], expected)
    assert (A[1, 2:] == 0).all() and (A[1, :, 2:] == 0).all()  # padding takes no part
    torch.testing.assert_close(A[1, :2, :2], torch.full((2, 2), 0.5))
    # the same graph from one-hot weights; no tree -> the identity on real tokens
    torch.testing.assert_close(tree_adjacency(head_matrix(HEADS, MASK), MASK), A)
    torch.testing.assert_close(tree_adjacency(None, MASK), torch.diag_embed(MASK.float()))


def test_gcn_adjacency_of_soft_heads_is_symmetric_and_masked():
    d = torch.rand(2, 4) * MASK
    A = tree_adjacency(soft_heads(d, MASK, 0.5), MASK)
    torch.testing.assert_close(A, A.transpose(1, 2))
    assert (A.diagonal(dim1=1, dim2=2)[MASK] > 0).all() and (A[1, 2:] == 0).all()


@pytest.mark.parametrize("name", INTERACTIONS)
def test_shapes_and_zero_padding(name):
    torch.manual_seed(0)
    g = INTERACTIONS[name](H)
    assert isinstance(g, Interaction) and g.input_size == H
    assert g.output_size == (2 * H if name == "concat" else H)
    h = states()
    for tree in (HEADS, head_matrix(HEADS, MASK), None):
        out = g(h, parent_states(h, tree), tree, MASK)
        assert out.shape == (2, 4, g.output_size)
        assert (out[~MASK] == 0).all()
        torch.testing.assert_close(g.over_tree(h, tree, MASK), out)


def test_each_function_computes_its_formula():
    torch.manual_seed(0)
    h, p = states(0), states(1)
    keep = MASK[..., None].float()
    torch.testing.assert_close(SelfInteraction(H)(h, p, HEADS, MASK), h * keep)
    torch.testing.assert_close(ConcatInteraction(H)(h, p, HEADS, MASK), torch.cat([h, p], -1) * keep)
    torch.testing.assert_close(AdditionInteraction(H)(h, p, HEADS, MASK), (h + p) * keep)
    mlp = MLPInteraction(H, output_size=3)
    assert mlp.output_size == 3
    expected = torch.relu(h @ mlp.child.weight.T + mlp.child.bias + p @ mlp.parent.weight.T) * keep
    torch.testing.assert_close(mlp(h, p, HEADS, MASK), expected)
    gated = GatedInteraction(H)
    z = torch.sigmoid(torch.cat([h, p], -1) @ gated.gate.weight.T + gated.gate.bias)
    torch.testing.assert_close(gated(h, p, HEADS, MASK), (z * h + (1 - z) * p) * keep)
    gcn = GCNInteraction(H, output_size=4, num_layers=2)
    A, x = tree_adjacency(HEADS, MASK), h
    for layer in gcn.layers:
        x = torch.relu(A @ (x @ layer.weight.T) + layer.bias)
    torch.testing.assert_close(gcn(h, p, HEADS, MASK), x * keep)
    # the GCN reads the tree, not the parent states
    torch.testing.assert_close(gcn(h, torch.zeros_like(p), HEADS, MASK), x * keep)


def test_constructor_errors():
    with pytest.raises(ValueError, match="input_size must be positive"):
        AdditionInteraction(0)
    with pytest.raises(ValueError, match="num_layers must be positive"):
        GCNInteraction(4, num_layers=0)
    with pytest.raises(ValueError, match=r"h must be \[B, T, 5\]"):
        MLPInteraction(5)(torch.zeros(1, 2, 4), torch.zeros(1, 2, 4))


@pytest.mark.parametrize("name", sorted(set(INTERACTIONS) - {"self"}))
def test_gradients_flow_through_soft_heads_to_the_distances(name):
    torch.manual_seed(0)
    g = INTERACTIONS[name](H)
    distances = (torch.rand(2, 4) * MASK).requires_grad_(True)
    tree = soft_heads(distances, MASK, temperature=0.5)
    h = states()
    g.over_tree(h, tree, MASK).pow(2).sum().backward()
    assert distances.grad is not None and distances.grad[0].abs().sum() > 0
    assert (distances.grad[~MASK] == 0).all()


@pytest.mark.parametrize("name", INTERACTIONS)
def test_every_interaction_builds_from_yaml(name):
    cls = INTERACTIONS[name]
    init = "init_args: {output_size: 7}" if name in ("mlp", "gcn") else ""
    snippet = f"class_path: {cls.__module__}.{cls.__name__}\n{init}"
    g = from_yaml(InteractionFactory, snippet)(H)
    assert type(g) is cls and g.input_size == H
    if init:
        assert g.output_size == 7
