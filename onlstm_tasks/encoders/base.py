"""The sequence-encoder contract every encoder implements.

``forward(x [B,T,D] float, mask [B,T] bool) -> EncoderOutput``. Padded positions never influence real ones (in
either direction) and every output at a padded position is zero. Masks are left-aligned: each row is a run of
Trues followed by Falses, with at least one True.

Encoders that can read a dependency tree subclass :class:`TreeEncoder`, whose forward takes the batch's gold
heads as well: ``forward(x, mask, heads=None)``. Callers holding gold heads use :func:`encode`, which passes them
to tree encoders only, so every other encoder keeps the two-argument forward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from onlstm_tasks.trees.source import DIRECTION_COMBINATIONS, DISTANCE_GATES


@dataclass(kw_only=True)
class EncoderOutput:
    """What every encoder returns.

    hidden:  [B, T, H * directions], the last layer's states (zero at padding).
    layers:  every layer's states, each [B, T, H * directions] (before any inter-layer dropout).

    What only some encoders give is a capability of a subclass, asked for with ``isinstance``, never a field that
    may be ``None``: :class:`RecurrentOutput` (``state``), :class:`ONLSTMOutput` (syntactic distances; the
    capability :class:`~onlstm_tasks.trees.source.HasDistances`) and :class:`TreeOutput` (the trees a
    :class:`TreeEncoder` used); :func:`encoder_output` picks the class that holds exactly what an encoder gives.
    """

    hidden: torch.Tensor
    layers: tuple[torch.Tensor, ...]


@dataclass(kw_only=True)
class RecurrentOutput(EncoderOutput):
    """The output of a :class:`StatefulEncoder`. ``state``: the final recurrent state (left to right, full batch),
    to be passed, detached (:func:`detach_state`), as the next window's ``state``; ``None`` where the pass has no
    state to hand on (:meth:`StatefulEncoder.carries_state`)."""

    state: object | None = None


@dataclass(kw_only=True)
class ONLSTMOutput(RecurrentOutput):
    """An ON-LSTM's output: the states, and the master gates' syntactic distances (:class:`HasDistances`).

    distances:        master-forget distances ``1 - mean(f~_t)``, [layers, directions, B, T].
    input_distances:  master-input distances ``mean(i~_t)``, same shape.

    For a bidirectional ON-LSTM, direction 0 is the forward pass and direction 1 the backward pass; both are
    indexed by token position (the backward pass's value at position t was computed when it read token t).
    :meth:`combined_distances` merges them, aligned on the boundary each value marks (:func:`combine_directions`).
    """

    distances: torch.Tensor
    input_distances: torch.Tensor

    def combined_distances(self, how: str = "mean", which: str = "forget") -> torch.Tensor:
        """Distances merged over directions, [layers, B, T].

        ``how``: ``mean`` (default: average of both directions), ``forward`` / ``backward`` (one direction
        only), ``max`` or ``min`` (elementwise). ``which``: ``forget`` (master forget gate) or ``input``.
        """
        if which not in DISTANCE_GATES:
            raise ValueError(f"which must be one of {DISTANCE_GATES}, got {which!r}")
        return combine_directions(self.distances if which == "forget" else self.input_distances, how, dim=1)


@dataclass(kw_only=True)
class TreeOutput(EncoderOutput):
    """The output of a :class:`TreeEncoder` that used trees. ``heads``: one tree per interaction layer (hard or gold
    heads ``[B, T]`` long, or soft head weights ``[B, T, T]``)."""

    heads: tuple[torch.Tensor, ...]


@dataclass(kw_only=True)
class TreeONLSTMOutput(TreeOutput, ONLSTMOutput):
    """A tree encoder's output over ON-LSTM states: its trees and the ON-LSTM's distances."""


_OUTPUT_CLASSES = {(False, False): EncoderOutput, (True, False): ONLSTMOutput, (False, True): TreeOutput,
                   (True, True): TreeONLSTMOutput}


def encoder_output(hidden: torch.Tensor, layers: tuple[torch.Tensor, ...], *, distances: torch.Tensor | None = None,
                   input_distances: torch.Tensor | None = None,
                   heads: tuple[torch.Tensor, ...] | None = None) -> EncoderOutput:
    """The output of a composite encoder (a stack or a pair of others): the class that holds exactly what is given,
    so that its consumers find a capability only where it is. Distances come both or neither."""
    if (distances is None) != (input_distances is None):
        raise ValueError("an encoder output has both master-gate distances or neither")
    has_distances, has_heads = distances is not None, heads is not None
    fields = {"hidden": hidden, "layers": layers}
    if has_distances:
        fields.update(distances=distances, input_distances=input_distances)
    if has_heads:
        fields["heads"] = heads
    return _OUTPUT_CLASSES[has_distances, has_heads](**fields)


def combine_directions(distances: torch.Tensor, how: str = "mean", dim: int = 1) -> torch.Tensor:
    """Merges the direction axis ``dim`` of a distance tensor whose last axis is time (e.g. [layers, directions,
    B, T] with ``dim=1``, or one sentence's [layers, directions, T]): ``mean``, ``forward``, ``backward``, ``max``
    or ``min`` (see :meth:`ONLSTMOutput.combined_distances`).

    Alignment: a large forward value at token t marks a boundary *before* t (the forward pass closes levels as t
    arrives), the convention of :mod:`onlstm_tasks.trees.induce`; a large backward value at token t marks a
    boundary *after* t (the backward pass reads t + 1 first). So the backward values are moved one token to the
    right (:func:`backward_as_boundaries`) before they are used alone or merged. Position 0 (the boundary before
    the sentence, which no split uses to separate two tokens) gets 0 from the backward pass. Values at padded
    positions are unspecified: readers take each row's real tokens only.
    """
    if how not in DIRECTION_COMBINATIONS:
        raise ValueError(f"how must be one of {DIRECTION_COMBINATIONS}, got {how!r}")
    if how == "forward":
        return distances.select(dim, 0)
    if distances.size(dim) < 2:
        if how == "backward":
            raise ValueError("how='backward' needs a bidirectional encoder")
        return distances.select(dim, 0)  # one direction: nothing to merge
    forward = distances.select(dim, 0)
    backward = backward_as_boundaries(distances.select(dim, 1))
    if how == "backward":
        return backward
    both = torch.stack((forward, backward), dim=dim)
    if how == "mean":
        return both.mean(dim=dim)
    return both.max(dim=dim).values if how == "max" else both.min(dim=dim).values


def backward_as_boundaries(backward: torch.Tensor) -> torch.Tensor:
    """Backward-pass distances [..., T] moved one token right, so that position t holds the value computed when
    the backward pass read token t - 1 (the boundary between t - 1 and t); position 0 gets 0."""
    return torch.cat((torch.zeros_like(backward[..., :1]), backward[..., :-1]), dim=-1)


def check_stack_sizes(input_size: int, hidden_size: int, num_layers: int) -> None:
    """The ValueErrors every stacked recurrent encoder raises for impossible sizes."""
    if input_size <= 0 or hidden_size <= 0:
        raise ValueError(f"input_size and hidden_size must be positive, got {input_size}, {hidden_size}")
    if num_layers < 1:
        raise ValueError(f"num_layers must be at least 1, got {num_layers}")


class SequenceEncoder(nn.Module):
    """Base class: subclasses set ``input_size`` and ``output_size`` and implement :meth:`forward`."""

    input_size: int
    output_size: int

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> EncoderOutput:  # pragma: no cover
        raise NotImplementedError

    def check_inputs(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """Validates ``x`` and ``mask`` and returns the mask (all True when ``mask`` is None)."""
        if x.dim() != 3:
            raise ValueError(f"x must be [batch, time, {self.input_size}], got a tensor of shape {tuple(x.shape)}")
        if x.size(-1) != self.input_size:
            raise ValueError(f"x must have input_size={self.input_size} features, got {x.size(-1)}")
        if mask is None:
            return torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
        check_mask(mask, x.shape[:2])
        return mask


EncoderFactory = Callable[[int], SequenceEncoder]
"""Builds an encoder from its input size: what every model takes as ``encoder`` (in YAML a ``class_path`` with
``init_args`` but no ``input_size``)."""


def check_mask(mask: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """Validates a padding mask of the contract (module docstring) for inputs whose first two axes are ``shape``
    ([B, T]) and returns its lengths [B]. The one mask check of encoders and the CRF: ValueError when the mask is
    not bool, has another shape, has a row with no true token, or is not left-aligned.

    The last two read the mask's values, so they are asked of the device without waiting for it
    (``torch._assert_async``): on the CPU they fail here, on a GPU as a device-side assertion once the device
    gets there. Under ``torch.compile`` they are left out (the graph stays whole)."""
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor, got dtype {mask.dtype}")
    if tuple(mask.shape) != tuple(shape):
        raise ValueError(f"mask must have shape {tuple(shape)}, got {tuple(mask.shape)}")
    lengths = mask.sum(dim=1)
    if torch.compiler.is_compiling():  # no data-dependent checks inside a compiled graph (eager mode checks them)
        return lengths
    empty = "a mask row has no true token; every sequence needs at least one"
    if not _assert_async((lengths > 0).all(), empty):
        row = int((lengths == 0).nonzero()[0])  # the error path alone reads values, to name the row
        raise ValueError(f"mask row {row} has no true token; every sequence needs at least one")
    if not _assert_async((mask == lengths_to_mask(lengths, mask.size(1))).all(),
                         "mask must be left-aligned: each row a run of True followed by False"):
        raise ValueError("mask must be left-aligned: each row a run of True followed by False")
    return lengths


def _assert_async(condition: torch.Tensor, message: str) -> bool:
    """``torch._assert_async``: False where it fails at once (a CPU tensor), True where it holds or is queued."""
    try:
        torch._assert_async(condition, message)
    except RuntimeError:
        return False
    return True


class TreeEncoder(SequenceEncoder):
    """An encoder that may read a dependency tree: ``forward(x, mask=None, heads=None)``.

    ``heads``: the batch's gold heads, ``LongTensor [B, T]``, 0-based, the root and padded positions pointing to
    themselves (:func:`onlstm_tasks.trees.heads.heads_to_tensor`), or ``None`` when the data has none. Whether
    they are needed is the encoder's business (it raises a clear error when it needs them and gets ``None``).
    """

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                heads: torch.Tensor | None = None) -> EncoderOutput:  # pragma: no cover
        raise NotImplementedError


class StatefulEncoder(SequenceEncoder):
    """A recurrent encoder that can start from a given state and return its final one: ``forward(x, mask=None,
    state=None) -> RecurrentOutput`` with ``.state`` the state after the last step.

    For truncated back-propagation through time: a language model cuts a contiguous token stream into windows and
    starts each window from the previous window's final state, detached (:func:`detach_state`), so that the
    recurrence runs on across windows while gradients stop at the window's start. ``state=None`` is the zero
    initial state, exactly the forward pass without a state. The state is an opaque object of the encoder's
    making, to be handed back unchanged (for ON-LSTM and LSTM a tuple with one ``(h, c)`` per layer, for GRU one
    ``(h,)`` per layer, each tensor [B, H]); a given state is a constant: no gradient flows into it.

    Only a left-to-right encoder on a full batch (mask None or all True: every row a window of T tokens) has a
    final state: the windows of a stream are full, and neither a right-to-left pass nor a row that ended early
    has a state to hand on to the next window. Otherwise ``.state`` is None, and passing a ``state`` raises a
    ValueError (:meth:`carries_state`).
    """

    bidirectional: bool

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                state: object | None = None) -> RecurrentOutput:  # pragma: no cover
        raise NotImplementedError

    def carries_state(self, full: bool, state: object | None) -> bool:
        """Whether this forward pass starts from ``state`` and returns its final state; ``full``: every row of the
        batch has all T tokens. Raises a ValueError for a ``state`` the encoder cannot start from."""
        if self.bidirectional:
            if state is not None:
                raise ValueError("state carry is for left-to-right encoders: this one is bidirectional (its "
                                 "right-to-left pass starts at the window's end, where no previous state exists)")
            return False
        if not full:
            if state is not None:
                raise ValueError("state carry needs a full batch (mask None or all True): the windows of a "
                                 "contiguous stream are full, and a row that ended early has no state to carry")
            return False
        return True


def check_layer_states(state: object, parts: tuple[str, ...], hidden_sizes: Sequence[int],
                       x: torch.Tensor) -> None:
    """Raises a clear ValueError unless ``state`` holds one tuple per layer of ``len(parts)`` tensors (named
    ``parts``, e.g. ``("h", "c")``) of shape [B, hidden_sizes[layer]], with ``x``'s batch size, dtype and device."""
    layers, batch = len(hidden_sizes), x.size(0)
    names = "(" + ", ".join(parts) + ")"
    if not isinstance(state, (tuple, list)) or len(state) != layers:
        got = f"{len(state)} entries" if isinstance(state, (tuple, list)) else type(state).__name__
        raise ValueError(f"state must be a tuple with one {names} per layer ({layers}), got {got}")
    for layer, (entry, size) in enumerate(zip(state, hidden_sizes)):
        if not isinstance(entry, (tuple, list)) or len(entry) != len(parts):
            raise ValueError(f"state[{layer}] must be a tuple {names} of tensors, got {type(entry).__name__}"
                             + (f" of {len(entry)}" if isinstance(entry, (tuple, list)) else ""))
        for name, t in zip(parts, entry):
            if not isinstance(t, torch.Tensor) or t.shape != (batch, size):
                shape = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(f"state[{layer}] {name} must have shape {(batch, size)} [batch, hidden], got {shape}")
            if t.dtype != x.dtype or t.device != x.device:
                raise ValueError(f"state[{layer}] {name} must have x's dtype and device ({x.dtype}, {x.device}), "
                                 f"got {t.dtype}, {t.device}")


def detach_state(state: object | None) -> object | None:
    """``state`` (tensors in nested tuples or lists, as :class:`StatefulEncoder` returns) with every tensor
    detached, so the next window's backward pass stops at its start; None for None."""
    if state is None:
        return None
    if isinstance(state, torch.Tensor):
        return state.detach()
    if isinstance(state, (tuple, list)):
        return tuple(detach_state(part) for part in state)
    raise TypeError(f"a state holds tensors in nested tuples, got {type(state).__name__}")


def encode(encoder: SequenceEncoder, x: torch.Tensor, mask: torch.Tensor | None,
           heads: torch.Tensor | None = None) -> EncoderOutput:
    """Runs any encoder, passing gold ``heads`` only to a :class:`TreeEncoder`."""
    if isinstance(encoder, TreeEncoder):
        return encoder(x, mask, heads=heads)
    return encoder(x, mask)


def lengths_to_mask(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """[B] lengths -> [B, max_len] bool prefix mask."""
    return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverses each sequence of ``x`` [B, T, ...] within its true length; padding stays in place."""
    t = torch.arange(x.size(1), device=x.device)[None, :]
    idx = torch.where(t < lengths[:, None], lengths[:, None] - 1 - t, t)  # [B, T]
    idx = idx.view(*idx.shape, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, idx)
