"""Writes issue 36's study configs (this folder) from the shipped configs they extend, so each differs from its base
only where its comment says. Run from the repository root: ``python benchmarks/configs/syntax_study/make_configs.py``.
"""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

OUT = Path(__file__).parent
LM = "runs/lm_bi_seeds/seed{}/lightning_logs/version_0/checkpoints/{}.ckpt"  # benchmarks/results/lm_unlabelled_en_bi_seeds.md
VECTORS = "vectors/unlabelled_en.w2v.100d.txt"  # scripts/train_vectors.py, as configs/ner/ontonotes_onlstm_crf_vectors.yaml says
# the best single reading and the ensemble chosen on the OntoNotes kit's validation trees (lm_unlabelled_en_bi_seeds.md)
SINGLE = {"kind": "lm", "lm_checkpoint": LM.format(1, "best_uf1"), "distance_layer": 2, "distance_gate": "input",
          "direction_combination": "forward"}
ENSEMBLE = {"kind": "lm", "lm_checkpoint": [LM.format(1, "best_uf1"), LM.format(2, "best_uf1")],
            "ensemble": "m1:input:l3:forward,m2:input:l2:mean"}


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
trees (seed 1, input gate, layer 3, forward) or the ensemble chosen there (m1:input:l3:forward,m2:input:l2:mean over
seeds 1 and 2). Written by make_configs.py in this folder.""")


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
    write("ontonotes_vectors_lm_trees.yaml", no_features, """
Issue 36's study: configs/ner/ontonotes_onlstm_crf_vectors.yaml with the encoder made dependency-guided (MLP
interaction, 2 stages, as configs/ner/uner_onlstm_crf_dg_lm.yaml) over the LM's trees: the best single reading chosen
on the kit's validation trees (seed 1's best_uf1 checkpoint, input gate, layer 3, forward). Without LM features:
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
    write("ontonotes_vectors_lm_features_lm_trees.yaml", trees, """
Issue 36's study: ontonotes_vectors_lm_features.yaml with the encoder made dependency-guided (MLP interaction, 2
stages, as configs/ner/uner_onlstm_crf_dg_lm.yaml) over the LM's trees: the best single reading chosen on the kit's
validation trees (seed 1's best_uf1 checkpoint, input gate, layer 3, forward). Written by make_configs.py in this
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
    write("laptops_tree_vectors_lm.yaml", config, """
Issue 36's study: configs/absa/semeval14_laptops_onlstm_td_vectors.yaml (the vectors recipe) with the tree-aware head
of configs/absa/semeval14_laptops_onlstm_tree_lm.yaml (bidirectional ON-LSTM, GCN over the tree, 2 layers,
mean pooling, position weighting) over the LM's trees: the best single reading chosen on the OntoNotes kit's
validation trees (seed 1's best_uf1 checkpoint, input gate, layer 3, forward). Written by make_configs.py in this
folder.""")


if __name__ == "__main__":
    uner()
    ontonotes()
    laptops()
