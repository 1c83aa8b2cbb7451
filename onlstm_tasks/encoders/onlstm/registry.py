"""The registry of the ON-LSTM layer's back ends: one interface, the one table, chosen in one place (:func:`resolve`).
Nothing else in the package names a back end.

A back end is an object with

- ``name`` and ``why_not(x)``: whether it can run on ``x`` (None) or why not (a sentence);
- ``forward(layer: LayerInputs, save) -> (hidden, forget distances, input distances, c_last, saved)``, ``saved``
  an instance of its own ``Saved`` named tuple (the tensors its backward reads besides the layer's inputs and
  outputs) or None;
- ``backward(layer: LayerInputs, hidden, saved, grads: OutputGrads) -> (dx, dW_ih, dbias, dW_hh)``;
- ``saved_shapes(x, weight_hh)``: the shapes of its ``Saved`` tensors (the operator's fake implementation).

The back ends:

- ``"compiled"``: the C++ kernels of ``onlstm_tasks/native/csrc/onlstm_cpu.cpp`` (float32 on the CPU), rows sorted by
  length (:mod:`.backends.loop`, its compiled steps);
- ``"torch"``: the same loop in PyTorch operations, any device and dtype (:mod:`.backends.loop`, its PyTorch steps);
- ``"triton"``: the time loop in Triton kernels that split each step over many programs, forward and backward,
  no host read (:mod:`.backends.triton`; CUDA, or CPU tensors under Triton's interpreter).

A new back end: docs/guide.md, "Adding a back end".

``"auto"`` takes ``triton`` on a CUDA device with Triton (every hidden size), ``compiled`` where the C++ kernels
run, ``torch`` elsewhere.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from torch import Tensor

from .backends.loop.backend import LoopBackend
from .backends.loop.steps_compiled import CompiledSteps
from .backends.loop.steps_torch import TorchSteps
from .backends.triton.launcher import TritonBackend


class LayerInputs(NamedTuple):
    """The operator's tensor inputs: ``x`` [B, T, D], ``lengths`` [B], ``weight_ih`` [K, G, D], ``bias`` [K, G]
    (both biases summed), ``weight_hh`` [K, G, H], the initial state ``h0, c0`` [K, B, H] (None: zeros), and the
    master input variant."""

    x: Tensor
    lengths: Tensor
    weight_ih: Tensor
    bias: Optional[Tensor]
    weight_hh: Tensor
    h0: Optional[Tensor]
    c0: Optional[Tensor]
    symmetric: bool


class OutputGrads(NamedTuple):
    """The gradients of the operator's outputs, None where no gradient flows."""

    hidden: Optional[Tensor]
    forget: Optional[Tensor]
    input: Optional[Tensor]
    c_last: Optional[Tensor]


BACKENDS = {backend.name: backend
            for backend in (LoopBackend(CompiledSteps()), LoopBackend(TorchSteps()), TritonBackend())}
NAMES = ("auto", *BACKENDS)
# the order ``auto`` tries, by device type (others: the CPU's order)
AUTO_ORDER = {"cuda": ("triton", "compiled", "torch"), "cpu": ("compiled", "torch")}
# back ends that keep the compiled CPU kernels out of everything around the layer (DropConnect's masks)
PLAIN_TORCH = frozenset({"torch"})


def resolve(name: str, x: Tensor, hidden: int = 0):
    """The back end called ``name`` (one of :data:`NAMES`) for a layer of ``hidden`` units over ``x``; a back end
    asked for where it cannot run is a ValueError that says why."""
    check_name(name)
    if name == "auto":
        order = AUTO_ORDER.get(x.device.type, AUTO_ORDER["cpu"])
        return next(BACKENDS[n] for n in order if BACKENDS[n].why_not(x) is None)
    reason = BACKENDS[name].why_not(x)
    if reason is not None:
        raise ValueError(f"backend {name!r} cannot run here: {reason}; use backend 'auto' or 'torch'")
    return BACKENDS[name]


def check_name(name: str) -> None:
    """A ValueError naming the choices where ``name`` is not one of :data:`NAMES`."""
    if name not in NAMES:
        raise ValueError(f"backend must be one of {', '.join(NAMES)}; got {name!r}")


def allows_native_ops(name: str) -> bool:
    """Whether the layers around a back end called ``name`` may use the compiled CPU kernels (DropConnect's masks):
    every back end but the plain PyTorch one, which a user asks for to run PyTorch operations only."""
    return name not in PLAIN_TORCH
