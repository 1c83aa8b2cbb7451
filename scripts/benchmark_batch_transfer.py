"""Host time of Lightning's move of one training batch to the device: the batch's own ``to`` against Lightning's walk.

    python scripts/benchmark_batch_transfer.py [--data ../shared/data/conll2012_ontonotesv5] [--device cpu|cuda]

Lightning moves a batch with ``move_data_to_device``. An object with a ``to`` method is moved whole by that method
(the batches' ``DeviceBatch.to``); any other dataclass is walked field by field, and ``lightning_utilities`` deep-copies
each one it meets, the words' lists of strings included. The "walk" column is that walk over the same batch (the same
fields in a dataclass without ``to``: what Lightning did before the batches had it); "to" is ``move_data_to_device``
as training calls it. Per config of the OntoNotes recipes, over every batch of one training epoch of the kit: each
batch's median of ``--repeats`` moves, averaged over the batches; on one thread.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
from benchmark_encoders import machine  # noqa: E402
from benchmark_training import data_module  # noqa: E402

CONFIGS = {"shipped": "configs/ner/ontonotes_onlstm_crf.yaml",
           "GPU config": "configs/ner/ontonotes_onlstm_crf_gpu.yaml"}


@functools.cache
def plain_class(cls: type) -> type:
    """A dataclass with ``cls``'s fields and no ``to`` method: what Lightning walks."""
    return dataclasses.make_dataclass(f"Plain{cls.__name__}", [(f.name, f.type) for f in dataclasses.fields(cls)])


def plain(value):
    """``value`` with every batch dataclass in it (nested ones included) replaced by its :func:`plain_class`."""
    if not dataclasses.is_dataclass(value):
        return value
    return plain_class(type(value))(**{f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)})


def mean_ms(move, batches, repeats: int, device: torch.device) -> float:
    """Milliseconds of host time per batch: each batch's median of ``repeats`` moves, averaged over the batches (an
    epoch's total over its batch count)."""
    per_batch = []
    for batch in batches:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            move(batch)
            times.append(time.perf_counter() - start)
        per_batch.append(statistics.median(times))
    if device.type == "cuda":
        torch.cuda.synchronize()
    return 1e3 * statistics.fmean(per_batch)


def main() -> None:
    from lightning.fabric.utilities.apply_func import move_data_to_device
    
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(REPO / ".." / "shared" / "data" / "conll2012_ontonotesv5"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    device = torch.device(args.device)

    def move(batch):
        return move_data_to_device(batch, device)

    print(f"machine: {machine()}; to {device}")
    print(f"{'config':<12}{'batches':>8}{'walk ms':>9}{'to ms':>8}{'walk / to':>11}")
    for name, config in CONFIGS.items():
        batches = list(data_module(args.data, config, workers=0).train_dataloader())
        walked = mean_ms(move, [plain(b) for b in batches], args.repeats, device)
        moved = mean_ms(move, batches, args.repeats, device)
        print(f"{name:<12}{len(batches):>8}{walked:>9.3f}{moved:>8.3f}{walked / moved:>10.1f}x")


if __name__ == "__main__":
    main()
