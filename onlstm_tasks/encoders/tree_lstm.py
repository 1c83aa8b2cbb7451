"""Child-sum Tree-LSTM (Tai, Socher & Manning, ACL 2015) over a dependency tree, with an optional top-down pass.

Bottom-up pass (the paper's child-sum equations), for node ``j`` with input ``x_j`` and children ``C(j)``::

    h~_j = sum_{k in C(j)} h_k
    i_j  = sigmoid(W_i x_j + U_i h~_j + b_i)
    f_jk = sigmoid(W_f x_j + U_f h_k  + b_f)          one forget gate per child k
    o_j  = sigmoid(W_o x_j + U_o h~_j + b_o)
    u_j  = tanh   (W_u x_j + U_u h~_j + b_u)
    c_j  = i_j * u_j + sum_{k in C(j)} f_jk * c_k
    h_j  = o_j * tanh(c_j)

A leaf has ``h~_j = 0`` and no forget term. Top-down pass (``top_down: true``), from each root down: node ``j``
reads its own bottom-up state ``h_j`` and its parent's top-down state, an LSTM step along the root-to-``j`` path
(a Tree-LSTM whose single predecessor is the parent; a root starts from zeros)::

    i'_j = sigmoid(W'_i h_j + U'_i h'_p(j) + b'_i)     f'_j = sigmoid(W'_f h_j + U'_f h'_p(j) + b'_f)
    o'_j = sigmoid(W'_o h_j + U'_o h'_p(j) + b'_o)     u'_j = tanh   (W'_u h_j + U'_u h'_p(j) + b'_u)
    c'_j = i'_j * u'_j + f'_j * c'_p(j)                h'_j = o'_j * tanh(c'_j)

(an ``nn.LSTMCell`` with input ``h_j`` and state ``(h'_p(j), c'_p(j))``). The output per token is ``[h_j ; h'_j]``
(``2 * hidden_size``), or ``h_j`` alone without the top-down pass.

Both passes are batched by level: the bottom-up pass visits all nodes of the batch with the same height (leaves 0,
a parent one more than its highest child) at once, the top-down pass all nodes of the same depth; each node's
forget-gated cell and its state are added into its parent's child sums as soon as the node is done.
:func:`reference_tree_lstm` is the plain recursive, one-sentence-at-a-time oracle of the tests.
"""

from __future__ import annotations

import torch
from torch import nn

from onlstm_tasks.encoders.base import EncoderFactory, EncoderOutput, TreeEncoder, encode, encoder_output
from onlstm_tasks.encoders.defaults import TAGGER, default_encoder
from onlstm_tasks.trees.source import HasDistances, TreeSource


