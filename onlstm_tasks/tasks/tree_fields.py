"""The tree a model induces for each predicted sentence, as JSON-ready fields of its prediction record.

Both tasks' ``predict`` output carries, for encoders that return ON-LSTM distances, ``tree`` (the greedy binary
tree over the sentence's tokens, bracketed, e.g. ``"((The cat) (sat down))"``) and ``heads`` (1-based, 0 = root,
the CoNLL convention), both read off layer ``layer`` of the encoder output's distances with the directions merged
by ``directions`` (the defaults of :class:`~onlstm_tasks.trees.source.TreeSource`: last layer, mean). Brackets in
words are written as the Penn Treebank's ``-LRB-``/``-RRB-`` (and ``-LCB-``/``-RCB-``) so the tree string parses.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from onlstm_tasks.encoders.base import EncoderOutput
from onlstm_tasks.trees.induce import distances_to_heads, distances_to_tree, tree_to_brackets
from onlstm_tasks.trees.source import HasDistances

PTB_ESCAPES = {"(": "-LRB-", ")": "-RRB-", "{": "-LCB-", "}": "-RCB-"}


def escape_brackets(word: str) -> str:
    """``(`` -> ``-LRB-`` and the like, whole words only (as in the Penn Treebank); others unchanged."""
    return PTB_ESCAPES.get(word, word)


def induced_tree_fields(
    encoded: EncoderOutput, mask: torch.Tensor, words: Sequence[Sequence[str]], layer: int = -1,
    directions: str = "mean", with_distances: bool = False, gate: str = "forget",
) -> list[dict]:
    """One ``{"tree": str, "heads": list[int]}`` per batch row (``with_distances``: also ``"distances"``, the
    syntactic distance of every token the tree is read from, rounded to 6 decimals), or one empty dict per row when
    the encoder returns no distances (LSTM, GRU, ...). ``mask`` [B, T] bool, left-aligned; ``words`` the rows'
    tokens."""
    if not isinstance(encoded, HasDistances):
        return [{} for _ in words]
    return distance_tree_fields(encoded.combined_distances(directions, gate)[layer], mask, words, with_distances)


def distance_tree_fields(distances: torch.Tensor, mask: torch.Tensor, words: Sequence[Sequence[str]],
                         with_distances: bool = False) -> list[dict]:
    """:func:`induced_tree_fields` of one layer's merged distances ``[B, T]`` (e.g. a frozen language model's:
    :mod:`onlstm_tasks.tasks.lm_trees`)."""
    distances = distances.detach().float().cpu()
    lengths = mask.sum(dim=1).tolist()
    fields = []
    for row, tokens in enumerate(words):
        values = distances[row, : lengths[row]].tolist()
        tree = distances_to_tree(values)
        fields.append({"tree": tree_to_brackets(tree, [escape_brackets(w) for w in tokens]),
                       "heads": distances_to_heads(values)})
        if with_distances:
            fields[-1]["distances"] = [round(v, 6) for v in values]
    return fields
