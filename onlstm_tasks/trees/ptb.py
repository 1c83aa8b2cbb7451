"""Penn-Treebank bracketed trees: parsing, function-tag stripping, trace removal.

Accepted input: one or more trees per string or file, each possibly spanning lines, e.g.
``( (S (NP-SBJ (DT The) (NN cat)) (VP (VBD sat)) (. .)) )`` (PTB ``.mrg``, outer wrapper with an empty label)
or ``(TOP(S(NP (PRP I) )(VP (VBP believe) ...)))`` (OntoNotes / CoNLL-2012 ``parse_tree``). A preterminal is
``(TAG word)``; brackets inside words must be escaped (``-LRB-``/``-RRB-``), as in the treebanks.

Normalisation (all on by default, each one a keyword of :func:`parse_trees`):

* ``strip_root``: an outer wrapper with an empty label, ``TOP`` or ``ROOT`` and exactly one child is removed;
* ``strip_tags``: ``NP-SBJ-1`` -> ``NP``, ``NP=2`` -> ``NP``, ``PP-LOC-CLR`` -> ``PP``; labels that start
  with ``-`` (``-NONE-``, ``-LRB-``, ``-RRB-``, ``-LCB-``, ...) are kept whole;
* ``remove_traces``: ``-NONE-`` preterminals (traces, empty elements) are deleted, then every constituent left
  without children, so ``(NP-SBJ (-NONE- *T*-1))`` disappears entirely.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from onlstm_tasks.errors import DataFormatError

ROOT_LABELS = ("", "TOP", "ROOT")
TRACE_TAG = "-NONE-"
_TOKEN = re.compile(r"\(|\)|[^\s()]+")


@dataclass(repr=False)
class Tree:
    """A constituent. Preterminals have ``word`` set (``label`` is the POS tag) and no children."""

    label: str
    children: list[Tree] = field(default_factory=list)
    word: str | None = None

    @property
    def is_preterminal(self) -> bool:
        return self.word is not None

    def leaves(self) -> list[tuple[str, str]]:
        """``(word, POS)`` of every token, left to right."""
        return [(node.word, node.label) for node in self.preterminals()]

    def words(self) -> list[str]:
        return [node.word for node in self.preterminals()]

    def tags(self) -> list[str]:
        return [node.label for node in self.preterminals()]

    def preterminals(self) -> list[Tree]:
        out, stack = [], [self]
        while stack:
            node = stack.pop()
            if node.is_preterminal:
                out.append(node)
            else:
                stack.extend(reversed(node.children))
        return out

    def spans(self, labelled: bool = False) -> set:
        """Constituents covering at least two tokens: ``(start, end)`` (or ``(label, start, end)``), end exclusive.

        Unary chains give one span (a set); the whole-sentence span is included (metrics drop it).
        """
        spans: set = set()
        self._walk_spans(0, spans, labelled)
        return spans

    def _walk_spans(self, start: int, spans: set, labelled: bool) -> int:
        if self.is_preterminal:
            return start + 1
        end = start
        for child in self.children:
            end = child._walk_spans(end, spans, labelled)
        if end - start >= 2:
            spans.add((self.label, start, end) if labelled else (start, end))
        return end

    def prune(self, keep: Callable[[Tree], bool]) -> Tree | None:
        """A copy without the preterminals for which ``keep(preterminal)`` is False and without the constituents
        that become empty (``None`` if nothing is left). Unary nodes are kept."""
        if self.is_preterminal:
            return Tree(self.label, [], self.word) if keep(self) else None
        children = [c for c in (child.prune(keep) for child in self.children) if c is not None]
        return Tree(self.label, children) if children else None

    def __str__(self) -> str:
        if self.is_preterminal:
            return f"({self.label} {self.word})"
        return f"({self.label} {' '.join(str(c) for c in self.children)})" if self.label else \
            f"( {' '.join(str(c) for c in self.children)})"

    def __repr__(self) -> str:
        return f"Tree({str(self)!r})"

    def __len__(self) -> int:
        return len(self.preterminals())


def strip_function_tags(label: str) -> str:
    """``NP-SBJ-1`` -> ``NP``, ``S=2`` -> ``S``; ``-NONE-``, ``-LRB-`` and other ``-X-`` labels unchanged."""
    if label.startswith("-"):
        return label
    return re.split(r"[-=]", label, maxsplit=1)[0]


def _tokens(text: str) -> Iterator[tuple[str, int]]:
    """Bracket tokens with their 1-based line numbers."""
    line, last = 1, 0
    for m in _TOKEN.finditer(text):
        line += text.count("\n", last, m.start())
        last = m.start()
        yield m.group(), line


@dataclass
class _Open:
    """A constituent being read: its label is None until the first token after '(' (a word or another '(')."""

    line: int
    label: str | None = None
    word: str | None = None
    children: list[Tree] = field(default_factory=list)


def parse_trees(
    text: str,
    source: str = "<string>",
    strip_root: bool = True,
    strip_tags: bool = True,
    remove_traces: bool = True,
    first_line: int = 1,
) -> list[Tree]:
    """Every tree in ``text``, normalised as the module docstring says (each step can be switched off).

    Errors are :class:`DataFormatError` naming ``source``, the line and the tree index (1-based);
    ``first_line`` is the line number of ``text``'s first line within ``source``. A tree made of traces only
    (nothing left after ``remove_traces``) is an error too, since it has no tokens.
    """
    trees: list[Tree] = []
    stack: list[_Open] = []
    for token, line in _tokens(text):
        line += first_line - 1
        where = f"tree {len(trees) + 1}"
        top = stack[-1] if stack else None
        if token == "(":
            if top is not None:
                if top.word is not None:
                    raise DataFormatError(source, line, f"{where}: '(' after the word of ({top.label} {top.word} "
                                          f"...): a preterminal holds one word")
                if top.label is None:
                    top.label = ""  # "( (S ...) )": a constituent without a label
            stack.append(_Open(line))
        elif token == ")":
            if top is None:
                after = f"after tree {len(trees)}" if trees else "before the first tree"
                raise DataFormatError(source, line, f"unbalanced brackets: ')' with no open '(' {after}")
            stack.pop()
            if top.label is None or (top.word is None and not top.children):
                raise DataFormatError(source, line, f"{where}: empty constituent ({top.label or ''}) opened on "
                                      f"line {top.line}: expected children or a word")
            node = Tree(top.label, top.children, top.word)
            if stack:
                stack[-1].children.append(node)
            else:
                trees.append(_normalise(node, source, top.line, len(trees) + 1, strip_root, strip_tags,
                                        remove_traces))
        elif top is None:
            raise DataFormatError(source, line, f"{where}: {token!r} outside any bracket")
        elif top.label is None:
            top.label = token
        elif top.word is None and not top.children:
            top.word = token
        else:
            what = f"a second word after {top.word!r}" if top.word is not None else "a word after child constituents"
            raise DataFormatError(source, line, f"{where}: {token!r} in ({top.label} ...) is {what}: "
                                  f"expected '(' or ')'")
    if stack:
        raise DataFormatError(source, stack[0].line, f"tree {len(trees) + 1}: unbalanced brackets: {len(stack)} "
                              f"constituent(s) not closed at the end of the input, the innermost "
                              f"({stack[-1].label or ''} ...) opened on line {stack[-1].line}")
    return trees


def _normalise(
    tree: Tree, source: str, line: int, index: int, strip_root: bool, strip_tags: bool, remove_traces: bool
) -> Tree:
    if strip_tags:
        stack = [tree]
        while stack:
            node = stack.pop()
            if not node.is_preterminal:
                node.label = strip_function_tags(node.label)
            stack.extend(node.children)
    if remove_traces:
        pruned = tree.prune(lambda leaf: leaf.label != TRACE_TAG)
        if pruned is None:
            raise DataFormatError(source, line, f"tree {index}: only traces (-NONE-), no tokens")
        tree = pruned
    while strip_root and tree.label in ROOT_LABELS and len(tree.children) == 1:
        tree = tree.children[0]
    return tree


def parse_tree(text: str, source: str = "<string>", **options) -> Tree:
    """Exactly one tree (see :func:`parse_trees` for ``options``)."""
    trees = parse_trees(text, source, **options)
    if len(trees) != 1:
        raise DataFormatError(source, None, f"expected exactly one tree, found {len(trees)}")
    return trees[0]


def read_trees(path: str | Path, source: str | None = None, **options) -> list[Tree]:
    """Every tree in a file (PTB ``.mrg``-style; see :func:`parse_trees`)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise DataFormatError(source or str(path), None, f"cannot read the tree file: {err}") from None
    return parse_trees(text, source or str(path), **options)
