"""Unlabelled attachment score (UAS) of dependency heads, hand-computed, and ``onlstm-trees eval --format conllx``."""

from __future__ import annotations

import re

import pytest
import torch

from helpers.trees import CONLLX

from onlstm_tasks.encoders.base import combine_directions
from onlstm_tasks.probing.cli import main, read_conll_dependencies, score_heads
from onlstm_tasks.trees.induce import distances_to_heads
from onlstm_tasks.trees.metrics import UASAccumulator, attachment_counts, chain_heads

# S1 "The cat sat ." : gold heads 2 3 0 3 (The<-cat, cat<-sat, sat root, . <- sat), "." is PUNCT (not scored)
#    left-chain  0 1 2 3: The (0 vs 2) no, cat (1 vs 3) no, sat (2 vs 0) no            -> 0 of 3
#    right-chain 2 3 4 0: The (2) yes, cat (3) yes, sat (4 vs 0) no                    -> 2 of 3
# S2 "Dogs bark" : gold 2 0
#    left-chain  0 1: Dogs (0 vs 2) no, bark (1 vs 0) no                               -> 0 of 2
#    right-chain 2 0: both right                                                       -> 2 of 2
# corpus UAS: left 0 / 5 = 0, right 4 / 5 = 80; sentence UAS: left 0, right (2/3 + 1) / 2 = 83.33
LINE = re.compile(r"^(?P<label>.+?)\s+sentence UAS\s+(?P<sentence>[\d.]+)\s+corpus UAS\s+(?P<corpus>[\d.]+)\s+"
                  r"\((?P<n>\d+) sentences, (?P<tokens>\d+) scored tokens\)$")


def test_attachment_counts_by_hand():
    assert attachment_counts([2, 3, 0, 3], [2, 3, 0, 3]) == (4, 4)
    assert attachment_counts([2, 3, 4, 0], [2, 3, 0, 3], [True, True, True, False]) == (2, 3)
    assert attachment_counts([0, 1, 2], [2, 0, 2], [True, True, False]) == (0, 2)
    with pytest.raises(ValueError, match="same tokens"):
        attachment_counts([0, 1], [0])


def test_chain_baselines():
    assert chain_heads("left-chain", 4) == [0, 1, 2, 3]
    assert chain_heads("right-chain", 4) == [2, 3, 4, 0]
    assert chain_heads("left-chain", 1) == chain_heads("right-chain", 1) == [0]
    with pytest.raises(ValueError):
        chain_heads("middle", 3)


def test_uas_accumulator_by_hand():
    acc = UASAccumulator()
    acc.add([2, 3, 4, 0], [2, 3, 0, 3], [True, True, True, False])  # 2 of 3
    acc.add([2, 0], [2, 0])  # 2 of 2
    acc.add([0], [0], [False])  # nothing scored: counted as a sentence, not in the sentence mean
    result = acc.result()
    assert result["corpus_uas"] == pytest.approx(80.0)
    assert result["sentence_uas"] == pytest.approx(100 * (2 / 3 + 1) / 2)
    assert (result["tokens"], result["sentences"]) == (5, 3)


@pytest.fixture
def gold(tmp_path):
    path = tmp_path / "gold.conllx"
    path.write_text(CONLLX)
    return path


def test_reader_skips_comments_and_multiword_lines(gold):
    assert read_conll_dependencies(gold) == [
        (["The", "cat", "sat", "."], ["DET", "NOUN", "VERB", "PUNCT"], [2, 3, 0, 3]),
        (["Dogs", "bark"], ["NOUN", "VERB"], [2, 0]),
    ]


@pytest.mark.parametrize(("baseline", "sentence", "corpus"), [("left-chain", 0.0, 0.0),
                                                              ("right-chain", 83.33, 80.0)])
def test_eval_chain_baselines_on_a_hand_file(capsys, gold, baseline, sentence, corpus):
    assert main(["eval", "--format", "conllx", "--gold", str(gold), "--baseline", baseline]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    m = LINE.match(line)
    assert m and m["label"] == baseline
    assert (float(m["sentence"]), float(m["corpus"]), int(m["n"]), int(m["tokens"])) == (sentence, corpus, 2, 5)


def test_eval_conllx_refuses_constituency_options(capsys, gold):
    assert main(["eval", "--format", "conllx", "--gold", str(gold), "--baseline", "right-branching"]) == 2
    assert "left-chain" in capsys.readouterr().err
    assert main(["eval", "--gold", str(gold), "--baseline", "left-chain"]) == 2
    assert "--format conllx" in capsys.readouterr().err


def test_score_heads_reads_the_greedy_trees_of_each_layer_and_combination(gold):
    sentences = read_conll_dependencies(gold)
    # layer 0 gives right chains (distances falling to the right), layer 1 gold-like trees for S2
    distances = [torch.tensor([[[4.0, 3.0, 2.0, 1.0]], [[1.0, 2.0, 3.0, 0.5]]]),
                 torch.tensor([[[2.0, 1.0]], [[1.0, 2.0]]])]
    results = score_heads(sentences, distances, layers=2, combinations=["forward"])
    for layer in range(2):
        acc = UASAccumulator()
        for (_, tags, heads), d in zip(sentences, distances):
            acc.add(distances_to_heads(combine_directions(d, "forward", dim=1)[layer].tolist()), heads,
                    [t != "PUNCT" for t in tags])
        assert results[(layer, "forward")] == acc.result()
    assert results[(0, "forward")]["corpus_uas"] != results[(1, "forward")]["corpus_uas"]