def tree_levels(heads: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Height (leaves 0) and depth (roots 0) of every token, both ``[B, T]`` long, -1 at padding.

    ``heads``: tensor form ``[B, T]`` (0-based, a root points to itself; several roots make a forest). One batched
    step per level; raises ValueError when the heads contain a cycle.
    """
    B, T = heads.shape
    pos = torch.arange(T, device=heads.device)
    is_child = mask & (heads != pos)
    height, depth = torch.zeros_like(heads), torch.zeros_like(heads)
    for _ in range(T + 1):
        new_height = torch.zeros_like(heads).scatter_reduce(1, heads, torch.where(is_child, height + 1, 0), "amax")
        new_depth = torch.where(is_child, depth.gather(1, heads) + 1, 0)
        if torch.equal(new_height, height) and torch.equal(new_depth, depth):
            return torch.where(mask, height, -1), torch.where(mask, depth, -1)
        height, depth = new_height, new_depth
    raise ValueError("the heads contain a cycle: a Tree-LSTM needs every token's chain of heads to reach a root")


class ChildSumBottomUp(nn.Module):
    """The bottom-up child-sum pass: ``(x [B, T, D], heads [B, T], mask) -> (h, c)``, each ``[B, T, H]``."""

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.input_proj = nn.Linear(input_size, 4 * hidden_size)  # W_i, W_f, W_o, W_u and the biases b
        self.child_proj = nn.Linear(hidden_size, 3 * hidden_size, bias=False)  # U_i, U_o, U_u (read h~_j)
        self.forget_proj = nn.Linear(hidden_size, hidden_size, bias=False)  # U_f (reads each child's h_k)

    def forward(self, x: torch.Tensor, heads: torch.Tensor, mask: torch.Tensor,
                height: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        B, T, _ = x.shape
        H, N = self.hidden_size, B * T
        wx = self.input_proj(x).reshape(N, 4 * H)  # every token's W x + b, computed once
        parent = (heads + torch.arange(B, device=x.device)[:, None] * T).reshape(N)  # flat index of the head
        has_parent = (mask & (heads != torch.arange(T, device=x.device))).reshape(N)
        height = height.reshape(N)
        h_sum, fc_sum = x.new_zeros(N, H), x.new_zeros(N, H)  # sum_k h_k and sum_k f_jk * c_k, per parent j
        done, hs, cs = [], [], []
        for level in range(int(height.max()) + 1):
            nodes = (height == level).nonzero().squeeze(1)  # [n]: every node of this height in the batch
            w_i, _, w_o, w_u = wx[nodes].chunk(4, dim=1)
            u_i, u_o, u_u = self.child_proj(h_sum[nodes]).chunk(3, dim=1)
            c = torch.sigmoid(w_i + u_i) * torch.tanh(w_u + u_u) + fc_sum[nodes]
            h = torch.sigmoid(w_o + u_o) * torch.tanh(c)
            done.append(nodes), hs.append(h), cs.append(c)
            up = has_parent[nodes]
            to = parent[nodes[up]]  # [m] parents of this level's non-root nodes
            f = torch.sigmoid(wx[to, H : 2 * H] + self.forget_proj(h[up]))  # f_jk, W_f x_j from the parent j
            h_sum, fc_sum = h_sum.index_add(0, to, h[up]), fc_sum.index_add(0, to, f * c[up])
        order = torch.cat(done)
        h_all = x.new_zeros(N, H).index_copy(0, order, torch.cat(hs))  # padding (no level) stays zero
        c_all = x.new_zeros(N, H).index_copy(0, order, torch.cat(cs))
        return h_all.view(B, T, H), c_all.view(B, T, H)


class TopDown(nn.Module):
    """The top-down pass: an LSTM step from each parent's top-down state to its child, level by level (depth)."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(hidden_size, hidden_size)

    def forward(self, up: torch.Tensor, heads: torch.Tensor, depth: torch.Tensor) -> torch.Tensor:
        B, T, H = up.shape
        parent = (heads + torch.arange(B, device=up.device)[:, None] * T).reshape(-1)
        up, depth = up.reshape(B * T, H), depth.reshape(-1)
        h_all, c_all = up.new_zeros(B * T, H), up.new_zeros(B * T, H)
        for level in range(int(depth.max()) + 1):
            nodes = (depth == level).nonzero().squeeze(1)
            # roots point to themselves and read zeros (nothing is written before depth 0 is done)
            h, c = self.cell(up[nodes], (h_all[parent[nodes]], c_all[parent[nodes]]))
            h_all, c_all = h_all.index_copy(0, nodes, h), c_all.index_copy(0, nodes, c)
        return h_all.view(B, T, H)


class ChildSumTreeLSTM(TreeEncoder):
    """Child-sum Tree-LSTM encoder over the tree of ``tree_source`` (equations in the module docstring).

    Args:
        input_size: features of each input vector.
        hidden_size: size of the Tree-LSTM states (each pass).
        tree_source: a :class:`~onlstm_tasks.trees.source.TreeSource`, a mapping of its fields (YAML
            ``tree_source: {kind: induced, distance_layer: -1}``) or its kind alone: ``gold`` (the batch's gold
            heads, ``forward(x, mask, heads)``), ``induced`` (hard heads induced from the inner encoder's distances,
            layer ``distance_layer``, directions merged by ``direction_combination``; ``induced_heads`` must be
            ``hard``) or ``none`` (no tree: every token is a leaf and a root, so ``h_j`` depends on ``x_j`` alone
            and the top-down pass is one LSTM step from zeros).
        encoder: builds an inner encoder from ``input_size``, run first over ``x``; the Tree-LSTM reads its states.
            Default: a bidirectional ON-LSTM (hidden 256, chunk 8) for ``induced``, none (the Tree-LSTM reads ``x``)
            for ``gold`` and ``none``. ``induced`` needs an inner encoder that returns distances (an ON-LSTM).
        top_down: add the top-down pass and output ``[h ; h']``.
        distance_layer, direction_combination: deprecated (the TreeSource fields as separate arguments, as in
            configs and checkpoints written before it was passed whole); ``None`` is absent.

    Output: ``hidden`` ``[B, T, output_size]``, zero at padding; ``layers`` the inner encoder's layers followed by
    ``hidden``; ``distances``/``input_distances`` the inner encoder's (``None`` without one); ``heads`` the tree
    used, ``(LongTensor [B, T],)``, or ``None`` for ``tree_source: none``. Soft (``[B, T, T]``) heads are rejected:
    a Tree-LSTM needs a discrete tree.
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int = 256,
        tree_source: TreeSource | str = "gold",
        encoder: EncoderFactory | None = None,
        top_down: bool = True,
        distance_layer: int | None = None,
        direction_combination: str | None = None,
    ) -> None:
        super().__init__()
        if input_size <= 0 or hidden_size <= 0:
            raise ValueError(f"input_size and hidden_size must be positive, got {input_size} and {hidden_size}")
        self.tree_source = TreeSource.coerce(tree_source, type(self).__name__, distance_layer=distance_layer,
                                             direction_combination=direction_combination)
        if self.tree_source.induced_heads != "hard":
            raise ValueError("ChildSumTreeLSTM needs a discrete tree: tree_source.induced_heads must be 'hard', got "
                             f"{self.tree_source.induced_heads!r}")
        if encoder is None and self.tree_source.kind == "induced":
            encoder = default_encoder(**TAGGER)
        self.encoder = encoder(input_size) if encoder is not None else None
        if self.encoder is not None and self.encoder.input_size != input_size:
            raise ValueError(f"the encoder factory built input_size={self.encoder.input_size} for inputs of size "
                             f"{input_size}")
        tree_input = self.encoder.output_size if self.encoder is not None else input_size
        self.bottom_up = ChildSumBottomUp(tree_input, hidden_size)
        self.top_down = TopDown(hidden_size) if top_down else None
        self.input_size, self.hidden_size = input_size, hidden_size
        self.output_size = hidden_size * (2 if top_down else 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                heads: torch.Tensor | None = None) -> EncoderOutput:
        mask = self.check_inputs(x, mask)
        if self.tree_source.kind == "gold" and heads is not None and heads.dim() == 3:
            raise ValueError("ChildSumTreeLSTM needs a discrete tree (hard heads, LongTensor [B, T]), got soft head "
                             f"weights of shape {tuple(heads.shape)}")
        inner = encode(self.encoder, x, mask, heads) if self.encoder is not None else None
        tree = self.tree_source.tree(mask, gold=heads, encoded=inner, encoder=self.encoder)
        if tree is not None and (tree.dim() != 2 or tree.dtype != torch.long):
            raise ValueError(f"ChildSumTreeLSTM needs a discrete tree (hard heads [B, T]), got {tuple(tree.shape)}")
        pos = torch.arange(x.size(1), device=x.device).expand(mask.shape)
        hard = tree if tree is not None else pos  # no tree: every token its own root
        height, depth = tree_levels(hard, mask)
        # padded positions belong to no tree level; zeroed so that even NaN there cannot reach a gradient
        states = (inner.hidden if inner is not None else x).masked_fill(~mask[..., None], 0.0)
        h, _ = self.bottom_up(states, hard, mask, height)
        if self.top_down is not None:
            h = torch.cat((h, self.top_down(h, hard, depth)), dim=-1)
        gives_distances = isinstance(inner, HasDistances)
        return encoder_output(
            h, (*(inner.layers if inner is not None else ()), h),
            distances=inner.distances if gives_distances else None,
            input_distances=inner.input_distances if gives_distances else None,
            heads=None if tree is None else (tree,),
        )


def reference_tree_lstm(model: ChildSumTreeLSTM, states: torch.Tensor, heads: list[int]) -> torch.Tensor:
    """The oracle: one sentence, plain recursion over the equations of the module docstring.

    ``states`` ``[n, D]`` is what the Tree-LSTM reads (``x``, or the inner encoder's hidden states); ``heads`` is
    0-based, a root pointing to itself. Returns ``[n, output_size]``.
    """
    n, H = len(heads), model.hidden_size
    W_i, W_f, W_o, W_u = model.bottom_up.input_proj.weight.chunk(4)
    b_i, b_f, b_o, b_u = model.bottom_up.input_proj.bias.chunk(4)
    U_i, U_o, U_u = model.bottom_up.child_proj.weight.chunk(3)
    U_f = model.bottom_up.forget_proj.weight
    children = [[k for k in range(n) if heads[k] == j and k != j] for j in range(n)]
    up: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def visit(j: int) -> tuple[torch.Tensor, torch.Tensor]:
        kids = [visit(k) for k in children[j]]
        x = states[j]
        h_tilde = sum((h for h, _ in kids), states.new_zeros(H))
        i = torch.sigmoid(W_i @ x + U_i @ h_tilde + b_i)
        o = torch.sigmoid(W_o @ x + U_o @ h_tilde + b_o)
        u = torch.tanh(W_u @ x + U_u @ h_tilde + b_u)
        c = i * u
        for h_k, c_k in kids:
            c = c + torch.sigmoid(W_f @ x + U_f @ h_k + b_f) * c_k
        up[j] = (o * torch.tanh(c), c)
        return up[j]

    roots = [j for j in range(n) if heads[j] == j]
    for r in roots:
        visit(r)
    if model.top_down is None:
        return torch.stack([up[j][0] for j in range(n)])
    cell = model.top_down.cell
    Wi, Wf, Wg, Wo = cell.weight_ih.chunk(4)  # nn.LSTMCell's gate order: i, f, g (= u), o
    Ui, Uf, Ug, Uo = cell.weight_hh.chunk(4)
    bias = cell.bias_ih + cell.bias_hh
    bi, bf, bg, bo = bias.chunk(4)
    down: dict[int, torch.Tensor] = {}

    def descend(j: int, h_p: torch.Tensor, c_p: torch.Tensor) -> None:
        x = up[j][0]
        i = torch.sigmoid(Wi @ x + Ui @ h_p + bi)
        f = torch.sigmoid(Wf @ x + Uf @ h_p + bf)
        o = torch.sigmoid(Wo @ x + Uo @ h_p + bo)
        u = torch.tanh(Wg @ x + Ug @ h_p + bg)
        c = i * u + f * c_p
        down[j] = o * torch.tanh(c)
        for k in children[j]:
            descend(k, down[j], c)

    for r in roots:
        descend(r, states.new_zeros(H), states.new_zeros(H))
    return torch.stack([torch.cat((up[j][0], down[j])) for j in range(n)])
