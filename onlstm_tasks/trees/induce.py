"""Unsupervised trees from ON-LSTM syntactic distances: the greedy top-down split of Shen et al. (2019).

Distance convention
-------------------
``distances[t]`` belongs to token ``t``: it is the ON-LSTM distance computed while reading token ``t``
(``1 - mean(f~_t)``, :class:`~onlstm_tasks.encoders.base.EncoderOutput`). A large ``d_t`` means the master
forget gate erased many levels when token ``t`` arrived, i.e. a high-level boundary lies *before* token ``t``.

Greedy split (the authors' ``build_tree``, reimplemented)
--------------------------------------------------------
For a span ``[i, j)`` of two or more tokens let ``k`` be the *first* position of the maximum of
``d[i:j]`` (ties go to the leftmost token, as ``numpy.argmax`` does). The span becomes

* ``(T(i, k), (k, T(k+1, j)))`` when ``i < k < j - 1``,
* ``(T(i, k), k)``              when ``k = j - 1``,
* ``(k, T(k+1, j))``            when ``k = i``,

where ``T(a, b)`` is the tree of ``[a, b)`` (a bare leaf for one token). So the span is divided into ``[i, k)``
and ``[k, j)``, and inside ``[k, j)`` the split token is attached to the rest ``[k+1, j)`` first. Every span's
split token is chosen by one argmax, which also defines the dependency form below.

Tree representation
-------------------
Nested tuples: a leaf is a token index (``int``) or, when ``words`` are given, the word (``str``); an inner node
is a tuple of its children (always two for induced trees; :func:`tree_to_spans` and :func:`tree_to_brackets`
accept any arity). Leaves appear left to right in token order, so spans are counted by leaf position.

Heads
-----
The split token of a span heads that span: its parent is the split token of the smallest enclosing span, and
the split token of the whole sentence is the root. Equivalently, heads form the Cartesian tree of the distances
under "larger distance, then earlier position, is higher". Two forms:

* :func:`distances_to_heads` -> ``list[int]``, 1-based, root = 0 (CoNLL convention, like ``Example.heads``);
* :func:`heads_tensor` -> ``LongTensor [B, T]``, 0-based, the root (and every padded position) points to itself.

:func:`soft_heads` is a differentiable relaxation of the same head choice (see its docstring).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Union

import torch
import torch.nn.functional as F

Tree = Union[int, str, tuple["Tree", ...]]


def _check_distances(distances: Sequence[float]) -> list[float]:
    values = [float(d) for d in distances]
    if not values:
        raise ValueError("distances must hold at least one value (one per token)")
    if any(v != v for v in values):
        raise ValueError("distances contain NaN")
    return values


def _first_argmax(values: Sequence[float], start: int, end: int) -> int:
    best = start
    for t in range(start + 1, end):
        if values[t] > values[best]:
            best = t
    return best


def _split_points(values: Sequence[float]) -> dict[tuple[int, int], int]:
    """Every span the greedy split visits (``[i, j)`` with at least one token) -> its split token."""
    splits: dict[tuple[int, int], int] = {}
    stack = [(0, len(values))]
    while stack:
        i, j = stack.pop()
        k = _first_argmax(values, i, j)
        splits[(i, j)] = k
        if k > i:
            stack.append((i, k))
        if k + 1 < j:
            stack.append((k + 1, j))
    return splits


def distances_to_tree(distances: Sequence[float], words: Sequence[str] | None = None) -> Tree:
    """The greedy binary tree of one sentence (module docstring: conventions and representation).

    ``distances`` has one value per token (a list or a 1-D tensor). Leaves are token indices, or ``words[t]``
    when ``words`` is given. Built without recursion, so sentence length is not bounded by Python's stack.

    >>> distances_to_tree([2, 0, 3, 1])
    ((0, 1), (2, 3))
    """
    values = _check_distances(distances)
    if words is not None and len(words) != len(values):
        raise ValueError(f"got {len(words)} words for {len(values)} distances")
    splits = _split_points(values)
    leaf = (lambda t: words[t]) if words is not None else (lambda t: t)
    built: dict[tuple[int, int], Tree] = {}
    # children are strictly shorter spans than their parent: build the shortest first
    for (i, j) in sorted(splits, key=lambda span: span[1] - span[0]):
        k = splits[(i, j)]
        right = leaf(k) if k + 1 == j else (leaf(k), built[(k + 1, j)])
        built[(i, j)] = right if k == i else (built[(i, k)] if k - i > 1 else leaf(i), right)
    return built[(0, len(values))]


def tree_to_spans(tree: Tree) -> set[tuple[int, int]]:
    """All constituents with at least two tokens as ``(start, end)`` leaf positions, ``end`` exclusive.

    Includes the whole-sentence span (metrics drop it); a single-leaf tree has no spans.

    >>> sorted(tree_to_spans(((0, 1), (2, 3))))
    [(0, 2), (0, 4), (2, 4)]
    """
    spans: set[tuple[int, int]] = set()
    position = 0  # leaves seen so far: a node's start when it is entered, its end when it is left
    stack: list[tuple[Tree, int | None]] = [(tree, None)]
    while stack:
        node, start = stack.pop()
        if not isinstance(node, tuple):
            position += 1
        elif start is not None:  # leaving the node
            if position - start >= 2:
                spans.add((start, position))
        else:
            if not node:
                raise ValueError("a tree node must have at least one child")
            stack.append((node, position))
            stack.extend((child, None) for child in reversed(node))
    return spans


_CLOSE, _SPACE = object(), object()  # markers for the iterative printer


def tree_to_brackets(tree: Tree, words: Sequence[str] | None = None) -> str:
    """``"(w1 (w2 w3))"``: inner nodes in parentheses, leaves bare; a one-leaf tree is just the word.

    Integer leaves are looked up in ``words`` (or printed as numbers without it); string leaves print as they are.
    """
    def leaf(node) -> str:
        if isinstance(node, str):
            return node
        return str(node) if words is None else words[node]

    out: list[str] = []
    stack: list[object] = [tree]
    while stack:
        node = stack.pop()
        if node is _CLOSE:
            out.append(")")
        elif isinstance(node, tuple):
            out.append("(")
            stack.append(_CLOSE)
            for i, child in enumerate(reversed(node)):
                stack.append(child)
                if i < len(node) - 1:
                    stack.append(_SPACE)
        elif node is _SPACE:
            out.append(" ")
        else:
            out.append(leaf(node))
    return "".join(out)


def distances_to_heads(distances: Sequence[float]) -> list[int]:
    """1-based heads (0 = root, CoNLL convention): each span's split token heads the rest of the span.

    The split token ``k`` of span ``[i, j)`` is the parent of the split tokens of ``[i, k)`` and ``[k+1, j)``;
    the split token of the whole sentence is the root.

    >>> distances_to_heads([2, 0, 3, 1])  # tree ((0, 1), (2, 3)): token 2 is root, heads 0 and 3; 0 heads 1
    [3, 1, 0, 3]
    """
    values = _check_distances(distances)
    heads = [0] * len(values)
    stack = [(0, len(values), -1)]  # span and the 0-based split token of its parent span (-1: none)
    while stack:
        i, j, parent = stack.pop()
        k = _first_argmax(values, i, j)
        heads[k] = parent + 1
        if k > i:
            stack.append((i, k, k))
        if k + 1 < j:
            stack.append((k + 1, j, k))
    return heads


def _check_batch(distances: torch.Tensor, mask: torch.Tensor) -> None:
    if distances.dim() != 2:
        raise ValueError(f"distances must be [B, T], got shape {tuple(distances.shape)}")
    if mask.shape != distances.shape:
        raise ValueError(f"mask must have shape {tuple(distances.shape)}, got {tuple(mask.shape)}")
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor, got dtype {mask.dtype}")


@torch.no_grad()
def heads_tensor(distances: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Batched hard heads, ``LongTensor [B, T]``, 0-based; the root and padded positions point to themselves.

    Same tree as :func:`distances_to_heads` (its oracle in the tests), computed without a Python loop. Token
    ``l < t`` dominates ``t`` when ``d_l >= d_t`` (the earlier token wins ties) and ``r > t`` when ``d_r > d_t``.
    The parent of ``t`` is one of its nearest dominating tokens on the left and on the right: the one with the
    smaller distance (on equal distances the right one, since the left one dominates it); with neither, ``t``
    is the root. Padded positions never dominate; ``mask`` must be left-aligned ([B, T] bool).
    """
    _check_batch(distances, mask)
    B, T = distances.shape
    d = distances.float()
    pos = torch.arange(T, device=d.device)
    di, dj = d[:, :, None], d[:, None, :]  # [B, T, 1], [B, 1, T]: row = token t, column = candidate
    real = mask[:, None, :] & mask[:, :, None]
    left = real & (pos[None, None, :] < pos[None, :, None]) & (dj >= di)
    right = real & (pos[None, None, :] > pos[None, :, None]) & (dj > di)
    # nearest dominating token on each side (-1 / T when there is none)
    left_idx = torch.where(left, pos, torch.full_like(pos, -1)).amax(dim=2)  # [B, T]
    right_idx = torch.where(right, pos, torch.full_like(pos, T)).amin(dim=2)
    has_left, has_right = left_idx >= 0, right_idx < T
    d_left = d.gather(1, left_idx.clamp(min=0))
    d_right = d.gather(1, right_idx.clamp(max=T - 1))
    take_left = has_left & (~has_right | (d_left < d_right))
    self_idx = pos.expand(B, T)
    heads = torch.where(take_left, left_idx, torch.where(has_right, right_idx, self_idx))
    return torch.where(mask, heads, self_idx)


