"""Per-batch training-step time of ``tree_source: lm`` against ``tree_source: none`` at NER shapes, interleaved.

    python scripts/benchmark_tree_source_lm.py --lm-checkpoint LM.ckpt [--data ../shared/data/uner_en_ewt]
        [--batches 12] [--repeats 2] [--threads 1]

Builds the UNER dependency-guided NER models of ``configs/ner/uner_onlstm_crf_dg_none.yaml`` and
``uner_onlstm_crf_dg_lm.yaml`` (``lm_checkpoint`` replaced by ``--lm-checkpoint``) in one process and times training
steps (forward, backward, Adam step) on the same batches in turn: none, lm with its distance cache emptied first
(the first epoch), lm again on the same batch (cached: every later epoch), none. Interleaving keeps a busy machine's
drift out of the ratios (``scripts/benchmark_training.py`` runs configs one after the other, minutes apart).
Prints the median milliseconds per batch and the ratios to ``none``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import yaml

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lm-checkpoint", required=True)
    ap.add_argument("--data", default=str(REPO / ".." / "shared" / "data" / "uner_en_ewt"))
    ap.add_argument("--batches", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from onlstm_tasks.data.ner.module import NERDataModule
    from onlstm_tasks.tasks.hub import build_task_model
    from onlstm_tasks.tasks.ner import NERTagger

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    configs = {name: yaml.safe_load((REPO / f"configs/ner/uner_onlstm_crf_dg_{name}.yaml").read_text())
               for name in ("none", "lm")}
    configs["lm"]["model"]["init_args"]["encoder"]["init_args"]["tree_source"]["lm_checkpoint"] = args.lm_checkpoint
    dm = NERDataModule(**{**configs["none"]["data"]["init_args"], "path": args.data})
    dm.setup("fit")
    facts = {"word_vocab": dm.word_vocab, "char_vocab": dm.char_vocab, "labels": dm.labels}
    models = {}
    for name, config in configs.items():
        model = build_task_model(NERTagger, config["model"]["init_args"], facts).train()
        models[name] = (model, torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3))
    batches = [batch for _, batch in zip(range(args.batches), dm.train_dataloader())]

    def step(name: str, batch, clear: bool = False) -> float:
        model, optimizer = models[name]
        if clear:
            model.tree_lm._cache.clear()
        start = time.perf_counter()
        loss = model.net.loss(batch.tokens, batch.tags, model.tree_heads(batch))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return time.perf_counter() - start

    for batch in batches[:2]:  # warm-up
        step("none", batch)
        step("lm", batch, clear=True)
    times: dict[str, list[float]] = {"none": [], "lm uncached": [], "lm cached": []}
    for _ in range(args.repeats):
        for batch in batches:
            times["none"].append(step("none", batch))
            times["lm uncached"].append(step("lm", batch, clear=True))
            times["lm cached"].append(step("lm", batch))
            times["none"].append(step("none", batch))
    tokens = statistics.mean(int(b.tokens.mask.sum()) for b in batches)
    median = {k: statistics.median(v) for k, v in times.items()}
    print(f"{args.threads} thread(s); {len(batches)} training batches of {args.data} (mean {tokens:.0f} tokens), "
          f"interleaved x{args.repeats}; language model {args.lm_checkpoint}")
    for name, seconds in median.items():
        print(f"{name:<12} median {1000 * seconds:8.1f} ms/batch  ({seconds / median['none']:.3f}x none)")


if __name__ == "__main__":
    main()
