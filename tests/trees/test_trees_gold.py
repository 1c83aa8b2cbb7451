from collections import Counter

import pytest
import torch

from onlstm_tasks.data.core.examples import DataFormatError, Example
from onlstm_tasks.data.core.gold_trees import example_heads, example_heads_from_parsed
from onlstm_tasks.data.core.tokenize import tokenize
from onlstm_tasks.trees import (
    ParsedSentence,
    check_heads,
    dependency_tree_heads,
    heads_to_tensor,
    parse_tree_heads,
    parsed_by_text,
    project_heads,
    read_depparsed_json,
    tensor_to_heads,
    token_offsets,
)
from onlstm_tasks.trees.gold import ProjectionCounts
from helpers.shared_data import SHARED_DATA, requires_shared_data

torch.set_num_threads(1)


def test_example_heads_from_the_heads_column_and_from_parse_trees():
    assert example_heads(Example(words=("Kim", "sleeps"), heads=(2, 0))) == [2, 0]
    tree = "(TOP(S(NP (NNP Kim) )(VP (VBZ sleeps) ) (. .) ))"
    assert example_heads(Example(words=("Kim", "sleeps", "."), parse_tree=tree)) == [2, 0, 2]
    with pytest.raises(DataFormatError, match="x.conllu:7: heads are not a tree: cycle"):
        example_heads(Example(words=("a", "b", "c"), heads=(0, 3, 2), source="x.conllu", line=7))
    with pytest.raises(DataFormatError, match="parse tree has 3 tokens but the sentence has 2 words"):
        example_heads(Example(words=("Kim", "sleeps"), parse_tree=tree, source="on", line=3))
    with pytest.raises(DataFormatError, match="neither heads nor a parse_tree"):
        example_heads(Example(words=("a",)))
    assert parse_tree_heads("(S (NP (PRP I)) (VP (VBP agree)))", 2) == [2, 0]


def test_check_heads():
    check_heads([2, 0, 2])
    check_heads([0, 0], single_root=False)
    for bad, message in [([0, 0], "exactly one root"), ([2, 1], "root"), ([1], "its own head"),
                         ([0, 5], "outside 0..2"), ([0, 3, 2], r"cycle through tokens \[2, 3\]")]:
        with pytest.raises(ValueError, match=message):
            check_heads(bad)


def test_tensor_form_round_trip():
    lists = [[2, 0, 2], [0], [0, 1, 1, 3]]
    tensor = heads_to_tensor(lists)
    assert tensor.tolist() == [[1, 1, 1, 3], [0, 1, 2, 3], [0, 0, 0, 2]]  # root and padding point to themselves
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    assert tensor_to_heads(tensor, mask) == lists
    assert heads_to_tensor(lists, max_len=6).shape == (3, 6)
    with pytest.raises(ValueError, match="more than max_len=2"):
        heads_to_tensor(lists, max_len=2)


# enhanced-dependency graphs written like the SemEval parser JSON: [relation, head, dependent], 1-based
ENHANCED = [
    # Kim sings and dances: the subject is propagated to the second verb; a self-loop is noise
    (["Kim", "sings", "and", "dances"],
     [["root", 0, 2], ["nsubj", 2, 1], ["nsubj", 4, 1], ["cc", 2, 3], ["conj:and", 2, 4], ["conj:and", 4, 4]],
     [2, 0, 2, 2]),
    # the screen and keyboard work: the second conjunct keeps its conj arc, not the propagated nsubj
    (["the", "screen", "and", "keyboard", "work"],
     [["root", 0, 5], ["det", 2, 1], ["nsubj", 5, 2], ["cc", 2, 3], ["nsubj", 5, 4], ["conj:and", 2, 4]],
     [2, 5, 2, 2, 0]),
    # the shop which I like: the antecedent's extra dobj arc from the relative clause would close a cycle
    (["the", "shop", "which", "I", "like"],
     [["dobj", 5, 2], ["root", 0, 2], ["det", 2, 1], ["ref", 2, 3], ["nsubj", 5, 4], ["acl:relcl", 2, 5]],
     [2, 0, 2, 5, 2]),
    # I want to go: the controlled subject arc loses to the basic one
    (["I", "want", "to", "go"],
     [["root", 0, 2], ["nsubj:xsubj", 4, 1], ["nsubj", 2, 1], ["mark", 4, 3], ["xcomp", 2, 4]],
     [2, 0, 4, 2]),
]


