"""The batch layout that feeds the fast time loop (:mod:`.function`): sorted rows, time first, the right-to-left
direction reversed within each row's length, and the gathers that go there and back.

Reads only the cells' parameters (any object with the attributes of :class:`CellWeights`, in practice
:class:`~.cell.ONLSTMCell`), so that the cell module can build on it.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch.autograd.function import once_differentiable

from .function import LayerState, onlstm_layer, onlstm_layer_carry


class CellWeights(Protocol):
    """What the layer runners read of an ON-LSTM cell (see :class:`~.cell.ONLSTMCell` for the layout)."""

    weight_ih: torch.Tensor
    bias_ih: torch.Tensor
    bias_hh: torch.Tensor
    master_input: str


class BatchPlan:
    """How a padded batch is laid out for :func:`onlstm_layer`, worked out once per forward pass.

    Rows are sorted by length (longest first, so that step t runs on the first ``batch_sizes[t]`` rows), time
    comes first, and the right-to-left direction reads each row reversed within its length. ``mask`` is the
    [B, T] left-aligned padding mask, None when every row is full. The index maps are made for one direction or
    two, the first time they are asked for.
    """

    def __init__(self, mask: torch.Tensor | None, batch: int, steps: int, device: torch.device) -> None:
        self.batch, self.steps, self.device, self.full = batch, steps, device, mask is None
        if mask is None:
            self.batch_sizes = [batch] * steps
            self.order = torch.arange(batch, device=device)
            self.lengths = torch.full((batch,), steps, device=device)
        else:
            self.lengths = mask.sum(dim=1)
            counts = self.lengths.tolist()
            self.batch_sizes = [sum(n > step for n in counts) for step in range(steps)]
            self.order = torch.tensor(sorted(range(batch), key=lambda b: -counts[b]), device=device)
        self._maps: dict[int, tuple[torch.Tensor, ...]] = {}

    def maps(self, dirs: int) -> tuple[torch.Tensor, ...]:
        """(input, output, distance) row indices for ``dirs`` directions, each followed by its inverse(s). Those of
        full batches depend on the shape alone and are kept across forward passes (:data:`_FULL_MAPS`)."""
        # tensors made under torch.inference_mode() cannot be saved for backward: the mode is part of the key
        inference = torch.is_inference_mode_enabled()
        full_key = (self.batch, self.steps, dirs, self.device, inference) if self.full else None
        if dirs not in self._maps and full_key in _FULL_MAPS:
            self._maps[dirs] = _FULL_MAPS[full_key]
        if dirs not in self._maps:
            batch, steps, order = self.batch, self.steps, self.order
            t = torch.arange(steps, device=self.device)[:, None]  # [T, 1]
            rank = torch.empty_like(order)
            rank[order] = torch.arange(batch, device=self.device)
            # source time of each step: the same, or reversed within the row's length (sorted rows for the
            # inputs, original rows for the outputs)
            sorted_len, lengths = self.lengths[order][None, :], self.lengths[None, :]
            times_in = [t.expand(steps, batch), torch.where(t < sorted_len, sorted_len - 1 - t, t)][:dirs]
            times_out = [t.expand(steps, batch), torch.where(t < lengths, lengths - 1 - t, t)][:dirs]
            # x.view(B * T, D) -> [K, T, B] (direction, step, sorted row)
            inputs = torch.stack(times_in) + (order * steps)[None, None, :]
            # h.view(K * T * B, H) -> [B, T, K] (original row, time, direction)
            outputs = torch.stack([(k * steps * batch + tk * batch + rank[None, :]).t()
                                   for k, tk in enumerate(times_out)], dim=-1)
            distances = outputs.permute(2, 0, 1)  # d.view(K * T * B) -> [K, B, T]
            self._maps[dirs] = (
                inputs.reshape(-1), _inverse(inputs.reshape(dirs, -1)),
                outputs.reshape(-1), _inverse(outputs.reshape(1, -1)),
                distances.reshape(-1), _inverse(distances.reshape(1, -1)),
            )
            if full_key is not None:
                if len(_FULL_MAPS) >= 64:  # a few shapes recur (fixed windows, padded buckets); forget the rest
                    _FULL_MAPS.clear()
                _FULL_MAPS[full_key] = self._maps[dirs]
        return self._maps[dirs]


# index maps of full batches by (batch, steps, dirs, device, inference mode): read-only tensors, shared by
# forward passes
_FULL_MAPS: dict[tuple, tuple[torch.Tensor, ...]] = {}


def _inverse(index: torch.Tensor) -> torch.Tensor:
    """Inverse permutations of the rows of ``index`` [K, N] (each a permutation of 0..N-1)."""
    inverse = torch.empty_like(index)
    inverse.scatter_(1, index, torch.arange(index.size(1), device=index.device).expand_as(index))
    return inverse


class _GatherRows(torch.autograd.Function):
    """``source.index_select(0, index)`` where ``index`` is K permutations of the source rows, one after the
    other: its backward gathers with the inverse permutations (far cheaper than the generic scatter-add)."""

    @staticmethod
    def forward(ctx, source, index, inverse):
        ctx.save_for_backward(inverse)
        return source.index_select(0, index)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (inverse,) = ctx.saved_tensors
        parts = grad.reshape(inverse.size(0), inverse.size(1), *grad.shape[1:])
        total = parts[0].index_select(0, inverse[0])
        for k in range(1, inverse.size(0)):
            total += parts[k].index_select(0, inverse[k])
        return total, None, None


def run_directions(
    cells: list[CellWeights], x: torch.Tensor, plan: BatchPlan, weights_hh: list[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Runs one layer from a zero state: ``cells[0]`` left to right and, if given, ``cells[1]`` right to left,
    side by side.

    x [B, T, D]; ``weights_hh`` the recurrent weight of each cell (DropConnect applied or not). Returns hidden
    states [B, T, H * len(cells)] (directions concatenated) and forget/input distances [len(cells), B, T], all zero
    at padded steps.
    """
    x_dirs = _layer_inputs(x, plan, len(cells))
    h, d_forget, d_input = onlstm_layer(x_dirs, *_layer_weights(cells, weights_hh), plan.batch_sizes,
                                        cells[0].master_input == "symmetric")
    return _layer_outputs(h, d_forget, d_input, plan)


