"""The ON-LSTM layer's back ends behind one interface, chosen in one place (:func:`resolve`).

A back end is an object with

- ``name`` and ``why_not(x)``: whether it can run on ``x`` (None) or why not (a sentence);
- ``forward(layer: LayerInputs, save) -> (hidden, forget distances, input distances, c_last, saved)``, ``saved``
  an instance of its own ``Saved`` named tuple (the tensors its backward reads besides the layer's inputs and
  outputs) or None;
- ``backward(layer: LayerInputs, hidden, saved, grads: OutputGrads) -> (dx, dW_ih, dbias, dW_hh)``;
- ``saved_shapes(x, weight_hh)``: the shapes of its ``Saved`` tensors (the operator's fake implementation).

The back ends:

- ``"compiled"``: the C++ kernels of ``csrc/onlstm_cpu.cpp`` (float32 on the CPU), rows sorted by length
  (:mod:`.backend_loop`);
- ``"torch"``: the same loop in PyTorch operations, any device and dtype (:mod:`.backend_loop`);
- ``"triton"``: the time loop in Triton kernels that split each step over many programs, forward and backward,
  no host read (:mod:`.backend_triton`; CUDA, or CPU tensors under Triton's interpreter).

``"auto"`` takes ``triton`` on a CUDA device with Triton (every hidden size), ``compiled`` where the C++ kernels
run, ``torch`` elsewhere.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from torch import Tensor

from .backend_loop import LoopBackend
from .backend_triton import TritonBackend


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


BACKENDS = {backend.name: backend for backend in (LoopBackend("compiled"), LoopBackend("torch"), TritonBackend())}
NAMES = ("auto", *BACKENDS)


def resolve(name: str, x: Tensor, hidden: int = 0):
    """The back end called ``name`` (one of :data:`NAMES`) for a layer of ``hidden`` units over ``x``; a back end
    asked for where it cannot run is a ValueError that says why."""
    if name not in NAMES:
        raise ValueError(f"backend must be one of {', '.join(NAMES)}; got {name!r}")
    if name == "auto":
        order = ("triton", "compiled", "torch") if x.device.type == "cuda" else ("compiled", "torch")
        return next(BACKENDS[n] for n in order if BACKENDS[n].why_not(x) is None)
    reason = BACKENDS[name].why_not(x)
    if reason is not None:
        raise ValueError(f"backend {name!r} cannot run here: {reason}; use backend 'auto' or 'torch'")
    return BACKENDS[name]
