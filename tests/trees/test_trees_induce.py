import random

import pytest
import torch

from onlstm_tasks.encoders import ONLSTM
from onlstm_tasks.trees import (
    check_heads,
    distances_to_heads,
    distances_to_tree,
    heads_tensor,
    heads_to_tensor,
    soft_heads,
    tensor_to_heads,
    tree_to_brackets,
    tree_to_spans,
)

torch.set_num_threads(1)


def oracle_tree(d, offset=0):
    """The greedy split written plainly and recursively (the test's reading of the authors' build_tree)."""
    if len(d) == 1:
        return offset
    k = max(range(len(d)), key=lambda t: (d[t], -t))  # first maximum
    right = offset + k if k == len(d) - 1 else (offset + k, oracle_tree(d[k + 1:], offset + k + 1))
    if k == 0:
        return right
    return (oracle_tree(d[:k], offset), right)


def oracle_heads(d):
    """Heads by brute force from the Cartesian-tree reading: with ``a > b`` meaning a larger distance, or an equal
    one earlier, the ancestors of ``t`` are the ``j > t`` that are above every token between them and ``t``; the
    parent is the lowest ancestor (1-based), and a token without ancestors is the root."""
    def above(a, b):
        return d[a] > d[b] or (d[a] == d[b] and a < b)

    heads = []
    for t in range(len(d)):
        ancestors = [j for j in range(len(d)) if j != t and above(j, t)
                     and all(above(j, k) for k in range(min(j, t) + 1, max(j, t)))]
        lowest = [j for j in ancestors if not any(above(j, a) for a in ancestors if a != j)]
        heads.append(lowest[0] + 1 if lowest else 0)
    return heads


# distances [0, 3, 1, 2]: the whole span [0, 4) splits at k=1 (d=3): left [0, 1) = leaf 0, right part [1, 4) =
# (1, T(2, 4)); T(2, 4) splits at k=3 (d=2 > 1): (T(2, 3), 3) = (2, 3). Tree (0, (1, (2, 3))).
# Heads: token 1 is the root; it heads the split of [0, 1) (token 0) and of [2, 4) (token 3); 3 heads 2.
CASE_A = ([0, 3, 1, 2], (0, (1, (2, 3))), {(0, 4), (1, 4), (2, 4)}, [2, 0, 4, 2])
# distances [2, 0, 3, 1]: root split k=2; left [0, 2) splits at k=0 (d=2): (0, 1); right part (2, 3).
CASE_B = ([2, 0, 3, 1], ((0, 1), (2, 3)), {(0, 4), (0, 2), (2, 4)}, [3, 1, 0, 3])
# distances [.1, .5, .2, .9, .3, .4]: root k=3; [0, 3) splits at 1 -> (0, (1, 2)); right part (3, T(4, 6)) and
# T(4, 6) splits at 5 (d=.4) -> (4, 5). Heads: 3 root; 1 <- 3; 0, 2 <- 1; 5 <- 3; 4 <- 5.
CASE_C = ([.1, .5, .2, .9, .3, .4], ((0, (1, 2)), (3, (4, 5))), {(0, 6), (0, 3), (1, 3), (3, 6), (4, 6)},
          [2, 4, 2, 0, 6, 4])
# ties: the first maximum splits, so equal distances give the right-branching tree
CASE_TIES = ([1, 1, 1], (0, (1, 2)), {(0, 3), (1, 3)}, [0, 1, 2])
CASE_TIES2 = ([0, 2, 2, 0], (0, (1, (2, 3))), {(0, 4), (1, 4), (2, 4)}, [2, 0, 2, 3])


@pytest.mark.parametrize("distances, tree, spans, heads", [CASE_A, CASE_B, CASE_C, CASE_TIES, CASE_TIES2])
def test_hand_made_trees(distances, tree, spans, heads):
    assert distances_to_tree(distances) == tree
    assert oracle_tree(distances) == tree
    assert tree_to_spans(tree) == spans
    assert distances_to_heads(distances) == heads
    assert oracle_heads(distances) == heads
    check_heads(heads)


