"""The ``onlstm-trees`` console script: unsupervised-parsing UF1 of a checkpoint's ON-LSTM (or of a baseline)
against gold constituency trees, and a picture of one sentence's master gates and induced tree.

``onlstm-trees eval --gold PATH (--checkpoint CKPT | --baseline KIND)``
    Gold trees come from Penn-Treebank bracketed files (``--format ptb``: a file, or a directory read recursively;
    function tags and ``-NONE-`` traces stripped) or from the ``parse_tree`` strings of a dataset in the
    ``ontonotes/conll2012_ontonotesv5`` hub schema (``--format ontonotes``: a hub name or a local folder, read with
    ``datasets.load_dataset(PATH, name=, data_dir=, revision=, split=)``; sentences without a tree are skipped and
    counted). Scoring follows :mod:`onlstm_tasks.trees.metrics` (punctuation removed by gold POS tag, sentence-
    and corpus-level UF1 in percent). A checkpoint reads each gold sentence's words (all of them by default, or only
    the non-punctuation ones with ``--drop-punctuation``, as the ON-LSTM authors' language model did); its
    distances give one greedy tree per layer and direction combination (``--combine``), projected onto the
    non-punctuation tokens. Baselines are built over the non-punctuation tokens. One line per result on stdout;
    what was read and skipped goes to stderr.

``onlstm-trees eval --gold PATH --checkpoint A [--checkpoint B ...] (--choose-ensemble | --ensemble READINGS)``
    Tree ensembles (:mod:`onlstm_tasks.trees.ensemble`): one tree per sentence from the mean of several readings'
    rank-normalised distances (readings ``m1:input:l2:mean``: model, master gate, layer, direction combination).
    ``--choose-ensemble`` chooses the members on the given gold trees (the validation split) and prints them beside
    the best single reading; ``--ensemble`` scores given members (on the test split).

``onlstm-trees eval --format conllx --gold FILE (--checkpoint CKPT | --baseline left-chain|right-chain)``
    Dependency heads against the gold heads of a CoNLL-X/U file (HEAD in column 7; multiword-token and empty-node
    lines skipped): the unlabelled attachment score (UAS, :mod:`onlstm_tasks.trees.metrics`), punctuation (UPOS
    ``PUNCT``, column 4) not scored. A checkpoint's heads are read off its greedy trees over the whole sentence
    (:func:`~onlstm_tasks.trees.induce.distances_to_heads`), one line per layer and direction combination; the chain
    baselines attach every word to its left (right) neighbour.

``onlstm-trees plot --checkpoint CKPT --sentence TEXT --out FILE.png``
    Heatmaps of the master forget gate f~ and master input gate i~ over levels and tokens for one layer and
    direction, with the tree induced from that layer and direction's distances drawn under the words (the
    bracketed tree is also printed). Needs matplotlib.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from onlstm_tasks.encoders.base import backward_as_boundaries
from onlstm_tasks.probing.ensemble_eval import run_ensemble_eval
from onlstm_tasks.probing.scoring import (  # noqa: F401  (the readers and scorers stay importable from here)
    format_line,
    format_uas_line,
    read_conll_dependencies,
    read_ontonotes_gold,
    read_ptb_gold,
    score_distances,
    score_heads,
)
from onlstm_tasks.trees.induce import distances_to_tree
from onlstm_tasks.trees.metrics import (
    CHAIN_BASELINES,
    DEPENDENCY_PUNCTUATION,
    UASAccumulator,
    baseline_uf1,
    chain_heads,
    gold_spans,
)
from onlstm_tasks.trees.source import DIRECTION_COMBINATIONS

BASELINES = {"left-branching": "left", "right-branching": "right", "random": "random"}
DIRECTIONS = ("forward", "backward")


# -------------------------------------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="onlstm-trees", description=__doc__.split("\n\n")[0].replace("``", ""),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    ev = sub.add_parser("eval", help="UF1 of a checkpoint's induced trees (or of a baseline) against gold trees")
    ev.add_argument("--gold", required=True, help="PTB file or directory (--format ptb); dataset hub name or local "
                    "folder (--format ontonotes); CoNLL-X/U file (--format conllx: UAS of dependency heads)")
    ev.add_argument("--format", choices=("ptb", "ontonotes", "conllx"), default="ptb")
    what = ev.add_mutually_exclusive_group(required=True)
    what.add_argument("--checkpoint", action="append", help="Lightning checkpoint of an ON-LSTM task or language "
                      "model; repeat it for an ensemble over several models (m1, m2, ... in that order)")
    what.add_argument("--baseline", choices=(*BASELINES, *CHAIN_BASELINES),
                      help="branching baselines for constituency gold trees, chain baselines for --format conllx")
    ev.add_argument("--split", help="dataset split (--format ontonotes; default test)")
    ev.add_argument("--data-dir", help="datasets.load_dataset data_dir, e.g. english_v12 (--format ontonotes)")
    ev.add_argument("--name", help="datasets.load_dataset config name (--format ontonotes)")
    ev.add_argument("--revision", help="datasets.load_dataset revision, e.g. refs/convert/parquet for the hub")
    ev.add_argument("--glob", default="**/*", help="files to read under a --gold directory (--format ptb)")
    ev.add_argument("--limit", type=int, help="score only the first N gold trees")
    ev.add_argument("--seed", type=int, default=0, help="seed of the random baseline")
    ev.add_argument("--combine", help=f"direction combinations, comma-separated, from {DIRECTION_COMBINATIONS} "
                    "(default: mean,forward,backward for bidirectional encoders, forward otherwise)")
    ev.add_argument("--gate", choices=("forget", "input"), default="forget",
                    help="distances of the master forget gate (default) or of the master input gate")
    ev.add_argument("--drop-punctuation", action="store_true",
                    help="feed the model only the non-punctuation words (default: the whole sentence)")
    ev.add_argument("--ensemble", metavar="READINGS",
                    help="UF1 of the tree ensemble of these readings: comma-separated [mMODEL:]GATE:lLAYER:COMBINATION "
                         "(e.g. m1:input:l2:mean,m2:forget:l1:forward; the mean of per-sentence rank-normalised "
                         "distances)")
    ev.add_argument("--choose-ensemble", action="store_true",
                    help="choose an ensemble on these gold trees (run it on the validation split): greedy forward "
                         "selection by sentence UF1 over every reading of every --checkpoint")
    ev.add_argument("--max-members", type=int, default=8, help="the most readings --choose-ensemble takes")
    ev.add_argument("--batch-size", type=int, default=64)
    ev.add_argument("--device", default="cpu")
    ev.add_argument("--trust-checkpoint", action="store_true",
                    help="allow full unpickling (checkpoints of models built in Python with factory objects)")

    pl = sub.add_parser("plot", help="master-gate heatmaps and the induced tree of one sentence, as a PNG")
    pl.add_argument("--checkpoint", required=True)
    pl.add_argument("--sentence", required=True, help="raw text (tokenised like prediction input) or, with "
                    "--pretokenized, space-separated tokens")
    pl.add_argument("--pretokenized", action="store_true")
    pl.add_argument("--layer", type=int, default=-1, help="layer (negative counts from the top; default -1)")
    pl.add_argument("--direction", choices=DIRECTIONS, default="forward")
    pl.add_argument("--out", required=True, help="PNG file to write")
    pl.add_argument("--device", default="cpu")
    pl.add_argument("--trust-checkpoint", action="store_true")
    return parser


# ------------------------------------------------------------------------------------------------------ commands


def _combinations(spec: str | None, directions: int) -> list[str]:
    if spec is None:
        return ["mean", "forward", "backward"] if directions == 2 else ["forward"]
    names = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [s for s in names if s not in DIRECTION_COMBINATIONS]
    if unknown or not names:
        raise ValueError(f"--combine takes a comma-separated list of {DIRECTION_COMBINATIONS}, got {spec!r}")
    if directions == 1 and "backward" in names:
        raise ValueError("--combine backward needs a bidirectional encoder; this one reads forward only")
    return list(dict.fromkeys(names))


def run_eval(args: argparse.Namespace) -> None:
    if args.format == "conllx":
        return run_eval_dependencies(args)
    if args.baseline in CHAIN_BASELINES:
        raise ValueError(f"--baseline {args.baseline} scores dependency heads: use it with --format conllx")
    if args.format == "ptb":
        extra = [flag for flag, value in (("--split", args.split), ("--data-dir", args.data_dir),
                                          ("--name", args.name), ("--revision", args.revision)) if value]
        if extra:
            raise ValueError(f"{', '.join(extra)} apply to --format ontonotes only")
        trees, skipped = read_ptb_gold(args.gold, args.glob), 0
        print(f"read {len(trees)} trees from {args.gold}", file=sys.stderr)
    else:
        split = args.split or "test"
        trees, skipped = read_ontonotes_gold(args.gold, split, args.name, args.data_dir, args.revision)
        print(f"read {len(trees)} trees from {args.gold} ({split}); {skipped} sentences without a parse tree "
              f"skipped", file=sys.stderr)
    trees = _limited(trees, args, "trees")

    if args.baseline:
        if args.combine or args.drop_punctuation or args.ensemble or args.choose_ensemble:
            raise ValueError("--combine, --drop-punctuation and the ensembles apply to --checkpoint only")
        result = baseline_uf1(trees, BASELINES[args.baseline], seed=args.seed)
        print(format_line(args.baseline, result))
        _note_empty_gold(result)
        return

    if args.drop_punctuation:
        inputs = [[w for w, k in zip(t.words(), gold_spans(t)[1]) if k] for t in trees]
    else:
        inputs = [t.words() for t in trees]
    if args.ensemble or args.choose_ensemble:
        run_ensemble_eval(args, trees, inputs, _combinations)
        return
    from onlstm_tasks.probing.loading import load_probe  # the models (and Lightning) only when needed

    probe = load_probe(_one_checkpoint(args), args.device, trust=args.trust_checkpoint)
    layers, directions = probe.shape()
    combinations = _combinations(args.combine, directions)
    nonempty = [i for i, words in enumerate(inputs) if words]
    computed = probe.distances([inputs[i] for i in nonempty], args.batch_size, args.gate)
    distances: list = [None] * len(trees)
    for i, d in zip(nonempty, computed):
        distances[i] = d
    results = score_distances(trees, distances, layers, combinations, kept_input=args.drop_punctuation)
    labels = {key: f"layer {key[0] + 1} ({key[1]})" for key in results}
    width = max(map(len, labels.values()))
    for key, result in results.items():
        print(format_line(labels[key], result, width))
    _note_empty_gold(next(iter(results.values())))


def _limited(items: list, args: argparse.Namespace, what: str) -> list:
    """The first ``--limit`` gold ``what`` (all without it); an error for a limit below 1 or nothing to score."""
    if args.limit is not None:
        if args.limit < 1:
            raise ValueError(f"--limit must be positive, got {args.limit}")
        items = items[: args.limit]
    if not items:
        raise ValueError(f"no gold {what} to score in {args.gold}")
    return items


def run_eval_dependencies(args: argparse.Namespace) -> None:
    """``eval --format conllx``: UAS of a checkpoint's induced heads (or of a chain baseline) on a CoNLL-X/U file."""
    extra = [flag for flag, value in (("--split", args.split), ("--data-dir", args.data_dir), ("--name", args.name),
                                      ("--revision", args.revision), ("--drop-punctuation", args.drop_punctuation))
             if value]
    if args.ensemble or args.choose_ensemble:
        extra.append("--ensemble/--choose-ensemble")
    if extra:
        raise ValueError(f"{', '.join(extra)} do not apply to --format conllx")
    sentences = read_conll_dependencies(args.gold)
    print(f"read {len(sentences)} sentences from {args.gold}", file=sys.stderr)
    sentences = _limited(sentences, args, "sentences")
    if args.baseline:
        if args.baseline not in CHAIN_BASELINES:
            raise ValueError(f"--format conllx scores dependency heads: --baseline is one of {CHAIN_BASELINES}")
        if args.combine:
            raise ValueError("--combine applies to --checkpoint only")
        acc = UASAccumulator()
        for words, tags, gold in sentences:
            acc.add(chain_heads(args.baseline, len(words)), gold,
                    [tag not in DEPENDENCY_PUNCTUATION for tag in tags])
        print(format_uas_line(args.baseline, acc.result()))
        return
    from onlstm_tasks.probing.loading import load_probe  # the models (and Lightning) only when needed

    probe = load_probe(_one_checkpoint(args), args.device, trust=args.trust_checkpoint)
    layers, directions = probe.shape()
    combinations = _combinations(args.combine, directions)
    distances = probe.distances([words for words, _, _ in sentences], args.batch_size, args.gate)
    results = score_heads(sentences, distances, layers, combinations)
    labels = {key: f"layer {key[0] + 1} ({key[1]})" for key in results}
    width = max(map(len, labels.values()))
    for key, result in results.items():
        print(format_uas_line(labels[key], result, width))


