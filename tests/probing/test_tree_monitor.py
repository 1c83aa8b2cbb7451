"""TreeF1Monitor: the UF1 it logs at each validation is what ``onlstm-trees eval`` prints for the same weights, and a
checkpoint can be kept on it."""

from __future__ import annotations

import csv
import re

import pytest
import torch
import yaml

from helpers.lm import text_data, tiny_lm_config, write_toy_corpus
from onlstm_tasks.cli import main
from onlstm_tasks.probing.cli import main as trees_main
from onlstm_tasks.probing.tree_monitor import TreeF1Monitor
from onlstm_tasks.tasks.loading import load_task_model

GOLD = ("(S (NP (DT the) (NN cat)) (VP (VBD saw) (NP (DT a) (NN dog))) (. .))\n"
        "(S (NP (DT a) (JJ small) (NN bird)) (VP (VBD liked) (NP (DT the) (NN river))))\n"
        "(S (NP (DT the) (NN farmer)) (VP (VBD found) (NP (DT a) (JJ green) (NN letter)) (PP (IN by) "
        "(NP (DT the) (NN river)))) (. .))\n")


pytestmark = pytest.mark.usefixtures("one_thread")  # (conftest.py)


@pytest.fixture(scope="module")
def monitored_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("monitored")
    corpus = write_toy_corpus(folder / "data", {"train": 120, "validation": 20, "test": 20})
    gold = folder / "gold.txt"
    gold.write_text(GOLD)
    path = tiny_lm_config(folder, text_data(corpus), model={"bidirectional": True}, max_epochs=2,
                          limit_train_batches=1.0)
    config = yaml.safe_load(path.read_text())
    config["trainer"]["callbacks"] += [
        {"class_path": "onlstm_tasks.probing.tree_monitor.TreeF1Monitor",
         "init_args": {"gold": str(gold), "format": "ptb"}},
        {"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
         "init_args": {"dirpath": str(folder / "ckpt"), "monitor": "val_uf1", "mode": "max",
                       "filename": "best_uf1", "save_last": False}},
    ]
    path.write_text(yaml.safe_dump(config))
    main(["fit", "--config", str(path), "--test_after_fit", "false"])
    return folder, gold


def logged(folder) -> list[dict]:
    (metrics,) = (folder / "logs").rglob("metrics.csv")
    return [row for row in csv.DictReader(metrics.open()) if row.get("val_uf1")]


def test_every_validation_logs_each_layer_gate_and_combination_and_their_best(monitored_run):
    folder, _ = monitored_run
    rows = logged(folder)
    assert len(rows) == 2  # one per epoch, none for the sanity check
    names = {f"val_uf1_{g}_l{layer}_{how}" for g in ("forget", "input") for layer in (1, 2)
             for how in ("mean", "forward", "backward")}
    for row in rows:
        assert names <= set(row)
        assert float(row["val_uf1"]) == pytest.approx(max(float(row[n]) for n in names))
    assert (folder / "ckpt" / "best_uf1.ckpt").exists()


def test_the_logged_scores_are_those_onlstm_trees_prints_for_the_checkpoint(monitored_run, capsys):
    folder, gold = monitored_run
    checkpoint = folder / "ckpt" / "last.ckpt"
    saved = torch.load(checkpoint, weights_only=True)
    model = load_task_model(checkpoint)
    scores = TreeF1Monitor(str(gold), format="ptb").scores(model, saved.get("datamodule_hyper_parameters"))
    assert float(logged(folder)[-1]["val_uf1"]) == pytest.approx(scores["val_uf1"], abs=1e-4)
    for gate in ("forget", "input"):
        capsys.readouterr()
        assert trees_main(["eval", "--gold", str(gold), "--checkpoint", str(checkpoint), "--gate", gate]) == 0
        for line in capsys.readouterr().out.splitlines():
            match = re.match(r"layer (\d) \((\w+)\)\s+sentence UF1\s+([\d.]+)", line)
            if match:
                layer, how, value = match.groups()
                assert scores[f"val_uf1_{gate}_l{layer}_{how}"] == pytest.approx(float(value), abs=0.006)


def test_bad_arguments_are_refused_at_construction(tmp_path):
    with pytest.raises(ValueError, match="gates"):
        TreeF1Monitor("gold.txt", gates=["output"])
    with pytest.raises(ValueError, match="format"):
        TreeF1Monitor("gold.txt", format="conllx")
    with pytest.raises(ValueError, match="limit"):
        TreeF1Monitor("gold.txt", limit=0)
    with pytest.raises(FileNotFoundError):
        TreeF1Monitor(str(tmp_path / "missing.txt"), format="ptb").setup(None, None, "fit")
