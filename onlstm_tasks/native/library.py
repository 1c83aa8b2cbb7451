"""Loading the compiled CPU kernels (``csrc/*.cpp``, one library), when they were built.

``pip install --no-build-isolation`` compiles them as one PyTorch C++ extension, ``_kernels`` beside this module
(setup.py; optional, so an install never fails for want of a compiler, and one without torch at build time simply
skips them). They register private operators (``torch.ops.onlstm_tasks.cpu_*``) that :func:`available` loads with
:func:`torch.ops.load_library` the first time they are asked for. Without them every caller runs PyTorch
operations, with the same results.
"""

from __future__ import annotations

import glob
import os

import torch

_DIR = os.path.dirname(os.path.abspath(__file__))
_state: dict[str, object] = {}


def built_library() -> str | None:
    """The path of the built extension next to this module, or None when it was not built."""
    found = sorted(glob.glob(os.path.join(_DIR, "_kernels*.so")) + glob.glob(os.path.join(_DIR, "_kernels*.pyd")))
    return found[0] if found else None


def available() -> bool:
    """Whether the compiled kernels are loaded (loading them on the first call). A library that fails to load (built
    against another PyTorch: rerun the install) counts as absent, and the reason is kept for :func:`why_not`."""
    if "loaded" not in _state:
        path = built_library()
        if path is None:
            _state["loaded"], _state["why"] = False, "the compiled CPU kernels were not built (see README: Install)"
        else:
            try:
                torch.ops.load_library(path)
                _state["loaded"] = True
            except (OSError, RuntimeError) as error:
                _state["loaded"], _state["why"] = False, f"{os.path.basename(path)} does not load ({error}); " \
                                                          "rerun the install"
    return bool(_state["loaded"])


def why_not(tensor: torch.Tensor) -> str | None:
    """None when the compiled kernels can run on ``tensor``'s dtype and device, else the reason in words."""
    if tensor.device.type != "cpu" or tensor.dtype != torch.float32:
        return f"the compiled kernels run float32 CPU tensors, got {tensor.dtype} on {tensor.device.type}"
    if not available():
        return str(_state["why"])
    return None


def usable(tensor: torch.Tensor) -> bool:
    """Whether the compiled kernels can run on ``tensor`` (float32, CPU, built)."""
    return why_not(tensor) is None
