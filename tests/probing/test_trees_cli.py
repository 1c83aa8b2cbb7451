"""``onlstm-trees``: eval (baselines with hand-computed UF1, a tiny trained NER checkpoint, OntoNotes baselines
from the shared kit) and plot."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from helpers.cli import tiny_ner_config
from helpers.shared_data import SHARED_DATA, requires_shared_data

from helpers.trees import CONLLX, T1_T2, T3

from onlstm_tasks.cli import main as tasks_main
from onlstm_tasks.probing.cli import main, read_ptb_gold, score_distances
from onlstm_tasks.trees.metrics import UF1Accumulator, baseline_uf1, gold_spans

# Scored (non-punctuation) tokens and gold spans, whole sentence and single tokens excluded:
#   T1 "The cat sat on the mat": NP (0,2), VP (2,6), PP (3,6), NP (4,6)
#      right-branching (1,6) (2,6) (3,6) (4,6): 3 of 4 -> F1 0.75;  left (0,2) (0,3) (0,4) (0,5): 1 of 4 -> 0.25
#   T2 "He tried to leave" (trace and function tags stripped): VP (1,4), S=VP (2,4)
#      right (1,4) (2,4): F1 1;  left (0,2) (0,3): F1 0
#   T3 "John runs": no gold span and no predicted span -> F1 1 for both
# sentence UF1: right (0.75 + 1 + 1) / 3 = 91.67, left (0.25 + 0 + 1) / 3 = 41.67
# corpus UF1:   right 5 matched of 6 predicted, 6 gold = 83.33;  left 1 of 6, 6 = 16.67
LINE = re.compile(r"^(?P<label>.+?)\s+sentence UF1\s+(?P<sentence>[\d.]+)\s+corpus UF1\s+(?P<corpus>[\d.]+)\s+"
                  r"\((?P<n>\d+) sentences\)$")


pytestmark = pytest.mark.usefixtures("one_thread")  # (conftest.py)


@pytest.fixture(scope="module")
def gold(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("gold")
    (folder / "a.mrg").write_text(T1_T2)
    (folder / "b.mrg").write_text(T3)
    (folder / "all.txt").write_text(T1_T2 + T3)
    return folder


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """A tiny NERTagger (2-layer bidirectional ON-LSTM) trained for two steps by ``onlstm-tasks fit``."""
    folder = tmp_path_factory.mktemp("ner")
    encoder = {"class_path": "onlstm_tasks.encoders.ONLSTM",
               "init_args": {"hidden_size": 16, "chunk_size": 4, "num_layers": 2, "bidirectional": True}}
    config = tiny_ner_config(folder, encoder=encoder, max_epochs=1, limit_train_batches=2, limit_val_batches=1)
    tasks_main(["fit", "--config", str(config)])
    path = folder / "ckpt" / "last.ckpt"
    assert path.is_file()
    return path


def run(capsys, *args: str) -> tuple[int, list[str], str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def parse(line: str) -> dict:
    m = LINE.match(line)
    assert m, f"unexpected output line {line!r}"
    return {"label": m["label"], "sentence": float(m["sentence"]), "corpus": float(m["corpus"]), "n": int(m["n"])}


# ---- baselines on hand-made trees ------------------------------------------------------------------------------


@pytest.mark.parametrize(("baseline", "sentence", "corpus"), [
    ("right-branching", 91.67, 83.33),
    ("left-branching", 41.67, 16.67),
])
@pytest.mark.parametrize("where", ["all.txt", "."])
def test_eval_baselines_on_hand_trees(capsys, gold, baseline, sentence, corpus, where) -> None:
    args = ["eval", "--gold", gold / where, "--baseline", baseline]
    code, lines, err = run(capsys, *(args + ["--glob", "*.mrg"] if where == "." else args))
    assert code == 0, err
    assert lines == [f"{baseline}  sentence UF1 {sentence:5.2f}  corpus UF1 {corpus:5.2f}  (3 sentences)"]
    assert "read 3 trees" in err


def test_eval_random_baseline_is_seeded_and_limit_applies(capsys, gold) -> None:
    first = run(capsys, "eval", "--gold", gold / "all.txt", "--baseline", "random", "--seed", 3)[1]
    assert first == run(capsys, "eval", "--gold", gold / "all.txt", "--baseline", "random", "--seed", 3)[1]
    assert 0 <= parse(first[0])["sentence"] <= 100
    code, lines, _ = run(capsys, "eval", "--gold", gold / "all.txt", "--baseline", "right-branching", "--limit", 1)
    assert code == 0 and parse(lines[0]) == {"label": "right-branching", "sentence": 75.0, "corpus": 75.0, "n": 1}


def test_gold_against_itself_and_distances_reproducing_the_baselines(gold) -> None:
    trees = read_ptb_gold(gold / "all.txt")
    assert [len(t.words()) for t in trees] == [7, 5, 3]  # with punctuation, without the trace
    acc = UF1Accumulator()
    for tree in trees:
        spans, _ = gold_spans(tree)
        acc.add(spans, spans)
    assert acc.result()["sentence_f1"] == acc.result()["corpus_f1"] == 100.0
    # decreasing distances split off the first token each time (right-branching), increasing ones the last
    for kept_input in (False, True):
        lengths = [sum(gold_spans(t)[1]) if kept_input else len(t.words()) for t in trees]
        for kind, sign in (("right", -1.0), ("left", 1.0)):
            distances = [sign * torch.arange(float(n)).view(1, 1, n) for n in lengths]
            result = score_distances(trees, distances, 1, ["forward"], kept_input)[(0, "forward")]
            assert result == baseline_uf1(trees, kind)


def test_eval_errors(capsys, gold, tmp_path) -> None:
    code, lines, err = run(capsys, "eval", "--gold", tmp_path / "missing", "--baseline", "random")
    assert code == 2 and lines == [] and "no gold tree file or directory" in err
    (tmp_path / "bad.mrg").write_text("(S (NP (DT The) (NN cat))")
    code, _, err = run(capsys, "eval", "--gold", tmp_path / "bad.mrg", "--baseline", "random")
    assert code == 2 and "bad.mrg" in err and "unbalanced brackets" in err
    code, _, err = run(capsys, "eval", "--gold", gold / "all.txt", "--baseline", "random", "--split", "test")
    assert code == 2 and "--split apply to --format ontonotes only" in err
    with pytest.raises(SystemExit):  # argparse: exactly one of --checkpoint / --baseline
        main(["eval", "--gold", str(gold / "all.txt")])


# ---- a trained checkpoint --------------------------------------------------------------------------------------


def test_eval_checkpoint_prints_one_line_per_layer_and_combination(capsys, gold, checkpoint) -> None:
    code, lines, err = run(capsys, "eval", "--gold", gold / "all.txt", "--checkpoint", checkpoint)
    assert code == 0, err
    rows = [parse(line) for line in lines]
    assert [r["label"] for r in rows] == [f"layer {layer} ({how})" for layer in (1, 2)
                                          for how in ("mean", "forward", "backward")]
    for r in rows:
        assert 0 <= r["sentence"] <= 100 and 0 <= r["corpus"] <= 100 and r["n"] == 3

    code, lines, err = run(capsys, "eval", "--gold", gold / "all.txt", "--checkpoint", checkpoint, "--combine",
                           "max,min", "--drop-punctuation", "--gate", "input", "--batch-size", 2)
    assert code == 0, err
    assert [parse(line)["label"] for line in lines] == ["layer 1 (max)", "layer 1 (min)", "layer 2 (max)",
                                                        "layer 2 (min)"]
    code, _, err = run(capsys, "eval", "--gold", gold / "all.txt", "--checkpoint", checkpoint, "--combine", "avg")
    assert code == 2 and "--combine takes" in err


def test_plot_writes_a_png(capsys, checkpoint, tmp_path) -> None:
    import matplotlib  # noqa: F401  (in the dev extra: a missing install fails here, it is never skipped)
    out = tmp_path / "plots" / "gates.png"
    code, lines, err = run(capsys, "plot", "--checkpoint", checkpoint, "--sentence",
                           "Peter Blackburn lives in Brussels.", "--layer", -1, "--direction", "backward",
                           "--out", out)
    assert code == 0, err
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    assert re.sub(r"[()]", "", lines[0]).split() == ["Peter", "Blackburn", "lives", "in", "Brussels", "."]
    code, _, err = run(capsys, "plot", "--checkpoint", checkpoint, "--sentence", "a b", "--layer", 2,
                       "--out", tmp_path / "x.png")
    assert code == 2 and "--layer must be in [-2, 2)" in err


# ---- the shared OntoNotes kit ----------------------------------------------------------------------------------


@requires_shared_data
def test_ontonotes_right_branching_baseline(capsys) -> None:
    code, lines, err = run(capsys, "eval", "--gold", SHARED_DATA / "conll2012_ontonotesv5", "--format",
                           "ontonotes", "--data-dir", "english_v12", "--split", "test", "--baseline",
                           "right-branching")
    assert code == 0, err
    row = parse(lines[0])
    assert row["n"] == 500 and "0 sentences without a parse tree skipped" in err
    assert row["sentence"] == pytest.approx(39.52, abs=0.01) and row["corpus"] == pytest.approx(32.70, abs=0.01)


def test_eval_conllx_checkpoint_prints_uas_per_layer_and_combination(capsys, checkpoint, tmp_path) -> None:

    gold = tmp_path / "gold.conllx"
    gold.write_text(CONLLX)
    code, lines, err = run(capsys, "eval", "--format", "conllx", "--gold", gold, "--checkpoint", checkpoint)
    assert code == 0, err
    labels = [line.split("  ")[0].strip() for line in lines]
    assert labels == [f"layer {layer} ({how})" for layer in (1, 2) for how in ("mean", "forward", "backward")]
    assert all("corpus UAS" in line and "(2 sentences, 5 scored tokens)" in line for line in lines)


def test_plot_without_matplotlib_says_how_to_install_it(monkeypatch, capsys):
    """A missing matplotlib anywhere under ``plot`` ends in the install line of the ``plot`` extra, exit 2."""
    from onlstm_tasks.probing import cli

    def no_matplotlib(args):
        raise ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib")

    monkeypatch.setattr(cli, "run_plot", no_matplotlib)
    code = cli.main(["plot", "--checkpoint", "x.ckpt", "--sentence", "a b", "--out", "g.png"])
    err = capsys.readouterr().err
    assert code == 2 and "pip install 'onlstm-tasks[plot]'" in err and len(err.strip().splitlines()) == 1
