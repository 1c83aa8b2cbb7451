"""Gold trees to score induced trees against (PTB files, OntoNotes-schema datasets, CoNLL-X/U dependency heads), and
the scoring of a model's distances per layer and direction combination (UF1 of trees, UAS of heads): shared by
``onlstm-trees eval`` (:mod:`onlstm_tasks.probing.cli`) and the validation-time
:class:`~onlstm_tasks.probing.tree_monitor.TreeF1Monitor`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from onlstm_tasks.encoders.base import combine_directions
from onlstm_tasks.errors import DataFormatError
from onlstm_tasks.trees.ensemble import Reading, mean_of_normalised, rank_normalise
from onlstm_tasks.trees.induce import distances_to_heads, distances_to_tree, tree_to_spans
from onlstm_tasks.trees.metrics import (
    DEPENDENCY_PUNCTUATION,
    UASAccumulator,
    UF1Accumulator,
    gold_spans,
    prediction_spans,
    scored_spans,
)
from onlstm_tasks.trees.ptb import Tree, parse_tree, read_trees

# ---------------------------------------------------------------------------------------------------- gold trees


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


def read_conll_dependencies(path: str | Path) -> list[tuple[list[str], list[str], list[int]]]:
    """``(words, UPOS tags, 1-based heads)`` per sentence of a CoNLL-X/U file (10 or more tab-separated columns:
    ID FORM LEMMA UPOS XPOS FEATS HEAD ...; comment, multiword-token and empty-node lines skipped)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no CoNLL-X/U gold file at {path}")
    sentences, rows = [], []
    lines = path.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate([*lines, ""], start=1):
        line = line.rstrip("\n")
        if not line.strip():
            if rows:
                sentences.append(([r[1] for r in rows], [r[3] for r in rows], [int(r[6]) for r in rows]))
                rows = []
            continue
        if line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) < 7:
            raise DataFormatError(str(path), number, f"expected at least 7 tab-separated columns (ID FORM LEMMA UPOS "
                                  f"XPOS FEATS HEAD ...), found {len(cols)}")
        if "-" in cols[0] or "." in cols[0]:
            continue
        if not cols[6].isdigit() or cols[0] != str(len(rows) + 1):
            raise DataFormatError(str(path), number, f"expected token ID {len(rows) + 1} and an integer HEAD, "
                                  f"found {cols[0]!r} and {cols[6]!r}")
        rows.append(cols)
    for words, _, heads in sentences:
        if any(h > len(words) for h in heads):
            raise DataFormatError(str(path), None, f"a HEAD beyond its sentence's {len(words)} words in {words[:6]}")
    return sentences


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


class EnsembleScorer:
    """UF1 of ensembles of readings (:mod:`onlstm_tasks.trees.ensemble`) against ``trees``.

    ``tables[(model, gate)]`` holds per sentence the ``[layers, directions, n]`` distances of that model's master
    gate (None for a sentence without input, as in :func:`score_distances`); each reading's rank-normalised distances
    are computed once, so scoring many candidate ensembles (:func:`~onlstm_tasks.trees.ensemble.choose_members`)
    costs one greedy tree per sentence and ensemble."""

    def __init__(self, trees: Sequence[Tree], tables: dict[tuple[int, str], Sequence], kept_input: bool = False):
        self.trees, self.tables, self.kept_input = list(trees), tables, kept_input
        self._gold = [gold_spans(tree) for tree in self.trees]
        self._normalised: dict[Reading, list] = {}

    def check(self, reading: Reading) -> None:
        """A ValueError naming what the models offer when ``reading`` asks for something they do not have."""
        models = sorted({model for model, _ in self.tables})
        if (reading.model, reading.gate) not in self.tables:
            raise ValueError(f"reading {reading}: no model {reading.model + 1} with the {reading.gate} gate (models "
                             f"1..{len(models)})")
        sample = next((d for d in self.tables[(reading.model, reading.gate)] if d is not None), None)
        if sample is not None:
            layers, directions = sample.shape[:2]
            if reading.layer >= layers:
                raise ValueError(f"reading {reading}: model {reading.model + 1} has {layers} layers")
            if reading.combination == "backward" and directions < 2:
                raise ValueError(f"reading {reading}: model {reading.model + 1} reads forward only")

    def normalised(self, reading: Reading) -> list:
        if reading not in self._normalised:
            self.check(reading)
            self._normalised[reading] = [
                None if d is None else rank_normalise(combine_directions(d, reading.combination, dim=1)[reading.layer])
                for d in self.tables[(reading.model, reading.gate)]]
        return self._normalised[reading]

    def score(self, members: Sequence[Reading]) -> dict:
        """The UF1 result (as :func:`score_distances` gives it) of the ensemble of ``members``."""
        columns = [self.normalised(m) for m in members]
        acc = UF1Accumulator()
        for i, (gold, keep) in enumerate(self._gold):
            parts = [column[i] for column in columns]
            if parts[0] is None:
                pred = set()
            else:
                tree = distances_to_tree(mean_of_normalised(parts).tolist())
                pred = scored_spans(tree_to_spans(tree), len(parts[0])) if self.kept_input else \
                    prediction_spans(tree, keep)
            acc.add(pred, gold)
        return acc.result()


def score_heads(
    sentences: Sequence[tuple[list[str], list[str], list[int]]], distances: Sequence, layers: int,
    combinations: Sequence[str],
) -> dict[tuple[int, str], dict]:
    """UAS per (0-based layer, direction combination) of the heads of the greedy trees of ``distances`` (per
    sentence ``[layers, directions, n]`` over all its words) against ``sentences``' gold heads, punctuation not
    scored."""
    accumulators = {(layer, how): UASAccumulator() for layer in range(layers) for how in combinations}
    for (_, tags, gold), d in zip(sentences, distances, strict=True):
        keep = [tag not in DEPENDENCY_PUNCTUATION for tag in tags]
        for how in combinations:
            per_layer = combine_directions(d, how, dim=1)  # [layers, n]
            for layer in range(layers):
                accumulators[(layer, how)].add(distances_to_heads(per_layer[layer].tolist()), gold, keep)
    return {key: acc.result() for key, acc in accumulators.items()}


def format_uas_line(label: str, result: dict, width: int = 0) -> str:
    return (f"{label:<{width}}  sentence UAS {result['sentence_uas']:5.2f}  corpus UAS {result['corpus_uas']:5.2f}  "
            f"({result['sentences']} sentences, {result['tokens']} scored tokens)")


def format_line(label: str, result: dict, width: int = 0) -> str:
    return (f"{label:<{width}}  sentence UF1 {result['sentence_f1']:5.2f}  corpus UF1 {result['corpus_f1']:5.2f}  "
            f"({result['sentences']} sentences)")
