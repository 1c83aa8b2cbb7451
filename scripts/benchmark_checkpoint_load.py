"""Time to load a CLI-written task checkpoint, by vocabulary size: ``onlstm_tasks.tasks.loading.load_task_model`` (the
vocabularies passed as they are) against Lightning's ``load_from_checkpoint`` (every hyper-parameter through
jsonargparse, which checks a list item by item in time quadratic in its length).

    python scripts/benchmark_checkpoint_load.py [--sizes 527 2000 8000] [--lightning-up-to 2000]

The checkpoint is the repository's small NER fixture with its word vocabulary (and embedding) grown to each size.
"""

from __future__ import annotations

import argparse
import io
import tempfile
import time
from pathlib import Path

import torch

from onlstm_tasks.tasks.loading import load_task_model, read_checkpoint, task_model_class

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "pre_move_checkpoints" / "ner_onlstm.ckpt"
EMBEDDING = "net.embedder.embed.parts.0.embedding.weight"


def grown(checkpoint: dict, size: int) -> bytes:
    """The checkpoint with ``size`` words (new words appended, their vectors zero), serialised."""
    hparams, state = dict(checkpoint["hyper_parameters"]), dict(checkpoint["state_dict"])
    extra = size - len(hparams["word_vocab"])
    hparams["word_vocab"] = list(hparams["word_vocab"]) + [f"word{i}" for i in range(extra)]
    state[EMBEDDING] = torch.cat((state[EMBEDDING], state[EMBEDDING].new_zeros(extra, state[EMBEDDING].size(1))))
    buffer = io.BytesIO()
    torch.save({**checkpoint, "hyper_parameters": hparams, "state_dict": state}, buffer)
    return buffer.getvalue()


def seconds(load, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        load()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[527, 2000, 8000])
    parser.add_argument("--lightning-up-to", type=int, default=2000, help="time Lightning's loading up to this size")
    args = parser.parse_args()
    checkpoint = read_checkpoint(FIXTURE)
    cls = task_model_class(checkpoint["hyper_parameters"])
    print(f"{'words':>7}  {'load_task_model':>16}  {'load_from_checkpoint':>21}  ratio")
    folder = tempfile.TemporaryDirectory()
    for size in args.sizes:
        path = Path(folder.name) / f"words_{size}.ckpt"
        path.write_bytes(grown(checkpoint, max(size, len(checkpoint["hyper_parameters"]["word_vocab"]))))
        ours = seconds(lambda: load_task_model(path))
        theirs = seconds(lambda: cls.load_from_checkpoint(str(path), map_location="cpu"), 1) \
            if size <= args.lightning_up_to else None
        ratio = f"{theirs / ours:.0f}x" if theirs else "-"
        print(f"{size:>7}  {ours:>15.2f}s  {(f'{theirs:.2f}s' if theirs else 'not run'):>21}  {ratio}")
    folder.cleanup()


if __name__ == "__main__":
    main()
