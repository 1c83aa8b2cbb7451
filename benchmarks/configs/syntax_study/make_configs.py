"""Writes issue 36's study configs (this folder) from the shipped configs they extend, so each differs from its base
only where its comment says. Run from the repository root: ``python benchmarks/configs/syntax_study/make_configs.py``.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import yaml

OUT = Path(__file__).parent
LM = "runs/lm_bi_seeds/seed{}/lightning_logs/version_0/checkpoints/{}.ckpt"  # benchmarks/results/lm_unlabelled_en_bi_seeds.md
VECTORS = "vectors/unlabelled_en.w2v.100d.txt"  # scripts/train_vectors.py, as configs/ner/ontonotes_onlstm_crf_vectors.yaml says
# the best single reading and the ensemble chosen on the OntoNotes kit's validation trees, as that table's JSON holds them
TREES = Path("benchmarks/results/lm_unlabelled_en_bi_seeds.json")
READING = re.compile(r"^m(\d+):(forget|input):l(\d+):(\w+)$")


def chosen_sources() -> tuple[dict, dict, str, str]:
    """The ``tree_source`` of the best single reading and of the ensemble that ``scripts/lm_trees_study.py`` chose
    on validation over the seeds of the bidirectional LM, and a description of each for the configs' comments."""
    study = json.loads(TREES.read_text())["ensembles"]["ON-LSTM_bi"]
    seeds = [int(re.search(r"seed_?(\d+)", path).group(1)) for path in study["checkpoints"]]
    single, ensemble = study["best single reading"]["readings"], study["ensemble"]["readings"]
    model, gate, layer, how = READING.match(single[0]).groups()
    seed = seeds[int(model) - 1]
    single_source = {"kind": "lm", "lm_checkpoint": LM.format(seed, "best_uf1"), "distance_layer": int(layer) - 1,
                     "distance_gate": gate, "direction_combination": how}
    used = sorted({int(READING.match(r).group(1)) for r in ensemble})  # the models the ensemble reads, renumbered
    members = [READING.sub(lambda m: f"m{used.index(int(m.group(1))) + 1}:{m.group(2)}:l{m.group(3)}:{m.group(4)}", r)
               for r in ensemble]
    ensemble_source = {"kind": "lm", "lm_checkpoint": [LM.format(seeds[m - 1], "best_uf1") for m in used],
                       "ensemble": ",".join(members)}
    described = f"seed {seed}'s best_uf1 checkpoint, {gate} gate, layer {layer}, {how}"
    over = ", ".join(str(seeds[m - 1]) for m in used)
    return single_source, ensemble_source, described, f"{','.join(members)} over seeds {over}"


SINGLE, ENSEMBLE, SINGLE_TEXT, ENSEMBLE_TEXT = chosen_sources()


def load(path: str) -> dict:
    return yaml.safe_load(Path(path).read_text())


def write(name: str, config: dict, comment: str) -> None:
    text = "".join(f"# {line}\n" for line in comment.strip().splitlines())
    (OUT / name).write_text(text + yaml.safe_dump(config, sort_keys=False, width=120))


def run_dir(config: dict, folder: str) -> None:
    config["trainer"]["default_root_dir"] = config["trainer"]["logger"]["init_args"]["save_dir"] = folder


def uner() -> None:
    for kind, tree in (("none", "none"), ("gold", "gold"), ("lm", SINGLE), ("ensemble", ENSEMBLE)):
        config = load(f"configs/ner/uner_onlstm_crf_dg_{'none' if kind == 'none' else 'gold'}.yaml")
        config["model"]["init_args"]["embedder"]["init_args"].update({"pretrained": VECTORS, "fine_tune": "all"})
        config["model"]["init_args"]["encoder"]["init_args"]["tree_source"] = tree
        config["model"]["init_args"]["optimizer"]["init_args"]["fused"] = True
        config["data"]["init_args"].update({"vectors": VECTORS, "vectors_max_words": 100000})
        run_dir(config, f"runs/syntax_study/uner_{kind}")
        write(f"uner_dg_vectors_{kind}.yaml", config, f"""
Issue 36's study: configs/ner/uner_onlstm_crf_dg_none.yaml (dependency-guided ON-LSTM-CRF, MLP interaction, 2 stages)
plus the vectors recipe of configs/ner/ontonotes_onlstm_crf_vectors.yaml (word2vec vectors, fine_tune all, the first
100,000 vector words in the vocabulary, fused Adam), with tree_source {kind}. LM trees come from the bidirectional LMs
of benchmarks/results/lm_unlabelled_en_bi_seeds.md: the best single reading chosen on the OntoNotes kit's validation
trees ({SINGLE_TEXT})
or the ensemble chosen there ({ENSEMBLE_TEXT}).
Written by make_configs.py in this folder.""")


