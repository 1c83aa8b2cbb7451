"""Bidirectional distances are merged on the boundary each value marks: a backward value at token t marks the
boundary after t, so it is moved to t + 1 before it is used (combine_directions)."""

from __future__ import annotations

import pytest
import torch

from onlstm_tasks.encoders import ONLSTM
from onlstm_tasks.encoders.base import combine_directions
from onlstm_tasks.trees import distances_to_tree, tree_to_brackets


def sentence(forward: list[float], backward: list[float]) -> torch.Tensor:
    """One sentence's distances [1 layer, 2 directions, T]."""
    return torch.tensor([[forward, backward]])


def test_a_boundary_seen_by_both_directions_lands_on_the_same_split() -> None:
    # "a b | c d": the forward pass closes levels when c arrives (token 2); the backward pass, reading d c b a,
    # closes them when b arrives after c (token 1). Aligned, both put the split before c.
    d = sentence([0.1, 0.2, 0.9, 0.3], [0.2, 0.9, 0.1, 0.3])
    words = ["a", "b", "c", "d"]
    for how in ("forward", "backward", "mean", "max"):
        tree = distances_to_tree(combine_directions(d, how)[0].tolist(), words)
        assert tree_to_brackets(tree) == "((a b) (c d))", how


def test_backward_values_move_one_token_right_and_position_zero_gets_zero() -> None:
    d = sentence([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert combine_directions(d, "backward").tolist() == [[0.0, 4.0, 5.0]]
    assert combine_directions(d, "mean").tolist() == [[0.5, 3.0, 4.0]]
    assert combine_directions(d, "max").tolist() == [[1.0, 4.0, 5.0]]
    assert combine_directions(d, "min").tolist() == [[0.0, 2.0, 3.0]]
    assert combine_directions(d, "forward").tolist() == [[1.0, 2.0, 3.0]]


def test_one_direction_is_left_as_it_is_and_backward_needs_two() -> None:
    d = torch.tensor([[[1.0, 2.0, 3.0]]])
    for how in ("mean", "forward", "max", "min"):
        assert combine_directions(d, how).tolist() == [[1.0, 2.0, 3.0]]
    with pytest.raises(ValueError, match="bidirectional"):
        combine_directions(d, "backward")
    with pytest.raises(ValueError, match="how must be one of"):
        combine_directions(d, "sum")


def test_batched_rows_agree_with_each_sentence_alone() -> None:
    """Real tokens of each row get the same merged values in a padded batch as the sentence alone."""
    torch.manual_seed(0)
    enc = ONLSTM(5, 8, 2, num_layers=2, bidirectional=True).eval()
    x = torch.randn(3, 6, 5)
    lengths = [6, 2, 4]
    mask = torch.arange(6)[None] < torch.tensor(lengths)[:, None]
    with torch.no_grad():
        batched = enc(x, mask)
        for how in ("mean", "backward", "max", "min"):
            merged = batched.combined_distances(how)  # [layers, B, T]
            for row, n in enumerate(lengths):
                alone = enc(x[row : row + 1, :n], mask[row : row + 1, :n]).combined_distances(how)
                torch.testing.assert_close(merged[:, row, :n], alone[:, 0], rtol=0, atol=1e-6)
