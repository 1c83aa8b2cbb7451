"""The trees of pretrained language models over seeds: choose on validation trees, report on test trees.

For every run folder of ``scripts/compare.py`` (``RUNS/LABEL/seed_S``, from a ``configs/lm/`` config with
``TreeF1Monitor`` and a ``ModelCheckpoint(monitor=val_uf1)``) this script

1. reads the run's own ``metrics.csv``: the validation at which ``val_uf1`` peaked (the one ``best_uf1*.ckpt``
   holds: a ModelCheckpoint replaces its file only on a strictly better score, so the first peak) and, in that
   row, the layer x gate x direction combination whose validation sentence UF1 was highest: the *chosen* reading;
2. re-scores ``best_uf1*.ckpt`` on the validation trees (a check: it must give the logged numbers) and on the test
   trees, for every layer, both master gates and every direction combination, exactly as ``onlstm-trees eval``
   does (the same reader, probe and scorer);
3. optionally (``--uas-gold``) scores the dependency heads of every reading against a CoNLL-X/U file (UAS,
   punctuation not scored), as ``onlstm-trees eval --format conllx`` does;
4. optionally (``--ensemble-max-members N``) chooses a tree ensemble over every reading of every run of a label on
   the validation trees (greedy forward selection, as ``onlstm-trees eval --choose-ensemble``) and scores it, and the
   best single reading chosen the same way, on the test trees (as ``onlstm-trees eval --ensemble``);

and writes one Markdown table (mean ± sample std over seeds per label and reading, the chosen reading's test UF1
per seed beside right-branching, left-branching and random trees, the ``onlstm-trees eval`` commands that print
every number) to ``--out`` and the numbers as JSON beside it. Nothing is chosen on test.

    python scripts/lm_trees_study.py --runs runs/compare/lm_bi_steps --labels ON-LSTM_bi \\
        --gold ../shared/data/conll2012_ontonotesv5 --data-dir english_v12 --ensemble-max-members 6 \\
        --uas-gold ../shared/data/uner_en_ewt/en_ewt-uner-test.conllx --out benchmarks/results/lm_unlabelled_en_bi_seeds.md
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
import sys
from pathlib import Path

from compare import code_provenance  # scripts/compare.py: the commit and versions that made a table

from onlstm_tasks.probing.ensemble_eval import gate_tables
from onlstm_tasks.probing.loading import load_probe
from onlstm_tasks.probing.scoring import (EnsembleScorer, read_conll_dependencies, read_ontonotes_gold, score_distances,
                                          score_heads)
from onlstm_tasks.trees.ensemble import Reading, choose_members
from onlstm_tasks.trees.metrics import DEPENDENCY_PUNCTUATION, UASAccumulator, baseline_uf1, chain_heads
from onlstm_tasks.trees.source import DISTANCE_GATES as GATES
KEY = re.compile(r"^val_uf1_(forget|input)_l(\d+)_(\w+)$")


def mean_std(values: list[float]) -> str:
    if not values:
        return ""
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def chosen_on_validation(metrics: Path) -> tuple[dict, dict[str, float]]:
    """The validation row where ``val_uf1`` first peaked, and its per-reading scores."""
    rows = [r for r in csv.DictReader(metrics.open()) if r.get("val_uf1")]
    if not rows:
        raise SystemExit(f"{metrics}: no val_uf1 logged (was the run trained with TreeF1Monitor?)")
    best = rows[0]
    for row in rows[1:]:
        if float(row["val_uf1"]) > float(best["val_uf1"]):
            best = row
    readings = {k: float(v) for k, v in best.items() if KEY.match(k) and v}
    return best, readings


def reading_name(gate: str, layer: int, how: str) -> str:
    return f"{gate} l{layer} {how}"


def combinations_of(directions: int) -> tuple[str, ...]:
    """The direction combinations a model with ``directions`` stacks is read by."""
    return ("mean", "forward", "backward") if directions == 2 else ("forward",)


def score_checkpoint(probe, trees: list, batch_size: int) -> dict[str, dict]:
    layers, directions = probe.shape()
    combinations = combinations_of(directions)
    words = [t.words() for t in trees]
    out = {}
    for gate in GATES:
        distances = probe.distances(words, batch_size, gate)
        for (layer, how), result in score_distances(trees, distances, layers, combinations).items():
            out[reading_name(gate, layer + 1, how)] = result
    return out


def uas_checkpoint(probe, sentences: list, batch_size: int) -> dict[str, float]:
    layers, directions = probe.shape()
    combinations = combinations_of(directions)
    out = {}
    for gate in GATES:
        distances = probe.distances([w for w, _, _ in sentences], batch_size, gate)
        for (layer, how), result in score_heads(sentences, distances, layers, combinations).items():
            out[reading_name(gate, layer + 1, how)] = result["corpus_uas"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", required=True, help="compare.py --runs-dir of the language-model runs")
    ap.add_argument("--labels", nargs="+", required=True, help="run labels (sub-folders of --runs)")
    ap.add_argument("--gold", required=True, help="gold trees (hub name or local folder, ontonotes schema)")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--revision", default=None)
    ap.add_argument("--uas-gold", default=None, help="CoNLL-X/U file whose heads the induced heads are scored on")
    ap.add_argument("--random-seeds", type=int, default=5, help="seeds of the random-tree baseline")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--ensemble-max-members", type=int, default=0,
                    help="also choose a tree ensemble of at most this many readings per label on validation (0: no)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    code = code_provenance()  # before anything is written: the code this table is made by

    gold = {split: read_ontonotes_gold(args.gold, split, None, args.data_dir, args.revision)[0]
            for split in ("validation", "test")}
    gold = {split: [t for t in trees if t.words()] for split, trees in gold.items()}
    baselines = {}
    for split, trees in gold.items():
        baselines[split] = {"right-branching": baseline_uf1(trees, "right")["sentence_f1"],
                            "left-branching": baseline_uf1(trees, "left")["sentence_f1"],
                            "random": [baseline_uf1(trees, "random", seed=s)["sentence_f1"]
                                       for s in range(1, args.random_seeds + 1)]}
    dependencies = read_conll_dependencies(args.uas_gold) if args.uas_gold else None
    chains = {}
    if dependencies:
        for kind in ("left-chain", "right-chain"):
            acc = UASAccumulator()
            for words, tags, heads in dependencies:
                acc.add(chain_heads(kind, len(words)), heads, [t not in DEPENDENCY_PUNCTUATION for t in tags])
            chains[kind] = acc.result()["corpus_uas"]

    runs: dict[str, list[dict]] = {}
    for label in args.labels:
        folders = sorted((Path(args.runs) / label).glob("seed_*"), key=lambda p: int(p.name.split("_")[1]))
        for folder in folders:
            metrics = next(iter(sorted(folder.glob("fit/version_*/metrics.csv"))), None)
            ckpt = next(iter(sorted(folder.glob("checkpoints*/best_uf1*.ckpt"))), None)
            if metrics is None or ckpt is None or not (folder / "fit.done").exists():
                print(f"{folder}: no finished fit with a best_uf1 checkpoint; skipped", file=sys.stderr)
                continue
            row, logged = chosen_on_validation(metrics)
            chosen = max(logged, key=logged.get)
            gate, layer, how = KEY.match(chosen).groups()
            probe = load_probe(ckpt)
            val = score_checkpoint(probe, gold["validation"], args.batch_size)
            for key, value in logged.items():  # the re-scored checkpoint must be the logged one
                g, lyr, h = KEY.match(key).groups()
                again = val[reading_name(g, int(lyr), h)]["sentence_f1"]
                if abs(again - value) > 0.05:
                    raise SystemExit(f"{ckpt}: {key} logged {value:.2f} but the checkpoint scores {again:.2f}")
            test = score_checkpoint(probe, gold["test"], args.batch_size)
            ppl_rows = [r for r in csv.DictReader(metrics.open()) if r.get("val_ppl")]
            record = {"seed": int(folder.name.split("_")[1]), "checkpoint": str(ckpt),
                      "chosen": reading_name(gate, int(layer), how), "gate": gate, "layer": int(layer),
                      "combination": how, "chosen_step": int(row["step"]), "chosen_epoch": int(row["epoch"]),
                      "last_step": max(int(r["step"]) for r in ppl_rows),
                      "best_val_ppl": min(float(r["val_ppl"]) for r in ppl_rows),
                      "validation": {k: v["sentence_f1"] for k, v in val.items()},
                      "test": {k: v["sentence_f1"] for k, v in test.items()},
                      "test_corpus": {k: v["corpus_f1"] for k, v in test.items()}}
            if dependencies:
                record["uas_test"] = uas_checkpoint(probe, dependencies, args.batch_size)
            runs.setdefault(label, []).append(record)
            print(f"{label} seed {record['seed']}: chosen {record['chosen']} (val {logged[chosen]:.2f}), test "
                  f"{record['test'][record['chosen']]:.2f}", file=sys.stderr)

    ensembles = {label: ensemble_study(records, gold, args) for label, records in runs.items()
                 if args.ensemble_max_members > 0}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"baselines": baselines, "uas_chains": chains, "runs": runs,
                                                    "ensembles": ensembles, "code": code}, indent=1))
    out.write_text(render(args, runs, baselines, chains, ensembles))
    print(f"wrote {out} and {out.with_suffix('.json')}", file=sys.stderr)
    return 0


def ensemble_study(records: list[dict], gold: dict, args) -> dict:
    """The ensemble over every reading of ``records``' checkpoints chosen on the validation trees (and the best single
    reading chosen there), both scored on validation and test: ``onlstm-trees eval --choose-ensemble`` on
    validation, then ``--ensemble`` on test."""
    checkpoints = [r["checkpoint"] for r in records]
    options = argparse.Namespace(device="cpu", trust_checkpoint=False, batch_size=args.batch_size)
    scorers = {}
    for split, trees in gold.items():
        tables, shapes = gate_tables(checkpoints, [t.words() for t in trees], GATES, options)
        scorers[split] = EnsembleScorer(trees, tables)
    candidates = [Reading(model, gate, layer, how) for model, (layers, directions) in enumerate(shapes)
                  for gate in GATES for layer in range(layers) for how in combinations_of(directions)]
    chosen = choose_members(candidates, lambda members: scorers["validation"].score(members)["sentence_f1"],
                            args.ensemble_max_members)
    rows = {"best single reading": chosen[:1], "ensemble": chosen}
    return {"checkpoints": checkpoints,
            **{name: {"readings": [str(r) for r in members],
                      **{split: scorer.score(members)["sentence_f1"] for split, scorer in scorers.items()}}
               for name, members in rows.items()}}


def render_ensembles(args, ensembles: dict, baselines: dict) -> list[str]:
    lines = []
    for label, study in ensembles.items():
        lines += ["", f"## A tree ensemble over the seeds of {label}", "",
                  "Chosen on the validation trees by greedy forward selection over every reading of the runs' "
                  f"`best_uf1` checkpoints (both master gates, every layer, every direction combination; at most "
                  f"{args.ensemble_max_members} members; the mean of the members' per-sentence rank-normalised "
                  "distances), then scored on the test trees:", "",
                  "| | readings | validation UF1 | test UF1 |", "|---|---|---|---|"]
        for name in ("best single reading", "ensemble"):
            row = study[name]
            lines.append(f"| {name} (chosen on validation) | {', '.join(row['readings'])} | "
                         f"{row['validation']:.1f} | {row['test']:.1f} |")
        lines.append(f"| right-branching | | {baselines['validation']['right-branching']:.1f} | "
                     f"{baselines['test']['right-branching']:.1f} |")
        given = " ".join(f"--checkpoint {c}" for c in study["checkpoints"])
        where = f"--format ontonotes --gold {args.gold} --data-dir {args.data_dir} " + (
            f"--revision {args.revision} " if args.revision else "")
        lines += ["", "Printed again by:", "", "```",
                  f"onlstm-trees eval {where}--split validation --choose-ensemble --max-members "
                  f"{args.ensemble_max_members} {given}",
                  f"onlstm-trees eval {where}--split test --ensemble {','.join(study['ensemble']['readings'])} "
                  f"{given}", "```"]
    return lines


def render(args, runs: dict[str, list[dict]], baselines: dict, chains: dict, ensembles: dict) -> str:
    rb_test = baselines["test"]["right-branching"]
    lines = [f"# Trees of the pretrained language models ({Path(args.out).stem})", "",
             "Sentence-level UF1 (percent, punctuation removed by gold POS tag) of the greedy trees of each reading "
             f"(layer x master gate x direction combination) of `best_uf1` checkpoints, on the {args.gold} "
             "validation and test trees (500 each). Per run the reading is chosen on validation (the highest "
             "validation UF1 at the validation where `val_uf1` peaked); mean ± sample std over seeds.", "",
             "## The reading chosen on validation, scored on test", "",
             "| model | seeds | best val ppl | chosen readings (seed: reading, step) | test UF1 per seed | "
             f"test UF1 mean ± std | above right-branching ({rb_test:.1f}) |",
             "|---|---|---|---|---|---|---|"]
    for label, records in runs.items():
        scores = [r["test"][r["chosen"]] for r in records]
        lines.append(
            f"| {label} | {len(records)} | {mean_std([r['best_val_ppl'] for r in records])} | "
            + "; ".join(f"{r['seed']}: {r['chosen']}, {r['chosen_step']}" for r in records) + " | "
            + ", ".join(f"{s:.1f}" for s in scores) + f" | {mean_std(scores)} | "
            + f"{statistics.mean(scores) - rb_test:+.1f} (every seed above: "
            + ("yes" if all(s > rb_test for s in scores) else "no") + ") |")
    random_test, random_val = baselines["test"]["random"], baselines["validation"]["random"]
    lines += ["", "Baselines (test / validation): right-branching "
              f"{baselines['test']['right-branching']:.1f} / {baselines['validation']['right-branching']:.1f}, "
              f"left-branching {baselines['test']['left-branching']:.1f} / "
              f"{baselines['validation']['left-branching']:.1f}, random {mean_std(random_test)} / "
              f"{mean_std(random_val)} ({len(random_test)} seeds).", "",
              "## Every reading (test, with validation in brackets)", ""]
    readings = list(dict.fromkeys(k for records in runs.values() for r in records for k in r["test"]))
    readings.sort(key=lambda k: (k.split()[0], k.split()[2], k.split()[1]))
    labels = list(runs)
    lines += ["| reading | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    for key in readings:
        cells = []
        for label in labels:
            test = [r["test"][key] for r in runs[label] if key in r["test"]]
            val = [r["validation"][key] for r in runs[label] if key in r["validation"]]
            cells.append(f"{mean_std(test)} ({mean_std(val)})" if test else "")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    for name in ("right-branching", "left-branching"):
        cell = f"{baselines['test'][name]:.1f} ({baselines['validation'][name]:.1f})"
        lines.append(f"| *{name}* | " + " | ".join(cell for _ in labels) + " |")
    cell = f"{mean_std(random_test)} ({mean_std(random_val)})"
    lines.append("| *random* | " + " | ".join(cell for _ in labels) + " |")
    lines += render_ensembles(args, ensembles, baselines)
    if chains:
        lines += ["", f"## Dependency heads of every reading: corpus UAS on {args.uas_gold} (punctuation not scored)",
                  "", "| reading | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
        for key in readings:
            cells = [mean_std([r["uas_test"][key] for r in runs[label] if key in r.get("uas_test", {})])
                     for label in labels]
            lines.append(f"| {key} | " + " | ".join(cells) + " |")
        for name, value in chains.items():
            lines.append(f"| *{name}* | " + " | ".join(f"{value:.1f}" for _ in labels) + " |")
    lines += ["", "## Commands", "", "Written by:", "", "```", "python scripts/lm_trees_study.py " + " ".join(
        sys.argv[1:]), "```", "", "Every test number of a run is printed by (`--gate input` for the input gate):", ""]
    lines.append("```")
    for records in runs.values():
        for r in records:
            lines.append(f"onlstm-trees eval --format ontonotes --gold {args.gold} --data-dir {args.data_dir} "
                         + (f"--revision {args.revision} " if args.revision else "")
                         + f"--split test --gate {r['gate']} --checkpoint {r['checkpoint']}")
    lines += ["```", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
