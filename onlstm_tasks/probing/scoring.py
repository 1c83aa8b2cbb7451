"""Gold constituency trees to score induced trees against, and the scoring of a model's distances per layer and
direction combination: shared by ``onlstm-trees eval`` (:mod:`onlstm_tasks.probing.cli`) and the validation-time
:class:`~onlstm_tasks.probing.tree_monitor.TreeF1Monitor`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from onlstm_tasks.encoders.base import combine_directions
from onlstm_tasks.errors import DataFormatError
from onlstm_tasks.trees.induce import distances_to_tree, tree_to_spans
from onlstm_tasks.trees.metrics import UF1Accumulator, gold_spans, prediction_spans, scored_spans
from onlstm_tasks.trees.ptb import Tree, parse_tree, read_trees


def read_ptb_gold(path: str | Path, glob: str = "**/*") -> list[Tree]:
    """Every tree of a PTB bracketed file, or of the files under a directory matching ``glob`` (sorted; hidden
    files skipped)."""
    path = Path(path)
    if path.is_file():
        return read_trees(path)
    if not path.is_dir():
        raise FileNotFoundError(f"no gold tree file or directory at {path}")
    files = sorted(f for f in path.glob(glob) if f.is_file() and not any(
        part.startswith(".") for part in f.relative_to(path).parts))
    if not files:
        raise FileNotFoundError(f"no files matching {glob!r} under {path}")
    return [tree for f in files for tree in read_trees(f)]


def read_ontonotes_gold(path: str, split: str = "test", name: str | None = None, data_dir: str | None = None,
                        revision: str | None = None) -> tuple[list[Tree], int]:
    """The parse trees of one split of a hub-schema OntoNotes dataset (document rows with ``sentences``), in
    order, and the number of sentences without one (skipped)."""
    import datasets  # heavy import, only when a dataset is read

    dataset = datasets.load_dataset(path, name=name, data_dir=data_dir, revision=revision, split=split)
    source = f"{path}{'/' + data_dir if data_dir else ''}:{split}"
    if "sentences" not in dataset.column_names:
        raise DataFormatError(source, None, f"expected the ontonotes/conll2012_ontonotesv5 schema (document rows "
                              f"with a 'sentences' column), found columns {dataset.column_names}")
    trees, skipped = [], 0
    for row_index, row in enumerate(dataset):
        for i, sentence in enumerate(row["sentences"]):
            text = sentence.get("parse_tree")
            if not text or not text.strip() or text.strip() == "-":
                skipped += 1
                continue
            trees.append(parse_tree(text, f"{source} row {row_index} ({row.get('document_id')}) sentence {i}"))
    return trees, skipped



def score_distances(
    trees: Sequence[Tree], distances: Sequence, layers: int, combinations: Sequence[str], kept_input: bool = False
) -> dict[tuple[int, str], dict]:
    """UF1 per (0-based layer, direction combination), in that order, of the greedy trees of ``distances`` (per
    sentence a ``[layers, directions, n]`` tensor) against ``trees``. With ``kept_input`` the distances cover only
    the non-punctuation tokens (None for a sentence without any: an empty prediction); otherwise all tokens."""
    accumulators = {(layer, how): UF1Accumulator() for layer in range(layers) for how in combinations}
    for tree, d in zip(trees, distances, strict=True):
        gold, keep = gold_spans(tree)
        for how in combinations:
            per_layer = None if d is None else combine_directions(d, how, dim=1)  # [layers, n]
            for layer in range(layers):
                if per_layer is None:
                    pred = set()
                elif kept_input:
                    pred = scored_spans(tree_to_spans(distances_to_tree(per_layer[layer].tolist())), per_layer.size(1))
                else:
                    pred = prediction_spans(distances_to_tree(per_layer[layer].tolist()), keep)
                accumulators[(layer, how)].add(pred, gold)
    return {key: acc.result() for key, acc in accumulators.items()}


def format_line(label: str, result: dict, width: int = 0) -> str:
    return (f"{label:<{width}}  sentence UF1 {result['sentence_f1']:5.2f}  corpus UF1 {result['corpus_f1']:5.2f}  "
            f"({result['sentences']} sentences)")


