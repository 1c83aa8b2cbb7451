"""Unlabelled bracket F1 (UF1) of induced trees against gold constituency trees, and the trivial baselines.

Conventions (those of the ON-LSTM / PRPN evaluation, ``test_phrase_grammar.py`` of the authors' repository):

* **Punctuation** is removed from both trees before scoring, by gold POS tag: :data:`PUNCTUATION_TAGS` is the
  PTB set the authors drop (``. , : -LRB- -RRB- '' ``), the currency/number signs ``$ #`` (also dropped by
  the authors, whose word list excludes them), and the OntoNotes punctuation tags ``HYPH`` and ``NFP``. Other
  OntoNotes tags (``ADD``, ``XX``, ``AFX``) are words. Traces (``-NONE-``) are already gone
  (:mod:`onlstm_tasks.trees.ptb`).
* A predicted tree over all tokens is *projected* onto the kept tokens (:func:`project_spans`): a span keeps the
  kept tokens it covers, and spans that shrink below two tokens vanish. Gold spans come from the pruned gold
  tree, so gold constituents made only of punctuation vanish and unary chains count once.
* Spans of one token and the whole-sentence span are not scored (:func:`scored_spans`); spans are sets, so a
  span counts once however many constituents share it.
* **Sentence F1** is the mean over sentences of each sentence's F1 (the authors' reported number). A sentence
  whose gold tree has no scored span (two or fewer kept tokens, or a flat gold tree) gets recall 1 and
  precision 1 if the prediction has no scored span either (F1 = 1, e.g. every sentence of at most two words)
  and precision 0 otherwise (F1 = 0); such sentences are counted, as in the authors' evaluation.
* **Corpus F1** is computed from the summed counts (matched, predicted, gold) over all sentences.

Scores are reported in percent. :class:`UF1Accumulator` keeps only sums, so accumulators of several processes
(or shards) combine with :meth:`UF1Accumulator.merge` into the exact single-process result.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from onlstm_tasks.trees.induce import Tree, distances_to_tree, tree_to_spans
from onlstm_tasks.trees.ptb import Tree as PTBTree

PUNCTUATION_TAGS = frozenset({".", ",", ":", "``", "''", "-LRB-", "-RRB-", "#", "$", "HYPH", "NFP"})

Span = tuple[int, int]


def keep_mask(tags: Sequence[str], punctuation: Iterable[str] = PUNCTUATION_TAGS) -> list[bool]:
    """True for every token whose gold POS tag is not punctuation."""
    punctuation = frozenset(punctuation)
    return [tag not in punctuation for tag in tags]


def project_spans(spans: Iterable[Span], keep: Sequence[bool]) -> set[Span]:
    """Spans over all tokens -> spans over the kept tokens (renumbered); spans left with < 2 tokens are dropped."""
    before = [0]
    for k in keep:
        before.append(before[-1] + bool(k))
    out = set()
    for start, end in spans:
        s, e = before[start], before[end]
        if e - s >= 2:
            out.add((s, e))
    return out


def scored_spans(spans: Iterable[Span], length: int) -> set[Span]:
    """The spans UF1 scores: at least two tokens and not the whole sentence ``(0, length)``."""
    return {(s, e) for s, e in spans if e - s >= 2 and (s, e) != (0, length)}


def gold_spans(tree: PTBTree, punctuation: Iterable[str] = PUNCTUATION_TAGS) -> tuple[set[Span], list[bool]]:
    """Scored gold spans of a gold tree over its non-punctuation tokens, and the keep mask over all its tokens."""
    punctuation = frozenset(punctuation)
    keep = keep_mask(tree.tags(), punctuation)
    pruned = tree.prune(lambda leaf: leaf.label not in punctuation)
    if pruned is None:
        return set(), keep
    return scored_spans(pruned.spans(), sum(keep)), keep


def prediction_spans(tree: Tree, keep: Sequence[bool]) -> set[Span]:
    """Scored spans of a predicted tree over all tokens (:mod:`onlstm_tasks.trees.induce` form), after
    projecting it onto the kept tokens."""
    return scored_spans(project_spans(tree_to_spans(tree), keep), sum(bool(k) for k in keep))


def sentence_f1(pred: set[Span], gold: set[Span]) -> float:
    """F1 (0-1) of one sentence's scored spans, with the empty-gold rule of the module docstring."""
    if not gold:
        return 1.0 if not pred else 0.0
    if not pred:
        return 0.0
    matched = len(pred & gold)
    if not matched:
        return 0.0
    precision, recall = matched / len(pred), matched / len(gold)
    return 2 * precision * recall / (precision + recall)