@pytest.mark.parametrize("tokens, arcs, heads", ENHANCED)
def test_dependency_tree_heads_from_enhanced_graphs(tokens, arcs, heads):
    assert dependency_tree_heads(arcs, len(tokens)) == heads


def test_dependency_tree_heads_errors():
    with pytest.raises(DataFormatError, match=r"f.json:sentence 4: tokens \[2\] have no head"):
        dependency_tree_heads([["root", 0, 1]], 2, "f.json", "sentence 4")
    with pytest.raises(DataFormatError, match="outside 1..2 tokens"):
        dependency_tree_heads([["root", 0, 1], ["dep", 1, 3]], 2)
    with pytest.raises(DataFormatError, match="integer indices"):
        dependency_tree_heads([["root", 0, "1"]], 1)


def test_read_depparsed_json(tmp_path):
    path = tmp_path / "toy_depparsed.json"
    path.write_text('[{"sentence": "Kim sings and dances", "tokens": ["Kim", "sings", "and", "dances"], '
                    '"tags": ["NNP", "VBZ", "CC", "VBZ"], "dependencies": '
                    '[["root", 0, 2], ["nsubj", 2, 1], ["nsubj", 4, 1], ["cc", 2, 3], ["conj:and", 2, 4]], '
                    '"aspect_sentiment": [], "from_to": []}]', encoding="utf-8")
    (sentence,) = read_depparsed_json(path)
    assert sentence.heads == (2, 0, 2, 2) and sentence.tokens[0] == "Kim" and sentence.index == 0
    path.write_text('{"tokens": []}', encoding="utf-8")
    with pytest.raises(DataFormatError, match="expected a JSON list"):
        read_depparsed_json(path)


def test_token_offsets_undo_ptb_escapes():
    text = 'It\'s (great) "ok" etc.'
    tokens = ["It", "'s", "-LRB-", "great", "-RRB-", "``", "ok", "''", "etc.", "."]
    assert token_offsets(tokens, text) == [(0, 2), (2, 4), (5, 6), (6, 11), (11, 12), (13, 14), (14, 16),
                                           (16, 17), (18, 22), None]  # the parser's extra "." is not in the text
    assert token_offsets(["a", ":-RRB-"], "a :)") == [(0, 1), (2, 4)]


def test_project_heads_onto_other_words():
    # It 's great (PTB) -> It's great (project tokenizer): the merged word takes its highest token's head
    assert project_heads([3, 3, 0], [(0, 2), (2, 4), (5, 10)], [(0, 4), (5, 10)]) == [2, 0]
    # a word the parser did not see (".") attaches to the nearest word on its left
    assert project_heads([2, 0], [(0, 1), (2, 3)], [(0, 1), (2, 3), (3, 4)]) == [2, 0, 2]
    # the source root is not in the text: the highest of the orphaned words becomes the root
    assert project_heads([2, 0, 2], [(0, 1), None, (4, 5)], [(0, 1), (4, 5)]) == [0, 1]
    assert project_heads([0], [None], [(0, 1), (2, 3)]) == [0, 1]
    assert project_heads([0], [(0, 1)], []) == []


def test_example_heads_from_parsed():
    text = "I don't like it."
    words, offsets = tokenize(text)
    example = Example(words=tuple(words), text=text, offsets=tuple(offsets))
    parsed = ParsedSentence(text=text, tokens=("I", "do", "n't", "like", "it", "."), tags=(),
                            heads=(4, 4, 4, 0, 4, 4), index=0)
    assert words == ["I", "don't", "like", "it", "."]
    assert example_heads_from_parsed(example, parsed) == [3, 3, 0, 3, 3]
    assert parsed_by_text([parsed])[text] is parsed
    other = ParsedSentence(text="Something else.", tokens=(), tags=(), heads=(), index=3)
    with pytest.raises(DataFormatError, match="differs from parsed sentence 3"):
        example_heads_from_parsed(example, other)


@requires_shared_data
def test_semeval_depparsed_json_gives_one_tree_per_sentence():
    from onlstm_tasks.data.absa.readers import read_semeval_xml

    folder = SHARED_DATA / "semeval2014_laptops"
    parsed = read_depparsed_json(folder / "Laptops_Test_Gold_depparsed.json")
    assert len(parsed) == 411
    for sentence in parsed:
        check_heads(list(sentence.heads))  # exactly one root, acyclic
        assert len(sentence.heads) == len(sentence.tokens)
    # the same sentences as the XML: every Example finds its parse and gets a tree over its own words
    examples, _ = read_semeval_xml(folder / "Laptops_Test_Gold.xml")
    index = parsed_by_text(parsed)
    same_words = 0
    for example in examples:
        sentence = index[example.text.strip()]
        heads = example_heads_from_parsed(example, sentence)
        check_heads(heads)
        assert len(heads) == len(example.words)
        if tuple(example.words) == sentence.tokens:
            assert heads == list(sentence.heads)  # identical tokenisation: projection changes nothing
            same_words += 1
    assert same_words > len(examples) // 2


