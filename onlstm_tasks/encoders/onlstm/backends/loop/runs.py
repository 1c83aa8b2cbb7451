"""Runs of steps: how a layer pass walks a padded, length-sorted batch, and the views its time loop reads.

The lowest module of the layer pass: :mod:`.layer_pass` (the pass) and the PyTorch steps
(:mod:`.steps_torch`) import it, and it imports neither. See "Padding"
in :mod:`.backend` for why a run of steps is computed on a fixed number of rows.
"""

from __future__ import annotations

from typing import Protocol

import torch

from ...tuning import SHRINK


class PassLayout(Protocol):
    """What a back end reads of the :class:`~.layer_pass.LayerPass` it runs steps for (the pass satisfies this)."""

    shape: tuple[int, int, int, int, int, int, int]  # dirs, steps, batch, gates, hidden, levels, chunk
    symmetric: bool  # the symmetric master input variant (False: the paper's 1 - cumax)
    save: bool  # whether the pass keeps what the backward reads, in ``saved``
    saved: tuple[torch.Tensor, ...]  # acts, masters, probs, cells, tanh_c, eff, omega
    cells: torch.Tensor  # the cell buffers (without ``save``: two scratch slots)
    segments: list[tuple[int, int, int]]  # the runs of steps, see step_runs
    rows_at: list[int]  # rows computed at each step
    stop: int  # steps with a running row




def step_runs(batch_sizes: list[int]) -> list[tuple[int, int, int]]:
    """Runs of steps ``(rows, start, stop)`` computed on the first ``rows`` rows (see "Padding" in
    :mod:`.backend`)."""
    segments: list[list[int]] = []
    for t, n in enumerate(batch_sizes):
        if n == 0:
            break
        if segments and n > SHRINK * segments[-1][0]:
            segments[-1][2] = t + 1
        else:
            segments.append([n, t, t + 1])
    return [(rows, start, stop) for rows, start, stop in segments]


def gather_runs(buf: torch.Tensor, runs, offset: int = 0) -> torch.Tensor:
    """The (step + offset, row) entries of buf [K, T, B, n] for every run's steps and rows, packed: [K, N, n]
    (a view when there is one run over every row; N = 0 for no runs, as when no step reads a previous one)."""
    blocks = [buf[:, start + offset : stop + offset, :rows].reshape(buf.size(0), -1, buf.size(-1))
              for rows, start, stop in runs]
    if not blocks:
        return buf.new_zeros(buf.size(0), 0, buf.size(-1))
    return blocks[0] if len(blocks) == 1 else torch.cat(blocks, 1)


def scatter_runs(packed: torch.Tensor, runs, out: torch.Tensor) -> torch.Tensor:
    """The inverse of :func:`gather_runs`: writes packed [K, N, n] into ``out`` [K, T, B, n] (elsewhere ``out``
    keeps what it held) and returns ``out``."""
    first = 0
    for rows, start, stop in runs:
        size = (stop - start) * rows
        out[:, start:stop, :rows] = packed[:, first : first + size].view(out.size(0), stop - start, rows, -1)
        first += size
    return out


def per_step(buf: torch.Tensor, segments, offset: int = 0, fn=None) -> list[torch.Tensor | None]:
    """For every step t the view ``buf[:, t + offset, :rows]`` of a [K, T, B, ...] buffer (``fn`` applied to each
    run's [K, steps, rows, ...] block first; None before the first step). Made in bulk: slicing in the loop
    costs more."""
    views: list[torch.Tensor | None] = []
    for rows, start, stop in segments:
        first = start + offset
        if first < 0:
            views.extend([None] * -first)
            first = 0
        block = buf[:, first : stop + offset, :rows]
        views.extend((block if fn is None else fn(block)).unbind(1))
    return views


def scratch_views(buf: torch.Tensor, segments) -> list[torch.Tensor]:
    """The same scratch buffer ``buf[:, :rows]`` (``buf`` [K, B, ...]) for every step."""
    views: list[torch.Tensor] = []
    for rows, start, stop in segments:
        views.extend([buf[:, :rows]] * (stop - start))
    return views


def alternating(buf: torch.Tensor, segments, offset: int = 0) -> list[torch.Tensor]:
    """``buf[(t + offset) % 2, :, :rows]`` for every step t: two scratch slots, one written while the other is read."""
    views: list[torch.Tensor] = []
    for rows, start, stop in segments:
        slots = buf[:, :, :rows].unbind(0)
        views.extend(slots[(t + offset) % 2] for t in range(start, stop))
    return views


def pair_first(block: torch.Tensor) -> torch.Tensor:
    """[K, steps, n, 2, ...] -> [K, steps, 2, n, ...] (a view): the input/forget pair before the rows."""
    return block.transpose(2, 3)
