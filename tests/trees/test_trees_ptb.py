import pytest

from onlstm_tasks.data.core.examples import DataFormatError
from onlstm_tasks.trees import Tree, parse_tree, parse_trees, read_trees, strip_function_tags

# a PTB-style file: outer wrapper with an empty label, function tags, co-indexing, traces, two trees, many lines
PTB_TEXT = """( (S
    (NP-SBJ-1 (DT The) (NN cat) )
    (VP (VBD was)
      (VP (VBN seen)
        (NP (-NONE- *-1) )
        (PP-LOC=2 (IN on)
          (NP (DT the) (NN mat) ))))
    (. .) ))
( (SINV (`` ``) (S-TPC-3 (NP-SBJ (PRP I) ) (VP (VBP agree) (SBAR (-NONE- 0) (S (-NONE- *T*-3) ))))
  (, ,) ('' '') (VP (VBD said) (S (-NONE- *T*-3) )) (NP-SBJ (NNP Kim) ) (-LRB- -LRB-) (. .) ))
"""


def test_ptb_file_with_function_tags_and_traces():
    first, second = parse_trees(PTB_TEXT)
    assert str(first) == ("(S (NP (DT The) (NN cat)) (VP (VBD was) (VP (VBN seen) (PP (IN on) "
                          "(NP (DT the) (NN mat))))) (. .))")
    assert first.leaves() == [("The", "DT"), ("cat", "NN"), ("was", "VBD"), ("seen", "VBN"), ("on", "IN"),
                              ("the", "DT"), ("mat", "NN"), (".", ".")]
    assert first.spans() == {(0, 8), (0, 2), (2, 7), (3, 7), (4, 7), (5, 7)}
    assert ("PP", 4, 7) in first.spans(labelled=True)
    # the SBAR holding only traces disappears with them; -LRB- stays a POS tag
    assert str(second) == ("(SINV (`` ``) (S (NP (PRP I)) (VP (VBP agree))) (, ,) ('' '') (VP (VBD said)) "
                           "(NP (NNP Kim)) (-LRB- -LRB-) (. .))")
    assert second.words() == ["``", "I", "agree", ",", "''", "said", "Kim", "-LRB-", "."]
    assert second.tags()[-2:] == ["-LRB-", "."]
    assert len(second) == 9


def test_ontonotes_style_tree_without_spaces():
    tree = parse_tree("(TOP(S(NP (PRP I) )(VP (VBP believe) (SBAR(S(NP (NNS parents) )(VP (VBP care) )))) (. .) ))")
    assert tree.label == "S"
    assert tree.words() == ["I", "believe", "parents", "care", "."]
    assert tree.spans() == {(0, 5), (1, 4), (2, 4)}
    bracket = parse_tree("(TOP(X (-LRB- -LSB-)  (-RRB- -RSB-) ))")
    assert bracket.label == "X" and bracket.leaves() == [("-LSB-", "-LRB-"), ("-RSB-", "-RRB-")]


def test_options_keep_everything():
    raw = parse_trees(PTB_TEXT, strip_root=False, strip_tags=False, remove_traces=False)[0]
    assert raw.label == "" and len(raw.children) == 1
    s = raw.children[0]
    assert s.children[0].label == "NP-SBJ-1"
    assert ("*-1", "-NONE-") in s.leaves()
    assert str(raw).startswith("( (S (NP-SBJ-1 (DT The)")


def test_strip_function_tags():
    assert strip_function_tags("NP-SBJ-1") == "NP"
    assert strip_function_tags("PP-LOC-CLR") == "PP"
    assert strip_function_tags("NP=2") == "NP"
    assert strip_function_tags("S-TPC-3") == "S"
    for kept in ("-NONE-", "-LRB-", "-RRB-", "NP", "PRP$", "WHNP"):
        assert strip_function_tags(kept) == kept


def test_prune_and_repr():
    tree = parse_tree("(S (NP (DT a) (NN b)) (, ,) (VP (VB c)))")
    pruned = tree.prune(lambda leaf: leaf.label != ",")
    assert str(pruned) == "(S (NP (DT a) (NN b)) (VP (VB c)))"
    assert tree.prune(lambda leaf: False) is None
    assert repr(pruned) == "Tree('(S (NP (DT a) (NN b)) (VP (VB c)))')"
    assert isinstance(pruned, Tree) and pruned.children[0].children[0].is_preterminal


def test_read_trees_from_a_file(tmp_path):
    path = tmp_path / "wsj_0001.mrg"
    path.write_text(PTB_TEXT, encoding="utf-8")
    assert [len(t) for t in read_trees(path)] == [8, 9]


@pytest.mark.parametrize("text, message", [
    ("( (S (NP (DT a) (NN b))\n  (VP (VB c))\n", r"f\.mrg:1: tree 1: unbalanced brackets: 2 constituent\(s\) not "
                                                 r"closed .* innermost \(S \.\.\.\) opened on line 1"),
    ("(S (DT a))\n(S (DT b)))\n", r"f\.mrg:2: unbalanced brackets: '\)' with no open '\(' after tree 2"),
    ("(S (DT a))\n\n(S (NP) (DT b))", r"f\.mrg:3: tree 2: empty constituent \(NP\)"),
    ("(S (DT a b))", r"f\.mrg:1: tree 1: 'b' in \(DT \.\.\.\) is a second word"),
    ("(S (DT a) c)", r"f\.mrg:1: tree 1: 'c' in \(S \.\.\.\) is a word after child constituents"),
    ("word (S (DT a))", r"f\.mrg:1: tree 1: 'word' outside any bracket"),
    ("(S (DT a))\n( (NP (-NONE- *T*-1)) )", r"f\.mrg:2: tree 2: only traces"),
])
def test_errors_name_source_line_and_tree(text, message):
    with pytest.raises(DataFormatError, match=message):
        parse_trees(text, source="f.mrg")


def test_parse_tree_wants_exactly_one_and_line_offsets():
    with pytest.raises(DataFormatError, match="exactly one tree, found 2"):
        parse_tree("(S (DT a)) (S (DT b))")
    with pytest.raises(DataFormatError, match=r"x\.mrg:11: tree 1"):
        parse_trees("(S\n (DT a b))", source="x.mrg", first_line=10)
