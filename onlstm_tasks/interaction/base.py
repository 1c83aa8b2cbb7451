"""The interaction-function contract and the tree helpers every interaction shares.

Trees come in three forms (all 0-based, the root and every padded position pointing to themselves):

* hard heads, ``LongTensor [B, T]`` (gold trees, :func:`~onlstm_tasks.trees.induce.heads_tensor`);
* head weights, ``[B, T, T]`` float, row ``i`` a distribution over the head of token ``i`` (soft induced trees,
  :func:`~onlstm_tasks.trees.induce.soft_heads`; the root's mass sits on the diagonal, padded rows are zero);
* ``None``: no tree, every token is its own root.

:func:`parent_states` is the one place ``h_p(i)`` is computed from any of them, and :func:`tree_adjacency` the one
place the undirected graph (parent + children + self) is built, so hard, soft and missing trees behave alike.
"""

from __future__ import annotations

import torch
from torch import nn


def head_matrix(heads: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Head weights ``[B, T, T]`` of a tree: hard heads ``[B, T]`` become one-hot rows; weights pass through.

    Rows and columns of padded positions are zero in both cases.
    """
    real = (mask[:, :, None] & mask[:, None, :])
    if heads.dim() == 2:
        if heads.dtype != torch.long:
            raise ValueError(f"hard heads must be a long tensor [B, T], got dtype {heads.dtype}")
        weights = torch.nn.functional.one_hot(heads, heads.size(1)).to(torch.get_default_dtype())
    elif heads.dim() == 3:
        weights = heads
    else:
        raise ValueError(f"heads must be [B, T] (hard) or [B, T, T] (weights), got shape {tuple(heads.shape)}")
    if weights.shape[:2] != mask.shape or weights.size(2) != mask.size(1):
        raise ValueError(f"heads of shape {tuple(heads.shape)} do not match the mask {tuple(mask.shape)}")
    return weights * real.to(weights.dtype)


def parent_states(h: torch.Tensor, heads: torch.Tensor | None) -> torch.Tensor:
    """``h_p(i)``: every token's parent state, ``[B, T, H]``.

    * hard heads ``[B, T]`` (long): ``h[b, heads[b, i]]`` by ``gather`` (the root gets its own state);
    * head weights ``[B, T, T]``: ``bmm(heads, h)``, the expected parent state (the root's share is its own
      state; padded rows, whose weights are zero, get zeros);
    * ``None`` (no tree): ``h`` itself.
    """
    if heads is None:
        return h
    if heads.dim() == 2:
        if heads.shape != h.shape[:2]:
            raise ValueError(f"heads {tuple(heads.shape)} do not match states {tuple(h.shape)}")
        return h.gather(1, heads.unsqueeze(-1).expand(-1, -1, h.size(-1)))
    if heads.dim() == 3:
        if heads.shape != (*h.shape[:2], h.size(1)):
            raise ValueError(f"head weights {tuple(heads.shape)} do not match states {tuple(h.shape)}")
        return torch.bmm(heads.to(h.dtype), h)
    raise ValueError(f"heads must be [B, T] (hard) or [B, T, T] (weights), got shape {tuple(heads.shape)}")


def tree_adjacency(heads: torch.Tensor | None, mask: torch.Tensor) -> torch.Tensor:
    """The GCN graph of a tree, ``[B, T, T]``: ``D^-1/2 (A + A^T + I) D^-1/2`` (Kipf & Welling, 2017).

    ``A[i, j]`` is the weight of ``j`` heading ``i`` (:func:`head_matrix` without its diagonal, i.e. the root's
    self-pointer is not an edge), so ``A + A^T`` links each token to its parent and its children; ``I`` adds self
    loops and ``D`` is the row sum of ``A + A^T + I``. The result is symmetric; padded rows and columns are zero.
    Without a tree (``None``) it is the identity on real tokens.
    """
    eye = torch.diag_embed(mask.to(torch.get_default_dtype()))
    if heads is None:
        return eye
    A = head_matrix(heads, mask)
    A = A * (1 - torch.eye(A.size(1), dtype=A.dtype, device=A.device))
    graph = A + A.transpose(1, 2) + eye.to(A.dtype)
    inv_sqrt = graph.sum(dim=2).clamp_min(1e-12).rsqrt() * mask.to(A.dtype)  # [B, T]
    return inv_sqrt[:, :, None] * graph * inv_sqrt[:, None, :]


class Interaction(nn.Module):
    """``g(h, h_parent) -> [B, T, output_size]``, with ``h`` and ``h_parent`` of size ``input_size``.

    Subclasses take ``input_size`` first (derived from the encoder below them, never typed in configs) and implement
    :meth:`combine`; :meth:`forward` zeroes padded positions of the result. ``heads`` is the tree ``h_parent`` was
    computed from (any form of the module docstring); only interactions that look beyond the parent (the GCN)
    read it. :meth:`over_tree` computes the parent states itself.
    """

    input_size: int
    output_size: int

    def combine(self, h: torch.Tensor, parent: torch.Tensor, heads: torch.Tensor | None,
                mask: torch.Tensor) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def forward(self, h: torch.Tensor, parent: torch.Tensor, heads: torch.Tensor | None = None,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        if h.dim() != 3 or h.size(-1) != self.input_size:
            raise ValueError(f"h must be [B, T, {self.input_size}], got shape {tuple(h.shape)}")
        if parent.shape != h.shape:
            raise ValueError(f"parent must have the shape of h {tuple(h.shape)}, got {tuple(parent.shape)}")
        if mask is None:
            mask = torch.ones(h.shape[:2], dtype=torch.bool, device=h.device)
        return self.combine(h, parent, heads, mask) * mask.unsqueeze(-1).to(h.dtype)

    def over_tree(self, h: torch.Tensor, heads: torch.Tensor | None, mask: torch.Tensor) -> torch.Tensor:
        """``g(h, parent_states(h, heads))`` over a tree in any form."""
        return self(h, parent_states(h, heads), heads, mask)