def ontonotes() -> None:
    features = load("configs/ner/ontonotes_onlstm_crf_vectors.yaml")
    features["model"]["init_args"]["lm_features"] = LM.format(1, "best")
    run_dir(features, "runs/syntax_study/ontonotes")
    write("ontonotes_vectors_lm_features.yaml", features, """
Issue 36's study: configs/ner/ontonotes_onlstm_crf_vectors.yaml plus LM features (the scalar mix of a frozen
bidirectional ON-LSTM LM's layers: seed 1's best-perplexity checkpoint of benchmarks/results/lm_unlabelled_en_bi_seeds.md).
Written by make_configs.py in this folder.""")
    trees = copy.deepcopy(features)
    inner = trees["model"]["init_args"]["encoder"]
    trees["model"]["init_args"]["encoder"] = {
        "class_path": "onlstm_tasks.encoders.DependencyGuidedEncoder",
        "init_args": {"encoder": inner, "interaction": {"class_path": "onlstm_tasks.interaction.MLPInteraction"},
                      "num_stages": 2, "tree_source": SINGLE}}
    no_features = copy.deepcopy(trees)
    del no_features["model"]["init_args"]["lm_features"]
    write("ontonotes_vectors_lm_trees.yaml", no_features, f"""
Issue 36's study: configs/ner/ontonotes_onlstm_crf_vectors.yaml with the encoder made dependency-guided (MLP
interaction, 2 stages, as configs/ner/uner_onlstm_crf_dg_lm.yaml) over the LM's trees: the best single reading chosen
on the kit's validation trees ({SINGLE_TEXT}). Without LM features:
with them (ontonotes_vectors_lm_features_lm_trees.yaml) the dependency-guided tagger did not leave the all-O plateau
(benchmarks/results/ontonotes_syntax_on_vectors.md). Written by make_configs.py in this folder.""")
    gold = copy.deepcopy(no_features)
    gold["model"]["init_args"]["encoder"]["init_args"]["tree_source"] = "gold"
    write("ontonotes_vectors_gold_trees.yaml", gold, """
Issue 36's study: ontonotes_vectors_lm_trees.yaml over the gold trees instead (dependency heads from the kit's
constituency parses): how far the LM's trees are from gold ones. Written by make_configs.py in this folder.""")
    none = copy.deepcopy(no_features)
    none["model"]["init_args"]["encoder"]["init_args"]["tree_source"] = "none"
    write("ontonotes_vectors_dg_no_tree.yaml", none, """
Issue 36's study: ontonotes_vectors_lm_trees.yaml without a tree (tree_source none: the interaction reads each
token's own state), the control that separates the trees from the dependency-guided architecture. Written by
make_configs.py in this folder.""")
    write("ontonotes_vectors_lm_features_lm_trees.yaml", trees, f"""
Issue 36's study: ontonotes_vectors_lm_features.yaml with the encoder made dependency-guided (MLP interaction, 2
stages, as configs/ner/uner_onlstm_crf_dg_lm.yaml) over the LM's trees: the best single reading chosen on the kit's
validation trees ({SINGLE_TEXT}). Written by make_configs.py in this
folder.""")


def laptops() -> None:
    config = load("configs/absa/semeval14_laptops_onlstm_td_vectors.yaml")
    head = load("configs/absa/semeval14_laptops_onlstm_tree_lm.yaml")["model"]["init_args"]["head"]
    head["init_args"]["tree_source"] = SINGLE
    config["model"]["init_args"]["head"] = head
    run_dir(config, "runs/syntax_study/laptops")
    gold = copy.deepcopy(config)
    gold["model"]["init_args"]["head"]["init_args"]["tree_source"] = "gold"
    write("laptops_tree_vectors_gold.yaml", gold, """
Issue 36's study: laptops_tree_vectors_lm.yaml over the parser's trees (data.parses: the SemEval *_depparsed.json
files, given on the command line) instead of the LM's. Written by make_configs.py in this folder.""")
    write("laptops_tree_vectors_lm.yaml", config, f"""
Issue 36's study: configs/absa/semeval14_laptops_onlstm_td_vectors.yaml (the vectors recipe) with the tree-aware head
of configs/absa/semeval14_laptops_onlstm_tree_lm.yaml (bidirectional ON-LSTM, GCN over the tree, 2 layers,
mean pooling, position weighting) over the LM's trees: the best single reading chosen on the OntoNotes kit's
validation trees ({SINGLE_TEXT}). Written by make_configs.py in this
folder.""")


if __name__ == "__main__":
    uner()
    ontonotes()
    laptops()
