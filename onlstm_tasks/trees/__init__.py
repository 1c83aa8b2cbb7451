"""Trees: pure tree algorithms (Python/torch), the ground of the package's layer order.

It holds the distance -> tree algorithms, the tree readers and the tree metrics; it may import only
:mod:`onlstm_tasks.errors` (and torch and the standard library), never data, encoders, tasks or probing. The
encoders import it downwards (:class:`TreeSource`, ``DIRECTION_COMBINATIONS``); reading gold trees off data
Examples is :mod:`onlstm_tasks.data.core.gold_trees`, and probing a checkpoint (the ``onlstm-trees`` command, gate
plots) is :mod:`onlstm_tasks.probing`.

* :mod:`.induce`: distances -> binary tree (greedy split), spans, brackets, hard heads, soft heads;
* :mod:`.heads`: the list (1-based, 0 = root) and tensor (``[B, T]``, 0-based, root -> itself) head forms, pieces
  of trees and hop distances;
* :mod:`.source`: where a model's tree comes from (none / induced / gold), shared by the tree-reading modules, and
  the direction combinations of the distances;
* :mod:`.ptb`: Penn-Treebank bracketed trees; :mod:`.headrules`: Collins head rules;
* :mod:`.gold`: gold heads from parse-tree strings or SemEval parser JSON, and their projection onto other words;
* :mod:`.metrics`: unlabelled bracket F1 and left/right/random baselines.
"""

from onlstm_tasks.trees.gold import (
    ParsedSentence,
    dependency_tree_heads,
    parse_tree_heads,
    parsed_by_text,
    project_heads,
    read_depparsed_json,
    token_offsets,
)
from onlstm_tasks.trees.headrules import HEAD_RULES, constituency_to_heads, head_child
from onlstm_tasks.trees.heads import check_heads, heads_to_tensor, hop_distances, slice_heads, tensor_to_heads
from onlstm_tasks.trees.induce import (
    distances_to_heads,
    distances_to_tree,
    heads_tensor,
    soft_heads,
    tree_to_brackets,
    tree_to_spans,
)
from onlstm_tasks.trees.metrics import (
    PUNCTUATION_TAGS,
    UF1Accumulator,
    baseline_tree,
    baseline_uf1,
    gold_spans,
    left_branching_tree,
    prediction_spans,
    project_spans,
    random_tree,
    right_branching_tree,
    scored_spans,
    sentence_f1,
)
from onlstm_tasks.trees.ptb import Tree, parse_tree, parse_trees, read_trees, strip_function_tags
from onlstm_tasks.trees.source import TreeSource

__all__ = [
    "HEAD_RULES",
    "PUNCTUATION_TAGS",
    "ParsedSentence",
    "Tree",
    "TreeSource",
    "UF1Accumulator",
    "baseline_tree",
    "baseline_uf1",
    "check_heads",
    "constituency_to_heads",
    "dependency_tree_heads",
    "distances_to_heads",
    "distances_to_tree",
    "gold_spans",
    "head_child",
    "heads_tensor",
    "heads_to_tensor",
    "hop_distances",
    "left_branching_tree",
    "parse_tree",
    "parse_tree_heads",
    "parse_trees",
    "parsed_by_text",
    "prediction_spans",
    "project_heads",
    "project_spans",
    "random_tree",
    "read_depparsed_json",
    "read_trees",
    "right_branching_tree",
    "scored_spans",
    "sentence_f1",
    "slice_heads",
    "soft_heads",
    "strip_function_tags",
    "tensor_to_heads",
    "token_offsets",
    "tree_to_brackets",
    "tree_to_spans",
]
