import pytest

from onlstm_tasks.trees import check_heads, constituency_to_heads, head_child, parse_tree


@pytest.mark.parametrize("tree, heads", [
    # sat is the root; The <- cat <- sat; on <- sat; the <- mat <- on; . <- sat
    ("(S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (NN mat)))) (. .))", [2, 3, 0, 3, 6, 4, 3]),
    # NP rule: a final POS heads its NP; otherwise the rightmost noun: John <- 's <- dog
    ("(NP (NP (NNP John) (POS 's)) (NN dog))", [2, 3, 0]),
    # no noun child: the first NP heads a coordination; and, dogs <- cats
    ("(NP (NP (NNS cats)) (CC and) (NP (NNS dogs)))", [0, 1, 1]),
    # VP priority list: TO before MD before VB; He <- will; go <- will; to <- go; sleep <- to; . <- will
    ("(S (NP (PRP He)) (VP (MD will) (VP (VB go) (S (VP (TO to) (VP (VB sleep)))))) (. .))", [2, 0, 2, 3, 4, 2]),
    # SBAR: the complementizer heads; S -> VP -> works
    ("(SBAR (IN that) (S (NP (PRP it)) (VP (VBZ works))))", [0, 3, 1]),
    # NP -> rightmost NNS; QP searches left for $ first: 5, million <- $ <- shares
    ("(NP (QP ($ $) (CD 5) (CD million)) (NNS shares))", [4, 1, 1, 0]),
    # PRN has no list: the first non-punctuation child from the left
    ("(PRN (-LRB- -LRB-) (NP (NN note)) (-RRB- -RRB-))", [2, 0, 2]),
    # OntoNotes NML is NP-like: New <- York <- city
    ("(NP (NML (NNP New) (NNP York)) (NN city))", [2, 3, 0]),
    # ADVP searches from the right
    ("(ADVP (RB very) (RB quickly))", [2, 0]),
    # WHNP (left, WDT first) inside SBAR (left, WHNP first): which heads; it <- likes <- which
    ("(SBAR (WHNP (WDT which)) (S (NP (PRP it)) (VP (VBZ likes))))", [0, 3, 1]),
    # an unknown label searches from the left
    ("(EMBED (NP (NN x)) (VP (VB y)))", [0, 1]),
    # a single word
    ("(NP (NN x))", [0]),
])
def test_hand_checked_trees(tree, heads):
    result = constituency_to_heads(parse_tree(tree))
    assert result == heads
    check_heads(result)


def test_function_tags_and_traces_do_not_disturb_heads():
    tree = parse_tree("( (S (NP-SBJ-1 (DT The) (NN cat)) (VP (VBD was) (VP (VBN seen) (NP (-NONE- *-1)))) (. .)) )")
    # VP(was, VP): VBD before VBN in the priority list, so "was" heads; seen <- was
    assert constituency_to_heads(tree) == [2, 3, 0, 3, 3]


def test_head_child_directly():
    assert head_child("VP", ["VBD", "NP", "PP"]) == 0
    assert head_child("PP", ["IN", "IN", "NP"]) == 1  # PP searches from the right
    assert head_child("NP", ["DT", "JJ", "NN", "NN", ","]) == 3
    assert head_child("NP", ["DT", "CD"]) == 1
    assert head_child("NP", ["DT", "DT", ","]) == 1  # "the last word", skipping punctuation
    assert head_child("FRAG", [",", "."]) == 1  # all punctuation: the plain fallback
    assert head_child("S", ["NP", "VP", "."]) == 1
    assert head_child("XYZ", [",", "NP"]) == 1  # unknown label: left, skipping punctuation
    with pytest.raises(ValueError, match="no children"):
        head_child("S", [])