@requires_shared_data
def test_uner_conllx_heads_and_ontonotes_parse_trees():
    import datasets

    from onlstm_tasks.data.ner.readers import read_conllx, read_ontonotes_rows

    examples, _ = read_conllx(SHARED_DATA / "uner_en_ewt" / "en_ewt-uner-test.conllx")
    lists = [example_heads(e) for e in examples]
    for heads in lists:
        check_heads(heads)
    tensor = heads_to_tensor(lists)
    assert tensor.shape == (len(examples), max(map(len, lists)))

    ds = datasets.load_dataset(str(SHARED_DATA / "conll2012_ontonotesv5"), data_dir="english_v12", split="test")
    examples, _ = read_ontonotes_rows(ds, "ontonotes/test")
    with_trees = [e for e in examples if e.parse_tree]
    assert len(with_trees) > 400
    for example in with_trees:
        check_heads(example_heads(example))


def test_project_heads_counts_each_repair():
    counts = ProjectionCounts()
    # It 's great -> It's great: two tokens in one word is no repair
    assert project_heads([3, 3, 0], [(0, 2), (2, 4), (5, 10)], [(0, 4), (5, 10)], counts) == [2, 0]
    assert counts == ProjectionCounts(sentences=1)
    # "." has no parser token: attached to its left neighbour
    assert project_heads([2, 0], [(0, 1), (2, 3)], [(0, 1), (2, 3), (3, 4)], counts) == [2, 0, 2]
    assert (counts.attached_words, counts.dropped_tokens) == (1, 0)
    # the parser's root is not in the text: dropped, and its two dependents become one root and one extra root
    assert project_heads([2, 0, 2], [(0, 1), None, (4, 5)], [(0, 1), (4, 5)], counts) == [0, 1]
    assert (counts.dropped_tokens, counts.extra_roots) == (1, 1)
    # a token overlapping no word is dropped too; the first word has no token: attached to the next owned word
    assert project_heads([0, 1], [(2, 3), (7, 8)], [(0, 1), (2, 3)], counts) == [2, 0]
    assert (counts.dropped_tokens, counts.attached_words) == (2, 2)
    # nothing aligns: a flat tree (its words are not counted as attached, its tokens are dropped)
    assert project_heads([0, 1], [None, None], [(0, 1), (2, 3), (4, 5)], counts) == [0, 1, 1]
    assert counts == ProjectionCounts(sentences=5, dropped_tokens=4, attached_words=2, extra_roots=1,
                                      flat_fallbacks=1)
    assert counts.summary() == ("5 sentences; 4 parser tokens without a match dropped; 2 words attached to a "
                                "neighbour; 1 extra roots attached to the highest word; 1 flat fallbacks; "
                                "0 duplicate texts (first parse kept)")


def test_example_heads_from_parsed_adds_to_the_counts():
    text = "Nice screen."
    words, offsets = tokenize(text)
    example = Example(words=tuple(words), text=text, offsets=tuple(offsets))
    parsed = ParsedSentence(text=text, tokens=("Nice", "screen", ".", "."), tags=(), heads=(2, 0, 2, 2), index=0)
    counts = ProjectionCounts()
    assert example_heads_from_parsed(example, parsed, counts) == [2, 0, 2]
    assert counts == ProjectionCounts(sentences=1, dropped_tokens=1)  # the parser's second "." is not in the text


def test_parsed_by_text_keeps_the_first_parse_and_counts_the_others():
    first = ParsedSentence(text="Good.", tokens=("Good", "."), tags=(), heads=(0, 1), index=0)
    again = ParsedSentence(text=" Good. ", tokens=("Good.",), tags=(), heads=(0,), index=1)
    other = ParsedSentence(text="Bad.", tokens=("Bad", "."), tags=(), heads=(0, 1), index=2)
    duplicates = Counter()
    index = parsed_by_text([first, again, other, first], duplicates)
    assert index == {"Good.": first, "Bad.": other}
    assert duplicates == {"Good.": 2}
    assert parsed_by_text([first, again]) == {"Good.": first}  # counting is optional
