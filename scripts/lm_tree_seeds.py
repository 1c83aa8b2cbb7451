"""Trees of language models over seeds: each checkpoint's best single reading chosen on the kit's validation trees
and scored on its test trees, then one tree ensemble over the readings of all of them, chosen on validation and
scored on test; right-branching beside them. Prints a Markdown table (``--out`` also writes it).

    python scripts/lm_tree_seeds.py --checkpoint runs/lm_bi_seeds/seed1/.../best_uf1.ckpt --checkpoint ... \\
        [--gold ../shared/data/conll2012_ontonotesv5] [--data-dir english_v12] [--max-members 6] [--out FILE]

A reading is ``GATE:lLAYER:COMBINATION`` (master gate, 1-based layer, direction combination), scored by sentence-level
UF1 (``onlstm-trees eval`` prints the same numbers for one reading: ``--split test --gate GATE`` on one checkpoint,
or ``--ensemble`` with the printed members on several).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from onlstm_tasks.probing.ensemble_eval import gate_tables
from onlstm_tasks.probing.scoring import EnsembleScorer, read_ontonotes_gold
from onlstm_tasks.trees import baseline_uf1
from onlstm_tasks.trees.ensemble import Reading, choose_members
from onlstm_tasks.trees.source import DISTANCE_GATES

COMBINATIONS = ("mean", "forward", "backward")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", action="append", required=True, help="a LanguageModel checkpoint (repeat)")
    ap.add_argument("--label", action="append", help="a name for each checkpoint (default: its parent folders)")
    ap.add_argument("--gold", default=str(Path(__file__).resolve().parents[2] / "shared/data/conll2012_ontonotesv5"))
    ap.add_argument("--data-dir", default="english_v12")
    ap.add_argument("--max-members", type=int, default=6)
    ap.add_argument("--limit", type=int, default=None, help="score only the first N trees of each split")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    args.device, args.trust_checkpoint = "cpu", False
    labels = args.label or [Path(c).parts[-5] if len(Path(c).parts) >= 5 else c for c in args.checkpoint]

    scorers, baselines = {}, {}
    for split in ("validation", "test"):
        trees, _ = read_ontonotes_gold(args.gold, split, None, args.data_dir, None)
        trees = trees[: args.limit] if args.limit else trees
        inputs = [t.words() for t in trees]
        tables, shapes = gate_tables(args.checkpoint, inputs, DISTANCE_GATES, args)
        scorers[split] = EnsembleScorer(trees, tables)
        baselines[split] = baseline_uf1(trees, "right")["sentence_f1"]
        print(f"{split}: {len(trees)} trees", file=sys.stderr)

    def uf1(split: str, members: list[Reading]) -> float:
        return scorers[split].score(members)["sentence_f1"]

    def readings(model: int) -> list[Reading]:
        layers, directions = shapes[model]
        hows = COMBINATIONS if directions == 2 else ("forward",)
        return [Reading(model, gate, layer, how) for gate in DISTANCE_GATES for layer in range(layers) for how in hows]

    lines = ["| model | reading chosen on validation | validation UF1 | test UF1 |", "|---|---|---|---|"]
    tests = []
    for model, label in enumerate(labels):
        (best,) = choose_members(readings(model), lambda m: uf1("validation", m), 1)
        tests.append(uf1("test", [best]))
        lines.append(f"| {label} | {best.gate}:l{best.layer + 1}:{best.combination} | {uf1('validation', [best]):.1f} | "
                     f"{tests[-1]:.1f} |")
    if len(tests) > 1:
        lines.append(f"| mean ± std over {len(tests)} | | | {statistics.mean(tests):.1f} ± "
                     f"{statistics.stdev(tests):.1f} |")
    candidates = [r for model in range(len(labels)) for r in readings(model)]
    chosen = choose_members(candidates, lambda m: uf1("validation", m), args.max_members)
    members = ",".join(map(str, chosen))
    lines.append(f"| ensemble of the {len(labels)} models ({len(chosen)} readings) | {members} | "
                 f"{uf1('validation', chosen):.1f} | {uf1('test', chosen):.1f} |")
    lines.append(f"| right-branching | | {baselines['validation']:.1f} | {baselines['test']:.1f} |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n")


if __name__ == "__main__":
    main()