def test_brackets_and_word_leaves():
    words = ["The", "cat", "sat", "down"]
    assert tree_to_brackets(distances_to_tree([0, 3, 1, 2]), words) == "(The (cat (sat down)))"
    assert tree_to_brackets(distances_to_tree([2, 0, 3, 1]), words) == "((The cat) (sat down))"
    assert tree_to_brackets(distances_to_tree([2, 0, 3, 1])) == "((0 1) (2 3))"
    word_tree = distances_to_tree([2, 0, 3, 1], words)
    assert word_tree == (("The", "cat"), ("sat", "down"))
    assert tree_to_brackets(word_tree) == "((The cat) (sat down))"
    assert tree_to_spans(word_tree) == CASE_B[2]
    assert tree_to_spans((0, 1, 2)) == {(0, 3)}  # any arity


def test_single_token_and_errors():
    assert distances_to_tree([0.7]) == 0
    assert tree_to_spans(0) == set()
    assert tree_to_brackets(0, ["hi"]) == "hi"
    assert distances_to_heads([0.7]) == [0]
    assert distances_to_heads(torch.tensor([0.2, 0.1])) == [0, 1]
    with pytest.raises(ValueError, match="at least one"):
        distances_to_tree([])
    with pytest.raises(ValueError, match="2 words for 3"):
        distances_to_tree([1, 2, 3], ["a", "b"])
    with pytest.raises(ValueError, match="NaN"):
        distances_to_heads([0.1, float("nan")])


def random_distances(rng, n):
    # a few levels so that ties are common
    return [rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]) if rng.random() < 0.5 else rng.random() for _ in range(n)]


def test_random_distances_against_oracles():
    rng = random.Random(0)
    for _ in range(300):
        d = random_distances(rng, rng.randint(1, 14))
        tree = distances_to_tree(d)
        assert tree == oracle_tree(d)
        heads = distances_to_heads(d)
        check_heads(heads)  # exactly one root, acyclic
        assert heads == oracle_heads(d)
        # every constituent of the tree is a subtree of the dependency tree: one token heads it from outside
        for start, end in tree_to_spans(tree):
            outside = [t for t in range(start, end) if not start < heads[t] <= end]
            assert len(outside) == 1, (d, (start, end), heads)


def test_long_sentence_needs_no_recursion():
    n = 3000
    d = list(range(n))  # increasing distances: the deepest possible tree
    tree = distances_to_tree(d)
    assert len(tree_to_spans(tree)) == n - 1
    assert tree_to_brackets(tree).count("(") == n - 1
    heads = distances_to_heads(d)
    assert heads[-1] == 0 and heads[:3] == [2, 3, 4]


def padded_batch(rng, lengths):
    T = max(lengths)
    d = torch.zeros(len(lengths), T)
    for b, n in enumerate(lengths):
        d[b, :n] = torch.tensor(random_distances(rng, n))
    mask = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]
    return d, mask


def test_heads_tensor_equals_list_form():
    rng = random.Random(1)
    for _ in range(40):
        lengths = [rng.randint(1, 12) for _ in range(5)]
        d, mask = padded_batch(rng, lengths)
        heads = heads_tensor(d, mask)
        lists = [distances_to_heads(d[b, :n].tolist()) for b, n in enumerate(lengths)]
        assert heads.dtype == torch.long and heads.shape == d.shape
        assert torch.equal(heads, heads_to_tensor(lists, d.size(1)))
        assert tensor_to_heads(heads, mask) == lists
        # padding points to itself, and so does the root
        pos = torch.arange(d.size(1)).expand_as(heads)
        assert torch.equal(heads[~mask], pos[~mask])
        assert int(((heads == pos) & mask).sum()) == len(lengths)


def test_heads_tensor_hand_made_and_checks():
    d = torch.tensor([[0, 3, 1, 2], [2, 0, 3, 1], [5, 0, 0, 0]], dtype=torch.float)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 1], [1, 0, 0, 0]], dtype=torch.bool)
    assert heads_tensor(d, mask).tolist() == [[1, 1, 3, 1], [2, 0, 2, 2], [0, 1, 2, 3]]
    with pytest.raises(ValueError, match="mask must have shape"):
        heads_tensor(d, mask[:, :2])
    with pytest.raises(ValueError, match="bool"):
        heads_tensor(d, mask.long())


