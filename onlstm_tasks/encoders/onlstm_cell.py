"""Parameters of one ON-LSTM direction, and the batch layout that feeds the fast time loop (:mod:`.onlstm_function`)."""

from __future__ import annotations

import torch
from torch import nn
from torch.autograd.function import once_differentiable

from .gates import MASTER_INPUT_VARIANTS
from .onlstm_function import onlstm_layer


class ONLSTMCell(nn.Module):
    """One direction of one ON-LSTM layer.

    Parameters (the layout of the authors' ``ON_LSTM.py``; ``L = hidden_size / chunk_size`` levels, ``G = 4H + 2L``):
    ``weight_ih`` [G, input_size], ``bias_ih`` [G], ``weight_hh`` [G, H], ``bias_hh`` [G], rows ordered

        [ master input (L) | master forget (L) | output (H) | cell (H) | input (H) | forget (H) ]

    where the four H-blocks are level-major: neuron ``k * chunk_size + j`` belongs to level ``k``.
    """

    def __init__(self, input_size: int, hidden_size: int, chunk_size: int, master_input: str = "paper") -> None:
        super().__init__()
        if chunk_size <= 0 or hidden_size <= 0 or hidden_size % chunk_size:
            raise ValueError(
                f"hidden_size must be a positive multiple of chunk_size, got hidden_size={hidden_size}, "
                f"chunk_size={chunk_size}"
            )
        if master_input not in MASTER_INPUT_VARIANTS:
            raise ValueError(f"master_input must be one of {MASTER_INPUT_VARIANTS}, got {master_input!r}")
        self.input_size, self.hidden_size, self.chunk_size = input_size, hidden_size, chunk_size
        self.levels = hidden_size // chunk_size
        self.master_input = master_input
        gates = 4 * hidden_size + 2 * self.levels
        self.weight_ih = nn.Parameter(torch.empty(gates, input_size))
        self.bias_ih = nn.Parameter(torch.empty(gates))
        self.weight_hh = nn.Parameter(torch.empty(gates, hidden_size))
        self.bias_hh = nn.Parameter(torch.empty(gates))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = self.hidden_size**-0.5  # as nn.LSTM
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def run(
        self, x: torch.Tensor, mask: torch.Tensor | None, weight_hh: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Runs left to right over x [B, T, D] from a zero state.

        ``mask`` [B, T] bool, left-aligned (None when every row is full): a row's steps end at its length.
        Returns hidden states [B, T, H] and forget/input distances [B, T], all zero at padded steps.
        Differentiable in ``x``, the parameters and ``weight_hh`` (passed in so DropConnect can replace it).
        """
        plan = BatchPlan(mask, x.size(0), x.size(1), x.device)
        h, d_forget, d_input = run_directions([self], x, plan, [weight_hh])
        return h, d_forget[0], d_input[0]


class BatchPlan:
    """How a padded batch is laid out for :func:`onlstm_layer`, worked out once per forward pass.

    Rows are sorted by length (longest first, so that step t runs on the first ``batch_sizes[t]`` rows), time
    comes first, and the right-to-left direction reads each row reversed within its length. ``mask`` is the
    [B, T] left-aligned padding mask, None when every row is full. The index maps are made for one direction or
    two, the first time they are asked for.
    """

    def __init__(self, mask: torch.Tensor | None, batch: int, steps: int, device: torch.device) -> None:
        self.batch, self.steps, self.device = batch, steps, device
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
        """(input, output, distance) row indices for ``dirs`` directions, each followed by its inverse(s)."""
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
        return self._maps[dirs]


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
    cells: list[ONLSTMCell], x: torch.Tensor, plan: BatchPlan, weights_hh: list[torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Runs one layer: ``cells[0]`` left to right and, if given, ``cells[1]`` right to left, side by side.

    x [B, T, D]; ``weights_hh`` the recurrent weight of each cell (DropConnect applied or not). Returns hidden
    states [B, T, H * len(cells)] (directions concatenated) and forget/input distances [len(cells), B, T], all zero
    at padded steps.
    """
    dirs, (batch, steps, _) = len(cells), x.shape
    symmetric = cells[0].master_input == "symmetric"
    in_rows, in_inverse, out_rows, out_inverse, dist_rows, dist_inverse = plan.maps(dirs)
    x_dirs = _GatherRows.apply(x.reshape(batch * steps, x.size(-1)), in_rows, in_inverse).view(
        dirs, steps, batch, x.size(-1))
    if dirs == 1:
        cell = cells[0]
        weight_ih, bias = cell.weight_ih[None], (cell.bias_ih + cell.bias_hh)[None]
        weight_hh = weights_hh[0][None]
    else:
        weight_ih = torch.stack([cell.weight_ih for cell in cells])
        bias = torch.stack([cell.bias_ih + cell.bias_hh for cell in cells])
        weight_hh = torch.stack(weights_hh)
    h, d_forget, d_input = onlstm_layer(x_dirs, weight_ih, bias, weight_hh, plan.batch_sizes, symmetric)
    h = _GatherRows.apply(h.reshape(-1, h.size(-1)), out_rows, out_inverse).view(batch, steps, dirs * h.size(-1))
    d_forget = _GatherRows.apply(d_forget.reshape(-1), dist_rows, dist_inverse).view(dirs, batch, steps)
    d_input = _GatherRows.apply(d_input.reshape(-1), dist_rows, dist_inverse).view(dirs, batch, steps)
    return h, d_forget, d_input