def _one_checkpoint(args: argparse.Namespace) -> str:
    if len(args.checkpoint) > 1:
        raise ValueError("several --checkpoint are read together by --ensemble or --choose-ensemble only")
    return args.checkpoint[0]


def _note_empty_gold(result: dict) -> None:
    if result["no_gold_spans"]:
        print(f"{result['no_gold_spans']} of {result['sentences']} sentences have no gold span to score (F1 1 if "
              f"the prediction has none either, else 0)", file=sys.stderr)


def run_plot(args: argparse.Namespace) -> None:
    from onlstm_tasks.data.core.tokenize import tokenize
    from onlstm_tasks.probing.loading import load_probe
    from onlstm_tasks.probing.plots import _pyplot, plot_master_gates
    from onlstm_tasks.trees.induce import tree_to_brackets

    _pyplot()  # fail before loading the model when matplotlib is missing
    words = args.sentence.split() if args.pretokenized else tokenize(args.sentence)[0]
    if not words:
        raise ValueError("--sentence has no tokens")
    probe = load_probe(args.checkpoint, args.device, trust=args.trust_checkpoint)
    layers, directions = probe.shape()
    direction = DIRECTIONS.index(args.direction)
    if direction >= directions:
        raise ValueError("--direction backward needs a bidirectional encoder; this one reads forward only")
    if not -layers <= args.layer < layers:
        raise ValueError(f"--layer must be in [-{layers}, {layers}) for this {layers}-layer encoder, got {args.layer}")
    layer = args.layer % layers
    gates = probe.master_gates(words, layer, direction)
    distances = gates.distances()
    if direction == 1:  # the backward pass marks the boundary after each token: align it as combine_directions does
        distances = backward_as_boundaries(distances)
    tree = distances_to_tree(distances.tolist())
    title = f"{Path(args.checkpoint).name}: layer {layer + 1} of {layers}, {args.direction}"
    out = plot_master_gates(words, gates.forget, gates.input, tree, args.out, title)
    print(tree_to_brackets(tree, words))
    print(f"wrote {out}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        {"eval": run_eval, "plot": run_plot}[args.command](args)
    except ModuleNotFoundError as err:
        if err.name is None or err.name.split(".")[0] != "matplotlib":
            raise
        from onlstm_tasks.probing.plots import PLOT_EXTRA_HINT

        print(f"onlstm-trees {args.command}: error: {PLOT_EXTRA_HINT}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError, ImportError) as err:
        print(f"onlstm-trees {args.command}: error: {err}", file=sys.stderr)
        return 2  # as onlstm-tasks and argparse: a user's mistake
    return 0


if __name__ == "__main__":
    sys.exit(main())