def test_soft_heads_is_a_distribution_and_hardens():
    rng = random.Random(2)
    lengths = [1, 2, 5, 9]
    T = max(lengths)
    d = torch.zeros(len(lengths), T)
    for b, n in enumerate(lengths):
        d[b, :n] = torch.tensor(rng.sample(range(100), n), dtype=torch.float) / 100  # distinct values
    mask = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]
    for temperature in (1.0, 0.1):
        p = soft_heads(d, mask, temperature)
        assert p.shape == (len(lengths), T, T)
        assert (p >= 0).all()
        assert torch.allclose(p.sum(-1)[mask], torch.ones(int(mask.sum())), atol=1e-5)
        assert (p[~mask] == 0).all() and (p.transpose(1, 2)[~mask] == 0).all()
        assert p[0, 0, 0] == pytest.approx(1.0)  # a one-token sentence points to itself
    hard = soft_heads(d, mask, temperature=1e-3)
    assert torch.equal(hard.argmax(-1)[mask], heads_tensor(d, mask)[mask])
    assert torch.allclose(hard.max(-1).values[mask], torch.ones(int(mask.sum())), atol=1e-3)


def test_soft_heads_gradients_reach_distances():
    rng = random.Random(3)
    d, mask = padded_batch(rng, [6, 4, 1])
    d = d.clone().requires_grad_(True)
    p = soft_heads(d, mask, temperature=0.5)
    target = heads_tensor(d.detach() + 1e-3 * torch.arange(6.0), mask)  # any fixed target tree
    loss = -(p.clamp_min(1e-9).log().gather(2, target[..., None]).squeeze(-1) * mask).sum()
    loss.backward()
    assert torch.isfinite(d.grad).all()
    assert d.grad[0].abs().sum() > 0 and d.grad[1].abs().sum() > 0
    assert (d.grad[~mask] == 0).all()


def test_trees_from_an_onlstm_encoder():
    torch.manual_seed(0)
    encoder = ONLSTM(input_size=8, hidden_size=16, chunk_size=4, num_layers=2, bidirectional=True).double()
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)
    x = torch.randn(2, 5, 8, dtype=torch.float64)

    def distances() -> torch.Tensor:
        return encoder(x, mask).combined_distances("mean")[-1]  # [B, T]: last layer, both directions averaged

    d = distances()
    heads = heads_tensor(d, mask)
    for b, n in enumerate([5, 3]):
        assert tensor_to_heads(heads, mask)[b] == distances_to_heads(d[b, :n].tolist())

    # differentiable end to end: the likelihood of a fixed (right-branching) tree. Rows of soft_heads sum to 1,
    # so p.sum() would have no gradient at all; this loss has one, and it matches a finite difference
    target = torch.tensor([[1, 2, 3, 4, 4], [1, 2, 2, 0, 0]])

    def loss() -> torch.Tensor:
        p = soft_heads(distances(), mask, temperature=0.1)
        return -(p.clamp_min(1e-12).log().gather(2, target[..., None]).squeeze(-1) * mask).sum()

    loss().backward()
    params = [param for param in encoder.parameters() if param.requires_grad]
    assert all(param.grad is not None and torch.isfinite(param.grad).all() for param in params)
    assert sum(param.grad.abs().sum() for param in params) > 0

    direction = [torch.randn_like(param) for param in params]
    analytic = sum((param.grad * v).sum() for param, v in zip(params, direction)).item()
    eps = 1e-6
    with torch.no_grad():
        for param, v in zip(params, direction):
            param.add_(eps * v)
        plus = loss().item()
        for param, v in zip(params, direction):
            param.sub_(2 * eps * v)
        minus = loss().item()
    assert abs(analytic) > 1e-3
    assert (plus - minus) / (2 * eps) == pytest.approx(analytic, rel=1e-4)