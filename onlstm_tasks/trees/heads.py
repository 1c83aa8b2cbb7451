"""The two forms of a dependency tree and the conversions between them.

* list form: ``list[int]``, one 1-based head per token, 0 = root (CoNLL convention, ``Example.heads``);
* tensor form: ``LongTensor [B, T]``, 0-based; the root points to itself and so does every padded position
  (so ``hidden.gather`` with it always stays in range). Use the mask to tell padding from real tokens.

Induced heads (:mod:`onlstm_tasks.trees.induce`) and gold heads (:mod:`onlstm_tasks.trees.gold`) both use them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def check_heads(heads: Sequence[int], single_root: bool = True) -> None:
    """Raises ValueError unless ``heads`` (list form) is a tree: heads in ``0..n``, no token heading itself,
    no cycle and (with ``single_root``) exactly one root."""
    n = len(heads)
    for t, h in enumerate(heads, start=1):
        if not 0 <= h <= n:
            raise ValueError(f"token {t} has head {h}, outside 0..{n}")
        if h == t:
            raise ValueError(f"token {t} is its own head")
    roots = [t for t, h in enumerate(heads, start=1) if h == 0]
    if not roots or (single_root and len(roots) != 1):
        raise ValueError(f"expected {'exactly one root' if single_root else 'a root'}, found tokens {roots}")
    state = [0] * (n + 1)  # 0 unvisited, 1 on the current path, 2 reaches the root
    state[0] = 2
    for t in range(1, n + 1):
        path = []
        while state[t] == 0:
            state[t] = 1
            path.append(t)
            t = heads[t - 1]
        if state[t] == 1:
            raise ValueError(f"cycle through tokens {sorted(path[path.index(t):])}")
        for p in path:
            state[p] = 2


def heads_to_tensor(batch: Sequence[Sequence[int]], max_len: int | None = None) -> torch.Tensor:
    """List forms of ``B`` sentences -> tensor form ``[B, T]`` (``T`` = ``max_len`` or the longest sentence)."""
    T = max((len(h) for h in batch), default=0) if max_len is None else max_len
    out = torch.arange(T).repeat(len(batch), 1)
    for b, heads in enumerate(batch):
        if len(heads) > T:
            raise ValueError(f"sentence {b} has {len(heads)} tokens, more than max_len={T}")
        for t, h in enumerate(heads):
            out[b, t] = t if h == 0 else h - 1
    return out


def tensor_to_heads(heads: torch.Tensor, mask: torch.Tensor) -> list[list[int]]:
    """Tensor form ``[B, T]`` (+ ``mask``) -> list forms: a token pointing to itself is the root (0)."""
    out = []
    for row, m in zip(heads.tolist(), mask.tolist()):
        n = sum(m)
        out.append([0 if h == t else h + 1 for t, h in enumerate(row[:n])])
    return out


def slice_heads(heads: Sequence[int], start: int, end: int) -> list[int]:
    """The list form of tokens ``[start, end)`` of a sentence (a piece of a sentence cut for length).

    Each token's head is its nearest ancestor inside the piece (renumbered, 1-based), or 0 when none is: the
    tokens whose chain of heads leaves the piece become roots, so a piece may have several.

    >>> slice_heads([2, 0, 2, 3], 2, 4)  # tokens 3 and 4: 3's head (2) is outside the piece
    [0, 1]
    """
    out = []
    for t in range(start, end):
        head, steps = heads[t], 0
        while head and not start < head <= end:
            head, steps = heads[head - 1], steps + 1
            if steps > len(heads):
                raise ValueError("the heads contain a cycle")
        out.append(head - start if head else 0)
    return out


def hop_distances(heads: torch.Tensor, mask: torch.Tensor, sources: torch.Tensor) -> torch.Tensor:
    """Tree distance (arcs, either direction) from the nearest ``sources`` token to every token, ``[B, T]`` long.

    ``heads``: tensor form ``[B, T]``; ``sources``: ``[B, T]`` bool (e.g. an aspect's tokens, distance 0). Tokens
    the sources cannot reach (another tree of a forest) and padded positions get ``T``. Breadth-first search over
    the undirected tree, one batched step per hop.
    """
    B, T = heads.shape
    pos = torch.arange(T, device=heads.device)
    is_arc = mask & (heads != pos)  # real tokens other than roots have an arc to their head
    graph = torch.zeros(B, T, T, dtype=torch.float32, device=heads.device)
    graph[is_arc.nonzero(as_tuple=True) + (heads[is_arc],)] = 1.0
    graph = graph + graph.transpose(1, 2)  # [B, T, T], child <-> head
    reached = sources & mask
    distances = torch.where(reached, 0, T)
    frontier = reached
    for hop in range(1, T):
        frontier = (torch.bmm(frontier.float().unsqueeze(1), graph).squeeze(1) > 0) & mask & ~reached
        if not bool(frontier.any()):
            break
        distances = torch.where(frontier, hop, distances)
        reached = reached | frontier
    return distances
