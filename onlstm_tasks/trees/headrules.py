"""Dependency heads from constituency trees with Collins-style head rules (Collins 1999, Appendix A).

For each phrase label the table gives a search direction and a priority list. The head child is found by
taking the priority labels in order and, for each, scanning the children in the search direction for the first
child with that label; if no label matches, the first child in the search direction is the head. NP (and the
OntoNotes ``NML``, and ``NX``) use Collins' special NP rule instead (:func:`_np_head`).

Additions to the 1999 table, for OntoNotes and robustness:

* ``NML`` (OntoNotes nominal modifier) is treated like ``NP``; ``X`` searches from the right, ``EMBED``, ``META``,
  ``TOP``/``ROOT`` and any label not in the table search from the left with no priority list;
* the fallback (no label matched) skips punctuation children (:data:`HEAD_PUNCTUATION`) unless all children are
  punctuation, so a trailing ``.`` never heads a phrase.

Dependencies: the lexical head of every non-head child depends on the lexical head of the head child; the
lexical head of the whole tree is the root.
"""

from __future__ import annotations

from collections.abc import Sequence

from onlstm_tasks.trees.ptb import Tree

LEFT, RIGHT = "left", "right"  # scan children left-to-right / right-to-left

# label -> (direction, priority list), after Collins (1999), Table A.1
HEAD_RULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "ADJP": (LEFT, ("NNS", "QP", "NN", "$", "ADVP", "JJ", "VBN", "VBG", "ADJP", "JJR", "NP", "JJS", "DT", "FW",
                    "RBR", "RBS", "SBAR", "RB")),
    "ADVP": (RIGHT, ("RB", "RBR", "RBS", "FW", "ADVP", "TO", "CD", "JJR", "JJ", "IN", "NP", "JJS", "NN")),
    "CONJP": (RIGHT, ("CC", "RB", "IN")),
    "FRAG": (RIGHT, ()),
    "INTJ": (LEFT, ()),
    "LST": (RIGHT, ("LS", ":")),
    "NAC": (LEFT, ("NN", "NNS", "NNP", "NNPS", "NP", "NAC", "EX", "$", "CD", "QP", "PRP", "VBG", "JJ", "JJS", "JJR",
                   "ADJP", "FW")),
    "PP": (RIGHT, ("IN", "TO", "VBG", "VBN", "RP", "FW")),
    "PRN": (LEFT, ()),
    "PRT": (RIGHT, ("RP",)),
    "QP": (LEFT, ("$", "IN", "NNS", "NN", "JJ", "RB", "DT", "CD", "NCD", "QP", "JJR", "JJS")),
    "RRC": (RIGHT, ("VP", "NP", "ADVP", "ADJP", "PP")),
    "S": (LEFT, ("TO", "IN", "VP", "S", "SBAR", "ADJP", "UCP", "NP")),
    "SBAR": (LEFT, ("WHNP", "WHPP", "WHADVP", "WHADJP", "IN", "DT", "S", "SQ", "SINV", "SBAR", "FRAG")),
    "SBARQ": (LEFT, ("SQ", "S", "SINV", "SBARQ", "FRAG")),
    "SINV": (LEFT, ("VBZ", "VBD", "VBP", "VB", "MD", "VP", "S", "SINV", "ADJP", "NP")),
    "SQ": (LEFT, ("VBZ", "VBD", "VBP", "VB", "MD", "VP", "SQ")),
    "UCP": (RIGHT, ()),
    "VP": (LEFT, ("TO", "VBD", "VBN", "MD", "VBZ", "VB", "VBG", "VBP", "VP", "ADJP", "NN", "NNS", "NP")),
    "WHADJP": (LEFT, ("CC", "WRB", "JJ", "ADJP")),
    "WHADVP": (RIGHT, ("CC", "WRB")),
    "WHNP": (LEFT, ("WDT", "WP", "WP$", "WHADJP", "WHPP", "WHNP")),
    "WHPP": (RIGHT, ("IN", "TO", "FW")),
    "X": (RIGHT, ()),
}
NP_LIKE = frozenset({"NP", "NML", "NX"})
HEAD_PUNCTUATION = frozenset({",", ".", ":", "``", "''", "-LRB-", "-RRB-", "HYPH", "NFP"})

# Collins' NP rule: (direction, labels) tried in order; any label of the group matches
_NP_STEPS: tuple[tuple[str, frozenset[str]], ...] = (
    (RIGHT, frozenset({"NN", "NNP", "NNPS", "NNS", "NX", "NML", "POS", "JJR"})),
    (LEFT, frozenset({"NP"})),
    (RIGHT, frozenset({"$", "ADJP", "PRN"})),
    (RIGHT, frozenset({"CD"})),
    (RIGHT, frozenset({"JJ", "JJS", "RB", "QP"})),
)


def _order(n: int, direction: str) -> range:
    return range(n) if direction == LEFT else range(n - 1, -1, -1)


def _fallback(labels: Sequence[str], direction: str) -> int:
    """The first non-punctuation child in ``direction`` (the first child if all are punctuation)."""
    for i in _order(len(labels), direction):
        if labels[i] not in HEAD_PUNCTUATION:
            return i
    return _order(len(labels), direction)[0]


def _np_head(labels: Sequence[str]) -> int:
    if labels[-1] == "POS":
        return len(labels) - 1
    for direction, group in _NP_STEPS:
        for i in _order(len(labels), direction):
            if labels[i] in group:
                return i
    return _fallback(labels, RIGHT)  # "else return the last word"


def head_child(label: str, child_labels: Sequence[str]) -> int:
    """Index of the head child of a ``label`` constituent whose children carry ``child_labels``."""
    if not child_labels:
        raise ValueError(f"({label}) has no children")
    if len(child_labels) == 1:
        return 0
    if label in NP_LIKE:
        return _np_head(child_labels)
    direction, priorities = HEAD_RULES.get(label, (LEFT, ()))
    for wanted in priorities:
        for i in _order(len(child_labels), direction):
            if child_labels[i] == wanted:
                return i
    return _fallback(child_labels, direction)


def constituency_to_heads(tree: Tree) -> list[int]:
    """1-based heads (0 = root, CoNLL convention) of the tree's tokens, left to right.

    >>> from onlstm_tasks.trees.ptb import parse_tree
    >>> constituency_to_heads(parse_tree("(S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .))"))
    [2, 3, 0, 3]
    """
    heads: list[int] = [0] * len(tree)
    _lexical_head(tree, 0, heads)
    return heads


def _lexical_head(node: Tree, start: int, heads: list[int]) -> tuple[int, int]:
    """(0-based lexical head, end position) of ``node`` whose first token is ``start``; fills ``heads``."""
    if node.is_preterminal:
        return start, start + 1
    child_heads = []
    end = start
    for child in node.children:
        head, end = _lexical_head(child, end, heads)
        child_heads.append(head)
    h = child_heads[head_child(node.label, [child.label for child in node.children])]
    for ch in child_heads:
        if ch != h:
            heads[ch] = h + 1
    return h, end
