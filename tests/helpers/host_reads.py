"""Counting host reads: the places where Python reads a tensor's values (``.item()``, ``bool(t)``, ``.tolist()``,
``int(t)``, a boolean-mask index, ``nonzero``, ...). On a GPU each one waits for every kernel queued before it; a
training step that makes none never stalls the device. :func:`count_host_reads` finds them on any device, the CPU
included, so tests and ``scripts/ops_per_step.py`` can hold the count at zero where no GPU is at hand.

Two nets, one count: a ``TorchDispatchMode`` sees the ATen operations that read values (``_local_scalar_dense``
behind ``item``/``bool``/``int``/``float``, and the operations whose output size depends on the values), and
``Tensor.tolist``/``Tensor.numpy`` are wrapped (they read memory without an ATen call). Inside an operator of this
package (``torch.ops.onlstm_tasks.*``, opaque to the mode) and inside the ON-LSTM layer's back ends (which eager mode
calls without the operator: ``encoders/onlstm/layer_op.py``) reads are counted apart, as ``inside_ops``: there the
CPU back ends plan their loops from the lengths, which is no wait on a CPU, while the CUDA back end reads nothing.
"""

from __future__ import annotations

import collections
import contextlib
import traceback
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# ATen operations that hand a tensor's values to the host, or whose output shape depends on them (a sync on CUDA)
READING_OPS = frozenset({
    "aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::_unique2", "aten::unique_dim",
    "aten::unique_consecutive", "aten::bincount", "aten::masked_scatter",
})
OWN_NAMESPACE = "onlstm_tasks"
BACKENDS_FOLDER = "/onlstm_tasks/encoders/onlstm/backends/"  # the ON-LSTM layer's back ends, inside the operator or not


@dataclass
class HostReads:
    total: int = 0
    inside_ops: int = 0
    where: collections.Counter = field(default_factory=collections.Counter)
    _depth: int = 0
    paused: bool = False  # set while reads are not to be counted (a CPU data loader's work, say)

    def record(self, what: str) -> None:
        if self.paused:
            return
        if self._depth or _inside_a_layer_backend():
            self.inside_ops += 1
            return
        self.total += 1
        self.where[f"{what} at {_caller()}"] += 1


def _inside_a_layer_backend() -> bool:
    return any(BACKENDS_FOLDER in frame.filename for frame in traceback.extract_stack())


def _caller() -> str:
    """The innermost frame of this package (or of the caller's code) outside this module and torch."""
    for frame in reversed(traceback.extract_stack()[:-3]):
        name = frame.filename
        if name.endswith("host_reads.py") or "/torch/" in name or "/lightning" in name:
            continue
        parts = name.split("/")
        short = "/".join(parts[parts.index("onlstm_tasks"):]) if "onlstm_tasks" in parts else "/".join(parts[-2:])
        return f"{short}:{frame.lineno}"
    return "?"


class _ReadingOps(TorchDispatchMode):
    def __init__(self, reads: HostReads):
        super().__init__()
        self.reads = reads

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.name()
        if name.startswith(OWN_NAMESPACE + "::"):
            self.reads._depth += 1
            try:
                return func(*args, **kwargs)
            finally:
                self.reads._depth -= 1
        base = name.split(".")[0]
        if base in READING_OPS or (base == "aten::repeat_interleave" and kwargs.get("output_size") is None
                                   and isinstance(args[0], torch.Tensor) and len(args) < 3):
            self.reads.record(base.removeprefix("aten::"))
        elif base in ("aten::index", "aten::index_put", "aten::index_put_") and _has_bool_index(args):
            self.reads.record("boolean-mask index")
        return func(*args, **kwargs)


def _has_bool_index(args) -> bool:
    indices = args[1] if len(args) > 1 else ()
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices or ())


@contextlib.contextmanager
def count_host_reads():
    """Counts host reads made inside the ``with`` block: ``with count_host_reads() as reads: ...; reads.total``."""
    reads = HostReads()
    originals = {name: getattr(torch.Tensor, name) for name in ("tolist", "numpy")}

    def wrap(name, original):
        def read(self, *args, **kwargs):
            reads.record(name)
            return original(self, *args, **kwargs)
        return read

    for name, original in originals.items():
        setattr(torch.Tensor, name, wrap(name, original))
    try:
        with _ReadingOps(reads):
            yield reads
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)
