"""Lightning moves a batch with one call of its ``to`` (:class:`onlstm_tasks.data.core.batching.DeviceBatch`): every
tensor, nested batches' included, on the device; the rest (words, indices, flags) shared, not rebuilt. Lightning's own
walk of a dataclass rebuilds every list in it, the words' lists of strings included (0.6-2.1 ms a batch of the
OntoNotes configs on a CPU, the mean over an epoch of the kit: ``python scripts/benchmark_batch_transfer.py``). The
device here is ``meta``, which every build has."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest
import torch
from lightning.fabric.utilities.apply_func import move_data_to_device

from onlstm_tasks.data.absa.module import AspectBatch
from onlstm_tasks.data.core.batching import DeviceBatch, TokenBatch
from onlstm_tasks.data.lm.module import LMBatch
from onlstm_tasks.data.ner.module import NERBatch
from helpers.shared_data import REPO_ROOT, SHARED_DATA, requires_shared_data

META = torch.device("meta")


def tokens(singletons: bool) -> TokenBatch:
    return TokenBatch(word_ids=torch.tensor([[3, 4, 0], [5, 0, 0]]), char_ids=torch.ones(2, 3, 2, dtype=torch.long),
                      mask=torch.tensor([[True, True, False], [True, False, False]]), words=[["a", "b"], ["c"]],
                      singletons=torch.zeros(2, 3, dtype=torch.bool) if singletons else None)


BATCHES = {
    "ner": NERBatch(tokens(True), tags=torch.ones(2, 3, dtype=torch.long), index=[7, 2]),
    "ner with heads": NERBatch(tokens(False), tags=torch.ones(2, 3, dtype=torch.long), index=[0, 1],
                               heads=torch.zeros(2, 3, dtype=torch.long)),
    "absa": AspectBatch(tokens(False), aspect_mask=torch.ones(2, 3, dtype=torch.bool), labels=torch.tensor([0, 2]),
                        index=[4, 5]),
    "lm": LMBatch(tokens(False), forward_targets=torch.ones(2, 3, dtype=torch.long), backward_targets=None,
                  index=[1], carry=True),
}


def leaves(value, path=""):
    """(path, value) of every field of a batch, nested batches opened."""
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            yield from leaves(getattr(value, f.name), f"{path}.{f.name}")
    else:
        yield path, value


@pytest.mark.parametrize("name", BATCHES)
def test_lightning_moves_every_tensor_and_shares_the_rest(name):
    batch = BATCHES[name]
    moved = move_data_to_device(batch, META)
    assert type(moved) is type(batch) and type(moved.tokens) is TokenBatch
    before, after = dict(leaves(batch)), dict(leaves(moved))
    assert before.keys() == after.keys()
    for path, value in before.items():
        if isinstance(value, torch.Tensor):
            assert after[path].device == META and after[path].shape == value.shape and after[path].dtype == value.dtype
            assert value.device.type == "cpu", f"{path}: the batch itself was changed"
        else:  # words, index, flags, None: the same objects (Lightning's walk would rebuild every list)
            assert after[path] is value, path


def test_to_takes_a_name_and_non_blocking():
    moved = BATCHES["ner"].to("meta", non_blocking=True)
    assert moved.tags.device == META and moved.tokens.mask.device == META


def test_every_batch_class_moves_whole():
    """A batch class (or a dataclass nested in one) without ``to`` would send Lightning back to its walk."""
    for batch in BATCHES.values():
        for f in dataclasses.fields(batch):
            assert isinstance(batch, DeviceBatch)
            value = getattr(batch, f.name)
            assert not dataclasses.is_dataclass(value) or isinstance(value, DeviceBatch), f.name


@pytest.mark.slow
@requires_shared_data
def test_the_batch_transfer_benchmark_times_both_moves():
    """``scripts/benchmark_batch_transfer.py`` runs on the kit and prints, per config, both moves and their ratio."""
    done = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "benchmark_batch_transfer.py"), "--repeats", "1",
                           "--data", str(SHARED_DATA / "conll2012_ontonotesv5")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.split() for line in done.stdout.splitlines() if line.endswith("x")]
    assert [row[0] for row in rows] == ["shipped", "GPU"]
    assert all(float(row[-1].rstrip("x")) > 0 for row in rows)