class UF1Accumulator:
    """Sums for sentence-level and corpus-level UF1.

    ``add(pred_spans, gold_spans)`` takes one sentence's spans. With ``length`` (the number of scored tokens,
    i.e. after punctuation removal) it drops single-token and whole-sentence spans itself; without it the spans
    must already be scored sets (:func:`scored_spans`, :func:`gold_spans`, :func:`prediction_spans`).
    """

    def __init__(self) -> None:
        self.sentences = 0
        self.f1_sum = 0.0
        self.matched = 0
        self.predicted = 0
        self.gold = 0
        self.no_gold_spans = 0

    def add(self, pred_spans: Iterable[Span], gold_spans: Iterable[Span], length: int | None = None) -> float:
        """Adds one sentence and returns its F1 (0-1)."""
        pred, gold = set(pred_spans), set(gold_spans)
        if length is not None:
            pred, gold = scored_spans(pred, length), scored_spans(gold, length)
        f1 = sentence_f1(pred, gold)
        self.sentences += 1
        self.f1_sum += f1
        self.matched += len(pred & gold)
        self.predicted += len(pred)
        self.gold += len(gold)
        self.no_gold_spans += not gold
        return f1

    def merge(self, other: UF1Accumulator) -> UF1Accumulator:
        for name in ("sentences", "f1_sum", "matched", "predicted", "gold", "no_gold_spans"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        return self

    def result(self) -> dict:
        """``sentence_f1`` and ``corpus_f1`` (percent), corpus precision/recall, ``sentences`` and how many of them
        had no gold span (``no_gold_spans``)."""
        precision = self.matched / self.predicted if self.predicted else 0.0
        recall = self.matched / self.gold if self.gold else 0.0
        corpus = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return {
            "sentence_f1": 100.0 * self.f1_sum / self.sentences if self.sentences else 0.0,
            "corpus_f1": 100.0 * corpus,
            "corpus_precision": 100.0 * precision,
            "corpus_recall": 100.0 * recall,
            "sentences": self.sentences,
            "no_gold_spans": self.no_gold_spans,
        }


# ------------------------------------------------------------------------------------------------ baselines


def left_branching_tree(n: int) -> Tree:
    """``(((0 1) 2) 3)``: every prefix is a constituent."""
    if n < 1:
        raise ValueError("a tree needs at least one token")
    tree: Tree = 0
    for t in range(1, n):
        tree = (tree, t)
    return tree


def right_branching_tree(n: int) -> Tree:
    """``(0 (1 (2 3)))``: every suffix is a constituent."""
    if n < 1:
        raise ValueError("a tree needs at least one token")
    tree: Tree = n - 1
    for t in range(n - 2, -1, -1):
        tree = (t, tree)
    return tree


def random_tree(n: int, rng: random.Random) -> Tree:
    """A random binary tree: the greedy split (:func:`distances_to_tree`) of i.i.d. uniform distances."""
    return distances_to_tree([rng.random() for _ in range(n)])


BASELINES = ("left", "right", "random")


def baseline_tree(kind: str, n: int, rng: random.Random | None = None) -> Tree:
    if kind == "left":
        return left_branching_tree(n)
    if kind == "right":
        return right_branching_tree(n)
    if kind == "random":
        if rng is None:
            raise ValueError("the random baseline needs an rng (random.Random(seed))")
        return random_tree(n, rng)
    raise ValueError(f"baseline must be one of {BASELINES}, got {kind!r}")


def baseline_uf1(
    trees: Iterable[PTBTree], kind: str, seed: int = 0, punctuation: Iterable[str] = PUNCTUATION_TAGS
) -> dict:
    """UF1 of a baseline against gold trees; the baseline is built over the kept (non-punctuation) tokens, as the
    authors' model only read those. A sentence with no kept token counts as an empty prediction."""
    rng = random.Random(seed)
    acc = UF1Accumulator()
    for tree in trees:
        gold, keep = gold_spans(tree, punctuation)
        n = sum(keep)
        pred = scored_spans(tree_to_spans(baseline_tree(kind, n, rng)), n) if n else set()
        acc.add(pred, gold)
    return acc.result()


# -------------------------------------------------------------------------- unlabelled attachment score (UAS)

DEPENDENCY_PUNCTUATION = frozenset({"PUNCT"})  # UPOS tags whose tokens are not scored
CHAIN_BASELINES = ("left-chain", "right-chain")


def attachment_counts(predicted: Sequence[int], gold: Sequence[int], keep: Sequence[bool] | None = None) -> tuple[int, int]:
    """``(correct, scored)``: how many scored tokens have the gold head, and how many tokens are scored.

    Heads are 1-based with 0 for the root (the CoNLL convention, as :func:`~onlstm_tasks.trees.induce.
    distances_to_heads` returns them). ``keep``: False for tokens not scored (punctuation, by gold UPOS tag); a
    kept token's head may still be a punctuation token (then it is simply wrong against a gold head elsewhere)."""
    if len(predicted) != len(gold) or (keep is not None and len(keep) != len(gold)):
        raise ValueError(f"predicted ({len(predicted)}), gold ({len(gold)}) and keep "
                         f"({'-' if keep is None else len(keep)}) must cover the same tokens")
    kept = [True] * len(gold) if keep is None else list(keep)
    correct = sum(1 for p, g, k in zip(predicted, gold, kept) if k and p == g)
    return correct, sum(kept)


def chain_heads(kind: str, n: int) -> list[int]:
    """The chain baselines, 1-based heads (0 = root): ``left-chain`` attaches every word to the word on its left
    (the first word is the root), ``right-chain`` to the word on its right (the last word is the root)."""
    if kind == "left-chain":
        return list(range(n))  # word i+1 <- word i; word 1 <- root (0)
    if kind == "right-chain":
        return [i + 2 for i in range(n - 1)] + [0] if n else []
    raise ValueError(f"a chain baseline is one of {CHAIN_BASELINES}, got {kind!r}")


class UASAccumulator:
    """Unlabelled attachment score over sentences, in percent: ``corpus`` (correct over scored tokens, the usual
    UAS) and ``sentence`` (the mean of the sentences' scores, over sentences with at least one scored token)."""

    def __init__(self) -> None:
        self.correct = self.scored = self.sentences = self.scored_sentences = 0
        self.sentence_sum = 0.0

    def add(self, predicted: Sequence[int], gold: Sequence[int], keep: Sequence[bool] | None = None) -> None:
        correct, scored = attachment_counts(predicted, gold, keep)
        self.correct += correct
        self.scored += scored
        self.sentences += 1
        if scored:
            self.scored_sentences += 1
            self.sentence_sum += correct / scored

    def result(self) -> dict:
        return {"corpus_uas": 100.0 * self.correct / self.scored if self.scored else 0.0,
                "sentence_uas": 100.0 * self.sentence_sum / self.scored_sentences if self.scored_sentences else 0.0,
                "tokens": self.scored, "sentences": self.sentences}
