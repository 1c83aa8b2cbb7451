"""per_class_scores / format_report against a hand-made confusion matrix and a counting oracle (no sklearn)."""

import random
import re

import pytest
import torch

from onlstm_tasks.metrics.classification_report import format_report, per_class_scores

LABELS = ["negative", "neutral", "positive", "conflict"]
# rows gold, columns predicted; "conflict" never occurs and is never predicted
CONFUSION = torch.tensor([
    [5, 2, 1, 0],
    [1, 3, 0, 0],
    [2, 0, 6, 0],
    [0, 0, 0, 0],
])
# by hand: predicted (column sums) 8, 5, 7, 0; support (row sums) 8, 4, 8, 0; true positives 5, 3, 6, 0
PRECISION = [5 / 8, 3 / 5, 6 / 7, 0.0]
RECALL = [5 / 8, 3 / 4, 6 / 8, 0.0]
F1 = [0.625, 2 / 3, 0.8, 0.0]  # 2PR/(P+R): 0.625; 0.9/1.35; (36/28)/(45/28)
SUPPORT = [8, 4, 8, 0]
ACCURACY = 14 / 20


def test_per_class_scores_by_hand() -> None:
    scores = per_class_scores(CONFUSION)
    for key, expected in (("precision", PRECISION), ("recall", RECALL), ("f1", F1), ("support", SUPPORT)):
        assert scores[key].tolist() == pytest.approx(expected, abs=1e-12), key


def test_a_class_never_predicted_or_never_gold_scores_zero_not_nan() -> None:
    # b is gold twice but never predicted; c is predicted once but never gold
    scores = per_class_scores(torch.tensor([[3, 0, 1], [2, 0, 0], [0, 0, 0]]))
    assert scores["precision"].tolist() == pytest.approx([3 / 5, 0.0, 0.0])
    assert scores["recall"].tolist() == pytest.approx([3 / 4, 0.0, 0.0])
    assert scores["f1"].tolist() == pytest.approx([2 * 0.6 * 0.75 / 1.35, 0.0, 0.0])
    assert scores["support"].tolist() == [4, 2, 0]


def test_per_class_scores_against_counting_pairs() -> None:
    rng = random.Random(0)
    n_classes = 5
    for _ in range(20):
        pairs = [(rng.randrange(n_classes), rng.randrange(n_classes)) for _ in range(rng.randint(1, 60))]
        confusion = torch.zeros(n_classes, n_classes, dtype=torch.long)
        for gold, predicted in pairs:
            confusion[gold, predicted] += 1
        scores = per_class_scores(confusion)
        for c in range(n_classes):
            tp = sum(g == c and p == c for g, p in pairs)
            n_predicted, n_gold = sum(p == c for _, p in pairs), sum(g == c for g, _ in pairs)
            precision = tp / n_predicted if n_predicted else 0.0
            recall = tp / n_gold if n_gold else 0.0
            f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
            got = [scores[k][c].item() for k in ("precision", "recall", "f1", "support")]
            assert got == pytest.approx([precision, recall, f1, n_gold], abs=1e-12), (pairs, c)


def test_format_report_by_hand() -> None:
    report = format_report(CONFUSION, LABELS)
    lines = report.splitlines()
    assert lines[0].split() == ["precision", "recall", "f1-score", "support"]
    for i, label in enumerate(LABELS):
        assert lines[1 + i].split() == [label, f"{PRECISION[i]:.4f}", f"{RECALL[i]:.4f}", f"{F1[i]:.4f}",
                                        str(SUPPORT[i])]
    assert lines[1 + len(LABELS)] == ""
    assert lines[2 + len(LABELS)].split() == ["accuracy", "0.7000", "20"]
    # unweighted means over all four classes, the empty one included: 2.0821/4, 2.125/4, 2.0917/4
    assert lines[3 + len(LABELS)].split() == ["macro", "avg", "0.5205", "0.5312", "0.5229", "20"]
    assert len(lines) == 4 + len(LABELS)
    # a table: every non-empty line has the same width, and every number ends under its header's column
    assert len({len(line) for line in lines if line}) == 1
    header_ends = [lines[0].index(name) + len(name) for name in ("precision", "recall", "f1-score", "support")]
    for line in lines[1:1 + len(LABELS)]:
        assert [m.end() for m in re.finditer(r"\d+(\.\d+)?", line)] == header_ends, line
    assert lines[2 + len(LABELS)].index(f"{ACCURACY:.4f}") + 6 == header_ends[2]  # accuracy in the F1 column


def test_format_report_digits_and_an_empty_matrix() -> None:
    assert format_report(CONFUSION, LABELS, digits=2).splitlines()[3].split() == ["positive", "0.86", "0.75",
                                                                                  "0.80", "8"]
    empty = format_report(torch.zeros(2, 2, dtype=torch.long), ["a", "b"]).splitlines()
    assert empty[-2].split() == ["accuracy", "0.0000", "0"]  # no division by zero
