"""The batch layout of the layer operator's time loop (:mod:`onlstm_tasks.encoders.onlstm.layer_op`): sorted rows, time first, the right-to-left
direction reversed within each row's length, and the index maps that go there and back."""

from __future__ import annotations

import torch

from ...tuning import FULL_MAPS_KEPT


class BatchPlan:
    """How a padded batch is laid out for the layer's time loop, worked out once per layer call.

    Rows are sorted by length (longest first, so that step t runs on the first ``batch_sizes[t]`` rows), time
    comes first, and the right-to-left direction reads each row reversed within its length. ``lengths``: the true
    length of each row [B] (a tensor on the batch's device). The index maps are made for one direction or two, the
    first time they are asked for.
    """

    def __init__(self, lengths: torch.Tensor, batch: int, steps: int, device: torch.device) -> None:
        counts = lengths.tolist()  # one host read per layer call (the operator is opaque to torch.compile)
        self.batch, self.steps, self.device = batch, steps, device
        self.full = all(n == steps for n in counts)
        if self.full:
            self.batch_sizes = [batch] * steps
            self.order = torch.arange(batch, device=device)
            self.lengths = torch.full((batch,), steps, device=device)
        else:
            self.lengths = lengths.to(device)
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
                if len(_FULL_MAPS) >= FULL_MAPS_KEPT:  # a few shapes recur (fixed windows, padded buckets); forget the rest
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
