"""``onlstm-trees eval --ensemble`` / ``--choose-ensemble``: tree ensembles over the readings of one or more
checkpoints (:mod:`onlstm_tasks.trees.ensemble`), scored against gold constituency trees.

``--choose-ensemble`` picks the members on the gold trees it is given (run it on the validation split) by greedy
forward selection on sentence UF1 over every reading of every ``--checkpoint`` (both master gates, every layer,
the direction combinations of ``--combine``), and prints the best single reading beside the chosen ensemble;
``--ensemble READINGS`` scores a given ensemble (the printed one, on the test split).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from onlstm_tasks.probing.scoring import EnsembleScorer, format_line
from onlstm_tasks.trees.ensemble import Reading, choose_members, parse_readings
from onlstm_tasks.trees.ptb import Tree
from onlstm_tasks.trees.source import DISTANCE_GATES


def gate_tables(checkpoints: Sequence[str], inputs: Sequence[Sequence[str]], gates: Sequence[str],
                args: argparse.Namespace) -> tuple[dict[tuple[int, str], list], list[tuple[int, int]]]:
    """Per (model, gate) the distances ``[layers, directions, n]`` of every input sentence (None for an empty one),
    and each model's ``(layers, directions)``."""
    from onlstm_tasks.probing.loading import load_probe  # the models (and Lightning) only when needed

    nonempty = [i for i, words in enumerate(inputs) if words]
    tables: dict[tuple[int, str], list] = {}
    shapes = []
    for model, path in enumerate(checkpoints):
        probe = load_probe(path, args.device, trust=args.trust_checkpoint)
        shapes.append(probe.shape())
        for gate in gates:
            column: list = [None] * len(inputs)
            for i, d in zip(nonempty, probe.distances([inputs[i] for i in nonempty], args.batch_size, gate)):
                column[i] = d
            tables[(model, gate)] = column
    return tables, shapes


def run_ensemble_eval(args: argparse.Namespace, trees: Sequence[Tree], inputs: Sequence[Sequence[str]],
                      combinations: Callable[[str | None, int], list[str]]) -> None:
    """Prints one UF1 line per ensemble: with ``--choose-ensemble`` the best single reading and the chosen
    ensemble, with ``--ensemble`` the given one. ``combinations(spec, directions)``: the ``--combine`` choices."""
    given = parse_readings(args.ensemble) if args.ensemble else []
    gates = DISTANCE_GATES if args.choose_ensemble else tuple(g for g in DISTANCE_GATES if g in {r.gate for r in given})
    tables, shapes = gate_tables(args.checkpoint, inputs, gates, args)
    scorer = EnsembleScorer(trees, tables, kept_input=args.drop_punctuation)
    lines: list[tuple[str, dict]] = []
    if args.choose_ensemble:
        candidates = [Reading(model, gate, layer, how) for model, (layers, directions) in enumerate(shapes)
                      for gate in DISTANCE_GATES for layer in range(layers)
                      for how in combinations(args.combine, directions)]
        chosen = choose_members(candidates, lambda members: scorer.score(members)["sentence_f1"], args.max_members)
        lines.append((f"best single reading {chosen[0]}", scorer.score(chosen[:1])))
        lines.append((f"ensemble chosen here {','.join(map(str, chosen))}", scorer.score(chosen)))
    if given:
        lines.append((f"ensemble {','.join(map(str, given))}", scorer.score(given)))
    width = max(len(label) for label, _ in lines)
    for label, result in lines:
        print(format_line(label, result, width))