def run_left_to_right(
    cell: CellWeights,
    x: torch.Tensor,
    plan: BatchPlan,
    weight_hh: torch.Tensor,
    state: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """:func:`run_directions` for one left-to-right cell on a full batch (``plan`` without a mask), starting from
    ``state`` and returning the final one: the windows of a contiguous stream (truncated back-propagation through
    time, see :func:`.function.onlstm_layer_carry`).

    ``state``: ``(h, c)``, each [B, H], a constant (no gradient flows into it); None for zeros. Returns hidden
    states [B, T, H], forget/input distances [1, B, T] and the final ``(h, c)``, each [B, H].
    """
    if plan.batch_sizes != [plan.batch] * plan.steps:
        raise ValueError("state carry needs a full batch: every row has all T steps")
    initial = None if state is None else LayerState(state[0][None], state[1][None])
    h, d_forget, d_input, final = onlstm_layer_carry(
        _layer_inputs(x, plan, 1), *_layer_weights([cell], [weight_hh]), cell.master_input == "symmetric", initial)
    return (*_layer_outputs(h, d_forget, d_input, plan), (final.h[0], final.c[0]))


def _layer_inputs(x: torch.Tensor, plan: BatchPlan, dirs: int) -> torch.Tensor:
    """x [B, T, D] laid out for :func:`onlstm_layer`: [dirs, T, B, D], rows sorted, right to left reversed. One
    direction over a full batch needs no sorting or reversing: a view (batch-major in memory, which the layer's
    outputs then follow; see :func:`_layer_outputs`)."""
    if plan.full and dirs == 1:
        return x.transpose(0, 1).unsqueeze(0)
    batch, steps, features = x.shape
    in_rows, in_inverse = plan.maps(dirs)[:2]
    flat = _GatherRows.apply(x.reshape(batch * steps, features), in_rows, in_inverse)
    return flat.view(dirs, steps, batch, features)


def _layer_weights(
    cells: list[CellWeights], weights_hh: list[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The cells' ``weight_ih`` [K, G, D], summed biases [K, G] and recurrent weights [K, G, H], stacked."""
    if len(cells) == 1:  # no stack: a view costs nothing
        cell = cells[0]
        return cell.weight_ih[None], (cell.bias_ih + cell.bias_hh)[None], weights_hh[0][None]
    return (torch.stack([cell.weight_ih for cell in cells]),
            torch.stack([cell.bias_ih + cell.bias_hh for cell in cells]),
            torch.stack(weights_hh))


def _layer_outputs(
    h: torch.Tensor, d_forget: torch.Tensor, d_input: torch.Tensor, plan: BatchPlan
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`onlstm_layer`'s outputs back in the batch's layout: h [B, T, H * K], distances [K, B, T]. One
    direction over a full batch: h is a view (the layer lays it out batch-major when its inputs are, as
    :func:`_layer_inputs` makes them), or a copy when it has a gradient (the layer saves h for its backward, and
    a caller may change the result in place), the distances transposed copies."""
    dirs, batch, steps = h.size(0), plan.batch, plan.steps
    if plan.full and dirs == 1:
        h = h.squeeze(0).transpose(0, 1)  # not h[0]: its backward would zero-fill a [1, T, B, H] gradient
        h = h.clone(memory_format=torch.contiguous_format) if h.requires_grad else h.contiguous()
        return h, d_forget.transpose(1, 2).contiguous(), d_input.transpose(1, 2).contiguous()
    _, _, out_rows, out_inverse, dist_rows, dist_inverse = plan.maps(dirs)
    h = _GatherRows.apply(h.reshape(-1, h.size(-1)), out_rows, out_inverse).view(batch, steps, dirs * h.size(-1))
    d_forget = _GatherRows.apply(d_forget.reshape(-1), dist_rows, dist_inverse).view(dirs, batch, steps)
    d_input = _GatherRows.apply(d_input.reshape(-1), dist_rows, dist_inverse).view(dirs, batch, steps)
    return h, d_forget, d_input
