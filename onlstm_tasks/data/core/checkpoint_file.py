"""``read_checkpoint_file``: the one checking reader of checkpoint files (the CLI's ``--ckpt_path``, the data
modules' ``vocab_from``, loading task models for probes). No Lightning.

A file that is not a checkpoint (missing, empty, truncated, random bytes, a pickle of something else) is refused
with :class:`~onlstm_tasks.errors.CheckpointError` ``not a checkpoint: <path> (<reason>)``; so are weights that
hold NaN or infinity (named by their parameter). The advice torch gives on a failed safe load (retry with
``weights_only=False``, which can run code from the file) is never passed on.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import torch

from onlstm_tasks.errors import CheckpointError

# (resolved path, size, mtime) of files whose weights were already checked: a run reads its checkpoint up to three
# times (the CLI's hyper-parameters, the data module's vocabularies, Lightning's restore)
_checked: set[tuple[str, int, int]] = set()


# why a file torch cannot load is refused, in plain words (the loader's own reason, e.g. "Unsupported operand 39",
# says nothing to a user; --debug shows it in the traceback)
UNREADABLE = ("its bytes are not a file saved by torch.save: damaged, cut short, or another kind of file; give a "
              ".ckpt that onlstm-tasks fit wrote")


def not_a_checkpoint(path: str | os.PathLike, reason: str) -> CheckpointError:
    return CheckpointError(f"not a checkpoint: {path} ({reason})")


def read_checkpoint_file(path: str | os.PathLike, weights_only: bool = True) -> dict[str, Any]:
    """The checkpoint at ``path`` as a dict on the CPU, after checking that it is one and that its weights are
    finite. ``weights_only=False`` unpickles arbitrary objects (it can run code): only for your own files."""
    file = Path(path)
    if not file.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    stat = file.stat()
    if stat.st_size == 0:
        raise not_a_checkpoint(path, "empty file")
    try:
        checkpoint = torch.load(str(file), map_location="cpu", weights_only=weights_only)
    except pickle.UnpicklingError as err:
        message = str(err)
        if "Unsupported global" in message or "WeightsUnpickler error: Unsupported" in message:
            raise CheckpointError(
                f"{path}: the checkpoint holds Python objects beyond plain values (e.g. factories in its "
                "hyper-parameters); load it with trust=True (--trust-checkpoint) only if you made it yourself"
            ) from None
        raise not_a_checkpoint(path, UNREADABLE) from err
    except Exception as err:  # noqa: BLE001 - whatever a loader trips on in a file that is not a checkpoint
        raise not_a_checkpoint(path, UNREADABLE) from err
    if not isinstance(checkpoint, dict):
        raise not_a_checkpoint(path, f"it holds a {type(checkpoint).__name__}, not a dict of weights")
    state = checkpoint.get("state_dict")
    if not isinstance(state, dict):
        raise not_a_checkpoint(path, f"no 'state_dict' among its keys {sorted(map(str, checkpoint))[:8]}: not a "
                                     "Lightning checkpoint")
    key = (str(file.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _checked:
        check_finite(path, state)
        _checked.add(key)
    return checkpoint


def check_finite(path: str | os.PathLike, state: dict[str, Any]) -> None:
    """Refuses a state dict with NaN or infinite values, naming the first such parameter and how many there are."""
    bad = [name for name, value in state.items()
           if isinstance(value, torch.Tensor) and value.is_floating_point() and not torch.isfinite(value).all()]
    if bad:
        first = state[bad[0]]
        n_bad = int((~torch.isfinite(first)).sum())
        more = f" and {len(bad) - 1} more parameter(s)" if len(bad) > 1 else ""
        raise CheckpointError(f"{path}: parameter {bad[0]} holds {n_bad} NaN/inf value(s){more}: the weights are "
                              "broken (training diverged?); use an earlier checkpoint")
