"""Gold dependency heads of data :class:`Example` objects, in the list form of :mod:`onlstm_tasks.trees.heads`.

Three sources, one result (1-based heads, 0 = root; :func:`~onlstm_tasks.trees.heads.heads_to_tensor` gives the
``[B, T]`` form):

* ``Example.heads`` (CoNLL-X/U readers) -> :func:`example_heads` returns them as they are (checked to be a forest);
* ``Example.parse_tree`` (OntoNotes / CoNLL-2012) -> Collins head rules
  (:func:`~onlstm_tasks.trees.gold.parse_tree_heads`);
* a parse of the Example's text from the SemEval ``*_depparsed.json`` files
  (:func:`~onlstm_tasks.trees.gold.read_depparsed_json`) -> :func:`example_heads_from_parsed` projects it onto the
  Example's words.

The tree algorithms themselves live below the data layer in :mod:`onlstm_tasks.trees.gold`; this module only reads
them off Examples and names the Example's source and line in errors.
"""

from __future__ import annotations

from onlstm_tasks.data.core.examples import Example
from onlstm_tasks.errors import DataFormatError
from onlstm_tasks.trees.gold import ParsedSentence, ProjectionCounts, parse_tree_heads, project_heads, token_offsets
from onlstm_tasks.trees.heads import check_heads

__all__ = ["example_heads", "example_heads_from_parsed", "has_gold_tree", "has_parse_tree", "model_reads_gold_trees"]


def example_heads(example: Example) -> list[int]:
    """Gold heads of an Example: its ``heads`` column when present, else its ``parse_tree`` via head rules.

    Errors name the example's source and line (and sentence id); a parse tree must have one leaf per word, the
    same words up to PTB bracket escapes (``-LRB-`` for ``(``)."""
    where = _where(example)
    if example.heads is not None:
        heads = list(example.heads)
        try:
            check_heads(heads, single_root=False)
        except ValueError as err:
            raise DataFormatError(example.source, where, f"heads are not a tree: {err}") from None
        return heads
    if has_parse_tree(example):
        return parse_tree_heads(example.parse_tree, len(example.words), example.source or "<parse_tree>", where,
                                words=example.words)
    raise DataFormatError(example.source, where, "no gold tree: the example has neither heads nor a parse_tree")


def has_gold_tree(example: Example) -> bool:
    """Whether :func:`example_heads` has something to work from (a heads column or a parse tree)."""
    return example.heads is not None or has_parse_tree(example)


def has_parse_tree(example: Example) -> bool:
    """Whether the example has a parse tree (``None``, empty and ``"-"`` mean none, as in the trees CLI)."""
    return example.parse_tree is not None and example.parse_tree.strip() not in ("", "-")


def model_reads_gold_trees(model) -> bool:
    """Whether a model (any ``torch.nn.Module``) reads the batches' gold trees: one of its modules has a
    ``tree_source`` (:class:`~onlstm_tasks.trees.source.TreeSource`) of kind ``gold``. Models that read no tree,
    or induce their own, need none, so their data need not have (well-formed) trees."""
    return any(getattr(getattr(m, "tree_source", None), "kind", None) == "gold" for m in model.modules())


def _where(example: Example) -> int | str:
    """The example's line, with its sentence id when it has one (for :class:`DataFormatError`)."""
    return f"{example.line} (sentence {example.sentence_id})" if example.sentence_id else example.line


def example_heads_from_parsed(
    example: Example, parsed: ParsedSentence, counts: ProjectionCounts | None = None
) -> list[int]:
    """Heads for ``example``'s words from a parsed sentence of the same text (the words may be tokenised
    differently: the tree is projected through character offsets; its repairs are added to ``counts``)."""
    if example.text is None or example.offsets is None:
        raise DataFormatError(example.source, example.line, "the example has no text/offsets to align with")
    if example.text.strip() != parsed.text.strip():
        raise DataFormatError(example.source, example.line, f"text differs from parsed sentence {parsed.index}: "
                              f"{example.text!r} vs {parsed.text!r}")
    shift = len(example.text) - len(example.text.lstrip()) - (len(parsed.text) - len(parsed.text.lstrip()))
    offsets = [None if o is None else (o[0] + shift, o[1] + shift) for o in token_offsets(parsed.tokens,
                                                                                         parsed.text)]
    return project_heads(parsed.heads, offsets, example.offsets, counts)