def soft_heads(distances: torch.Tensor, mask: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """A differentiable head distribution ``[B, T, T]`` (row ``i``: probabilities of each ``j`` heading ``i``).

    It relaxes the rule of :func:`heads_tensor`. With ``g_ij`` the largest distance among ``d_i`` and the
    tokens strictly between ``i`` and ``j``, token ``j`` *dominates* ``i`` with probability
    ``c_ij = sigmoid((d_j - g_ij) / temperature)``. The nearest dominating token on the right is
    ``R = j`` with probability ``c_ij * prod_{i<k<j} (1 - c_ik)`` (stick breaking; the leftover mass is "no
    right candidate"), and likewise ``L`` on the left. The parent is ``L`` or ``R``, whichever has the smaller
    distance, chosen softly with ``sigmoid((d_R - d_L) / temperature)``; with only one candidate it is that one,
    and with none ``i`` is the root and the mass sits on the diagonal (the root points to itself, as in
    :func:`heads_tensor`). Hence:

    * each real row sums to 1 over real columns; padded rows and columns are zero;
    * a one-token sentence puts all its mass on itself;
    * as ``temperature -> 0`` (and without exact ties) the rows become the one-hot rows of :func:`heads_tensor`;
      ON-LSTM distances lie in [0, 1], so temperatures around 0.01-0.1 are near-hard and 1.0 (default) is soft;
    * gradients reach ``distances`` through the sigmoids (and the range maxima ``g_ij``).
    """
    _check_batch(distances, mask)
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    B, T = distances.shape
    d = distances
    pos = torch.arange(T, device=d.device)
    real = mask[:, :, None] & mask[:, None, :]  # [B, T, T]
    after = pos[None, None, :] > pos[None, :, None]  # column j right of row i
    before = pos[None, None, :] < pos[None, :, None]

    # C[b, a, k] = max(d[b, a..k]) for k >= a (running maximum from every start a)
    floor = d.detach().min() - 1.0
    starts = torch.where(~before, d[:, None, :], floor)  # row a keeps d[k] for k >= a
    C = torch.cummax(starts, dim=2).values  # [B, T(start a), T(end k)]
    # g_ij for j > i: max d[i..j-1] = C[i, j-1];  for j < i: max d[j+1..i] = C[j+1, i]
    g_right = torch.cat([C[:, :, :1], C[:, :, :-1]], dim=2)  # [i, j] -> C[i, j-1]
    C_t = C.transpose(1, 2)  # [k, a] = C[a, k]
    g_left = torch.cat([C_t[:, :, 1:], C_t[:, :, -1:]], dim=2)  # [i, j] -> C[j+1, i]
    g = torch.where(after, g_right, g_left)

    x = (d[:, None, :] - g) / temperature
    side_left, side_right = real & before, real & after
    log_c = F.logsigmoid(x)
    log_not_c = F.logsigmoid(-x)

    def nearest(side: torch.Tensor, reverse: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """P(nearest candidate on one side = j) [B, T, T] and P(no candidate on that side) [B, T]."""
        lnc = torch.where(side, log_not_c, torch.zeros_like(log_not_c))
        if reverse:  # walk leftwards from i: closer tokens are at larger j
            lnc = lnc.flip(2)
        before_j = torch.cumsum(lnc, dim=2) - lnc  # sum over tokens strictly closer to i than j
        if reverse:
            before_j = before_j.flip(2)
        p = torch.where(side, torch.exp(log_c + before_j), torch.zeros_like(before_j))
        none = torch.exp(lnc.sum(dim=2))
        return p, none

    p_left, none_left = nearest(side_left, reverse=True)
    p_right, none_right = nearest(side_right, reverse=False)
    # S[a, b] = P(a is chosen over b) = sigmoid((d_b - d_a) / temperature): the smaller distance wins
    S = torch.sigmoid((d[:, None, :] - d[:, :, None]) / temperature)  # [B, a, b]
    # left j wins against the right candidate r with probability S[j, r]: sum_r p_right[i, r] * S[j, r]
    left_wins = torch.bmm(p_right, S.transpose(1, 2)) + none_right[:, :, None]
    right_wins = torch.bmm(p_left, S.transpose(1, 2)) + none_left[:, :, None]
    probs = p_left * left_wins + p_right * right_wins
    root = (none_left * none_right * mask).to(probs.dtype)
    probs = probs + torch.diag_embed(root)
    return probs * real
