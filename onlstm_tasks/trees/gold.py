"""Gold dependency heads from tree strings and parser output, in the list form of :mod:`onlstm_tasks.trees.heads`.

Two sources, one result (1-based heads, 0 = root; :func:`heads_to_tensor` gives the ``[B, T]`` form):

* a bracketed constituency tree (OntoNotes / CoNLL-2012 ``parse_tree``) -> Collins head rules
  (:func:`parse_tree_heads`);
* the SemEval ``*_depparsed.json`` files -> :func:`read_depparsed_json` and :func:`dependency_tree_heads`.

Reading them off a data :class:`~onlstm_tasks.data.core.examples.Example` (its ``heads`` column, its ``parse_tree``,
or a parse of its text) is the data layer's job: :mod:`onlstm_tasks.data.core.gold_trees` (``example_heads``,
``example_heads_from_parsed``), built on the functions here.

The SemEval JSON
----------------
A list of sentences ``{"sentence", "tokens", "tags", "dependencies": [[rel, head, dep], ...], "aspect_sentiment",
"from_to"}``. ``tokens`` are PTB-tokenised and escaped (``-LRB-``, ``` `` ```, ``do n't``), so they differ from the
project tokenizer's words in about a third of the sentences. ``dependencies`` are 1-based with head 0 = root, but
they are the parser's *enhanced* graph, not a tree: propagated conjunct arcs (a shared subject gets one ``nsubj``
per conjoined verb), ``nsubj:xsubj`` controller arcs, and relative-clause ``ref`` arcs (the antecedent also gets
the relative pronoun's role, which can close a cycle). :func:`dependency_tree_heads` keeps one head per token:

1. a ``conj*`` arc wins (the others of a conjunct are copies of its first conjunct's arcs);
2. then arcs whose head is not itself a conjunct of another candidate head, then ``*:xsubj`` arcs last;
   remaining ties go to the arc listed first;
3. a candidate that would close a cycle is skipped (tokens with a single incoming arc are fixed first);
   self-loops (a few ``conj`` arcs such as ``["conj:and", 6, 6]``) are ignored.

A ``ref`` arc is the only arc of a relative pronoun and so is kept (pronoun -> antecedent). To use the heads with
another tokenisation of the same text, :func:`token_offsets` locates the PTB tokens in ``sentence`` and
:func:`project_heads` moves the tree onto the other words
(:func:`onlstm_tasks.data.core.gold_trees.example_heads_from_parsed` does both for an Example).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from onlstm_tasks.errors import DataFormatError
from onlstm_tasks.trees.headrules import constituency_to_heads
from onlstm_tasks.trees.heads import check_heads, heads_to_tensor
from onlstm_tasks.trees.ptb import parse_tree

__all__ = [
    "ParsedSentence",
    "ProjectionCounts",
    "dependency_tree_heads",
    "heads_to_tensor",
    "parse_tree_heads",
    "parsed_by_text",
    "project_heads",
    "read_depparsed_json",
    "token_offsets",
]


def parse_tree_heads(tree: str, n_words: int | None = None, source: str = "<parse_tree>",
                     line: int | str | None = None, words: Sequence[str] | None = None) -> list[int]:
    """Heads of a bracketed constituency tree (traces removed, Collins head rules); ``n_words`` is checked, and
    so are the leaves against ``words`` when given (equal up to PTB bracket escapes)."""
    if words is not None:
        n_words = len(words)
    try:
        parsed = parse_tree(tree, source)
    except DataFormatError as err:
        raise DataFormatError(source, line, f"the parse tree cannot be read: {_message(err)}") from None
    if n_words is not None and len(parsed) != n_words:
        raise DataFormatError(source, line, f"the parse tree has {len(parsed)} tokens but the sentence has "
                              f"{n_words} words")
    if words is not None:
        for i, (word, leaf) in enumerate(zip(words, parsed.words()), start=1):
            if _UNESCAPE.get(word, word) != _UNESCAPE.get(leaf, leaf):
                raise DataFormatError(source, line, f"the parse tree's leaf {i} is {leaf!r} but word {i} is "
                                      f"{word!r}: the tree does not belong to this sentence")
    return constituency_to_heads(parsed)


def _message(err: DataFormatError) -> str:
    """The message of a DataFormatError without its ``source:line:`` prefix."""
    text = str(err)
    where = f"{err.source}:{err.line}" if err.line not in (None, "") else str(err.source)
    return text[len(where) + 2:] if text.startswith(where + ": ") else text


# --------------------------------------------------------------------------------------------- SemEval JSON


@dataclass(frozen=True)
class ParsedSentence:
    """One sentence of a ``*_depparsed.json`` file; ``heads`` is the tree chosen by :func:`dependency_tree_heads`."""

    text: str
    tokens: tuple[str, ...]
    tags: tuple[str, ...]
    heads: tuple[int, ...]
    index: int  # 0-based position in the file


def read_depparsed_json(path: str | Path, source: str | None = None) -> list[ParsedSentence]:
    """Every sentence of a SemEval ``*_depparsed.json`` file with one dependency tree each."""
    source = source or str(path)
    try:
        rows = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise DataFormatError(source, None, f"expected a JSON list of parsed sentences: {err}") from None
    if not isinstance(rows, list):
        raise DataFormatError(source, None, f"expected a JSON list of parsed sentences, found {type(rows).__name__}")
    out = []
    for i, row in enumerate(rows):
        where = f"sentence {i}"
        try:
            tokens, deps = row["tokens"], row["dependencies"]
        except (KeyError, TypeError):
            raise DataFormatError(source, where, "expected an object with 'tokens' and 'dependencies'") from None
        heads = dependency_tree_heads(deps, len(tokens), source, where)
        out.append(ParsedSentence(text=row.get("sentence", " ".join(tokens)), tokens=tuple(tokens),
                                  tags=tuple(row.get("tags") or ()), heads=tuple(heads), index=i))
    return out


def parsed_by_text(
    sentences: Sequence[ParsedSentence], duplicates: Counter[str] | None = None
) -> dict[str, ParsedSentence]:
    """Parsed sentences keyed by their stripped text, to find an Example's parse. When a text occurs more than
    once the first parse wins; ``duplicates`` (when given) counts the later parses ignored, per text."""
    out: dict[str, ParsedSentence] = {}
    for sentence in sentences:
        text = sentence.text.strip()
        if text in out:
            if duplicates is not None:
                duplicates[text] += 1
            continue
        out[text] = sentence
    return out


def dependency_tree_heads(
    dependencies: Sequence[Sequence], n_tokens: int, source: str = "<dependencies>", where: str | None = None
) -> list[int]:
    """One tree (1-based heads, 0 = root) from ``[[rel, head, dep], ...]`` arcs, basic or enhanced (see the
    module docstring for how a head is chosen when a token has several)."""
    incoming: list[list[tuple[str, int]]] = [[] for _ in range(n_tokens + 1)]
    for arc in dependencies:
        if len(arc) != 3 or not isinstance(arc[1], int) or not isinstance(arc[2], int):
            raise DataFormatError(source, where, f"expected [relation, head, dependent] with integer indices, "
                                  f"found {arc!r}")
        rel, head, dep = arc
        if not (1 <= dep <= n_tokens and 0 <= head <= n_tokens):
            raise DataFormatError(source, where, f"arc {arc!r} is outside 1..{n_tokens} tokens (head 0 = root)")
        if head != dep:  # the enhanced graphs hold a few self-loops ("conj:and", 6, 6): never tree arcs
            incoming[dep].append((str(rel), head))
    missing = [t for t in range(1, n_tokens + 1) if not incoming[t]]
    if missing:
        raise DataFormatError(source, where, f"tokens {missing} have no head")
    conj_children = {(h, d) for d in range(1, n_tokens + 1) for rel, h in incoming[d] if rel.startswith("conj")}

    def rank(dep: int, arc: tuple[str, int], order: int) -> tuple[int, int]:
        rel, head = arc
        if rel.startswith("conj"):
            return 0, order
        if rel.endswith(":xsubj"):
            return 3, order
        if any((other, head) in conj_children for _, other in incoming[dep] if other != head):
            return 2, order  # propagated from the first conjunct
        return 1, order

    heads = [-1] * (n_tokens + 1)  # -1: not chosen yet
    for t in range(1, n_tokens + 1):
        if len(incoming[t]) == 1:
            heads[t] = incoming[t][0][1]
    for t in range(1, n_tokens + 1):
        if heads[t] != -1:
            continue
        ranked = sorted(((rank(t, arc, i), arc[1]) for i, arc in enumerate(incoming[t])))
        for _, head in ranked:
            if not _reaches(heads, head, t):
                heads[t] = head
                break
        else:
            raise DataFormatError(source, where, f"every head of token {t} closes a cycle: "
                                  f"{incoming[t]!r}")
    heads = heads[1:]
    try:
        check_heads(heads, single_root=False)
    except ValueError as err:
        raise DataFormatError(source, where, f"the arcs do not reduce to a tree: {err}") from None
    return heads


def _reaches(heads: list[int], start: int, target: int) -> bool:
    """Whether following chosen heads from ``start`` reaches ``target`` (unchosen heads end the walk)."""
    seen = set()
    node = start
    while node > 0 and node not in seen:
        if node == target:
            return True
        seen.add(node)
        node = heads[node]
    return False


# ------------------------------------------------------------------------------ alignment to other tokenisations

_UNESCAPE = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}"}
_QUOTES = "'\"`\u2018\u2019\u201c\u201d"
_SKIP_WINDOW = 8  # characters of punctuation a token may be shifted by (the parser re-tokenises "....." etc.)


def _candidates(token: str) -> list[str]:
    plain = token
    for escaped, char in _UNESCAPE.items():
        plain = plain.replace(escaped, char)
    out = [token, plain]
    if token in ("``", "''"):
        out += ['"', "\u201c", "\u201d"]
    return out


def _match_at(text: str, pos: int, candidate: str) -> int:
    """Length matched at ``pos`` (quotes of any kind match each other), 0 if no match."""
    if pos + len(candidate) > len(text):
        return 0
    for a, b in zip(candidate, text[pos:pos + len(candidate)]):
        if a != b and not (a in _QUOTES and b in _QUOTES):
            return 0
    return len(candidate)


def token_offsets(tokens: Sequence[str], text: str) -> list[tuple[int, int] | None]:
    """Character span of each PTB token in ``text`` (None for tokens the parser added, e.g. a second ``.``
    after ``etc.``). PTB escapes are undone and quote characters match each other."""
    out: list[tuple[int, int] | None] = []
    pos = 0
    for token in tokens:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        found = None
        for shift in range(_SKIP_WINDOW + 1):
            start = pos + shift
            if start > len(text) or (shift and text[start - 1].isalnum()):
                break  # only spaces and punctuation may be skipped
            for candidate in _candidates(token):
                n = _match_at(text, start, candidate)
                if n:
                    found = (start, start + n)
                    break
            if found:
                break
        out.append(found)
        if found:
            pos = found[1]
    return out


@dataclass
class ProjectionCounts:
    """The repairs made while moving parser trees onto Examples' words (:func:`project_heads`), summed over the
    sentences projected; :meth:`summary` is one log line."""

    sentences: int = 0
    dropped_tokens: int = 0  # parser tokens that belong to no word (not found in the text, or outside every word)
    attached_words: int = 0  # words that no parser token belongs to, attached to a neighbouring word
    extra_roots: int = 0  # words left as roots (the parser's root belongs to no word) attached under the highest
    flat_fallbacks: int = 0  # sentences where no parser token belongs to any word: a flat tree under the first
    duplicate_texts: int = 0  # sentences whose text was parsed more than once (the first parse is kept)

    def summary(self) -> str:
        return (f"{self.sentences:,} sentences; {self.dropped_tokens:,} parser tokens without a match dropped; "
                f"{self.attached_words:,} words attached to a neighbour; {self.extra_roots:,} extra roots attached "
                f"to the highest word; {self.flat_fallbacks:,} flat fallbacks; {self.duplicate_texts:,} duplicate "
                f"texts (first parse kept)")


def project_heads(
    heads: Sequence[int], offsets: Sequence[tuple[int, int] | None], target_offsets: Sequence[tuple[int, int]],
    counts: ProjectionCounts | None = None,
) -> list[int]:
    """Moves a dependency tree onto another tokenisation of the same text.

    ``heads``/``offsets``: the source tree (1-based) and its tokens' character spans (None = not in the text);
    ``target_offsets``: the character spans of the target words. Each source token belongs to the target word it
    overlaps most. A target word's head comes from its highest source token (smallest depth): the word owning
    that token's nearest owned ancestor, or 0 if it has none. Words without source tokens attach to the previous
    word (the next one for the first word); if no source token belongs to any word, the result is a flat tree
    under the first word. The result is a tree with one root. Each of these repairs is added to ``counts``
    (when given), and so are the source tokens that belong to no word (dropped).
    """
    counts = counts if counts is not None else ProjectionCounts()
    counts.sentences += 1
    if not target_offsets:
        counts.dropped_tokens += len(heads)
        return []
    n = len(heads)
    depth = [0] * (n + 1)
    for t in range(1, n + 1):
        d, node = 0, t
        while node:
            node, d = heads[node - 1], d + 1
            if d > n:
                raise ValueError("the source heads contain a cycle")
        depth[t] = d
    owner: list[int | None] = [None] * (n + 1)
    for t, span in enumerate(offsets, start=1):
        if span is None:
            continue
        best, overlap = None, 0
        for w, (start, end) in enumerate(target_offsets):
            o = min(end, span[1]) - max(start, span[0])
            if o > overlap:
                best, overlap = w, o
        owner[t] = best
    counts.dropped_tokens += sum(owner[t] is None for t in range(1, n + 1))
    top: dict[int, int] = {}  # target word -> its highest source token
    for t in range(1, n + 1):
        w = owner[t]
        if w is not None and (w not in top or depth[t] < depth[top[w]]):
            top[w] = t
    if not top:  # nothing aligned: a flat tree under the first word
        counts.flat_fallbacks += 1
        return [0] + [1] * (len(target_offsets) - 1)
    out = [0] * len(target_offsets)
    for w, t in top.items():
        node = heads[t - 1]
        while node and owner[node] is None:
            node = heads[node - 1]
        out[w] = 0 if node == 0 else owner[node] + 1
    roots = sorted((depth[top[w]], w) for w in top if out[w] == 0)
    for _, w in roots[1:]:  # the source root was not in the text: keep the highest word as the root
        out[w] = roots[0][1] + 1
    counts.extra_roots += len(roots) - 1
    owned = sorted(top)
    for w in range(len(target_offsets)):
        if w not in top:  # attach to the nearest owned word on the left, else the first owned word
            left = [o for o in owned if o < w]
            out[w] = (left[-1] if left else owned[0]) + 1
            counts.attached_words += 1
    return out
