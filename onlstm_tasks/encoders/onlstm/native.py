"""The compiled CPU kernels of the ON-LSTM layer (``csrc/onlstm_cpu.cpp``), when they were built.

``pip install --no-build-isolation`` compiles them as a PyTorch C++ extension (setup.py; optional, so an install never
fails for want of a compiler, and one without torch at build time simply skips them). They register private
operators (``torch.ops.onlstm_tasks.cpu_*``) that this module loads with :func:`torch.ops.load_library` the first time
they are asked for: the whole time loop of a layer, forward and backward, recurrent products included (ATen's
``addmm_``), on ATen's threads; and DropConnect's random words and masking (:mod:`.dropconnect`). Without them every
path runs PyTorch operations (:mod:`.steps_torch`), with the same results.
"""

from __future__ import annotations

import glob
import os

import torch

_DIR = os.path.dirname(os.path.abspath(__file__))
_state: dict[str, object] = {}


def built_library() -> str | None:
    """The path of the built extension next to this module, or None when it was not built."""
    found = sorted(glob.glob(os.path.join(_DIR, "_onlstm_cpu*.so")) + glob.glob(os.path.join(_DIR, "_onlstm_cpu*.pyd")))
    return found[0] if found else None


def available() -> bool:
    """Whether the compiled kernels are loaded (loading them on the first call). A library that fails to load (built
    against another PyTorch: rerun the install) counts as absent, and the reason is kept for :func:`why_not`."""
    if "loaded" not in _state:
        path = built_library()
        if path is None:
            _state["loaded"], _state["why"] = False, "the compiled CPU loop was not built (see README: Install)"
        else:
            try:
                torch.ops.load_library(path)
                _state["loaded"] = True
            except (OSError, RuntimeError) as error:
                _state["loaded"], _state["why"] = False, f"{os.path.basename(path)} does not load ({error}); " \
                                                          "rerun the install"
    return bool(_state["loaded"])


def why_not(tensor: torch.Tensor) -> str | None:
    """None when the compiled loop can run on ``tensor``'s dtype and device, else the reason in words."""
    if tensor.device.type != "cpu" or tensor.dtype != torch.float32:
        return f"the compiled loop runs float32 CPU tensors, got {tensor.dtype} on {tensor.device.type}"
    if not available():
        return str(_state["why"])
    return None


def usable(tensor: torch.Tensor) -> bool:
    """Whether the compiled kernels can run on ``tensor`` (float32, CPU, built)."""
    return why_not(tensor) is None


def forward_loop(*args) -> None:
    """Every step of a layer's forward (see ``cpu_forward_loop`` in ``csrc/onlstm_cpu.cpp``)."""
    torch.ops.onlstm_tasks.cpu_forward_loop(*args)


def backward_loop(*args) -> None:
    """Every step of a layer's backward (see ``cpu_backward_loop`` in ``csrc/onlstm_cpu.cpp``)."""
    torch.ops.onlstm_tasks.cpu_backward_loop(*args)


WIDE = 1024  # products at least this wide go through cpu_product (see product)


def product(out: torch.Tensor, a: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor | None = None,
            transpose: bool = False) -> torch.Tensor:
    """``out[k] += a[k] @ weight[k]`` (``weight[k].T``, columns scaled by ``scale``, with ``transpose``) through the
    compiled product, on weights packed once (see ``cpu_product`` in ``csrc/onlstm_cpu.cpp``); returns ``out``.
    The layer's input projection and, where the output is at least :data:`WIDE` wide, its gradients' large
    products use it: ``python scripts/benchmark_encoders.py --lm`` times the language model's layers, where
    MKL's ``bmm`` took longer."""
    torch.ops.onlstm_tasks.cpu_product(out, a, weight.contiguous(), scale, transpose)
    return out


STREAMS = 16  # xoshiro128++ generators side by side (STREAMS in csrc/onlstm_cpu.cpp)


def random_words(words: int, state: torch.Tensor) -> torch.Tensor:
    """``words`` random int32 words from the compiled xoshiro128++ generators, whose ``state`` (int32 [64]) is
    advanced in place."""
    return torch.ops.onlstm_tasks.cpu_random_words(words, state)


def masked(values: torch.Tensor, lanes: torch.Tensor, threshold: int, scale: float) -> torch.Tensor:
    """A new tensor: ``values`` with the entries whose ``lanes`` (int16, low 15 bits) are below ``threshold`` times
    ``scale``, the others zero, in one pass (float32 CPU values)."""
    return torch.ops.onlstm_tasks.cpu_dropconnect(values, lanes, threshold, scale)
