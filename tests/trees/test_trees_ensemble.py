"""Tree ensembles (issue 36): rank normalisation, an ensemble of one reading equals that reading, greedy member
choice, and ``onlstm-trees eval --ensemble / --choose-ensemble`` on a tiny checkpoint."""

from __future__ import annotations

import random
import re

import pytest
import torch

from helpers.paths import FIXTURES
from onlstm_tasks.trees.ensemble import (
    Reading,
    choose_members,
    ensemble_distances,
    parse_readings,
    rank_normalise,
)
from onlstm_tasks.probing.cli import main
from onlstm_tasks.trees.induce import distances_to_tree
from helpers.trees import T1_T2, T3  # the hand-scored gold trees

CKPT = FIXTURES / "pre_move_checkpoints" / "ner_onlstm.ckpt"  # a bidirectional ON-LSTM


def test_rank_normalise_scales_ranks_to_unit_and_shares_ties():
    got = rank_normalise(torch.tensor([0.1, 0.5, 0.5, 0.2, 0.9]))
    assert got.tolist() == pytest.approx([0.0, 2.5 / 4, 2.5 / 4, 1 / 4, 1.0])
    assert rank_normalise(torch.tensor([3.0])).tolist() == [0.0]
    with pytest.raises(ValueError, match="non-empty 1-D"):
        rank_normalise(torch.tensor([]))


def test_an_ensemble_of_one_reading_builds_that_readings_trees():
    rng = random.Random(0)
    for _ in range(300):
        n = rng.randint(1, 25)
        values = torch.tensor([rng.choice([0.0, 0.25, 0.5, rng.random()]) for _ in range(n)])  # many ties
        assert distances_to_tree(ensemble_distances([values]).tolist()) == distances_to_tree(values.tolist())


def test_an_ensemble_averages_ranks_not_scales():
    small = torch.tensor([0.01, 0.03, 0.02])  # an input-gate-like scale
    large = torch.tensor([0.9, 0.1, 0.5])
    assert ensemble_distances([small, large]).tolist() == pytest.approx([0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="different lengths"):
        ensemble_distances([small, torch.tensor([1.0, 2.0])])


def test_greedy_choice_adds_members_while_the_score_rises():
    gain = {"a": 3, "b": 2, "c": 2, "d": -1}
    score = lambda members: sum(gain[m] for m in members) - (2 if {"b", "c"} <= set(members) else 0)  # noqa: E731
    assert choose_members(list(gain), score) == ["a", "b"]  # c adds 0 after b: not taken; d lowers the score
    assert choose_members(list(gain), score, max_members=1) == ["a"]


def test_readings_are_written_as_onlstm_trees_prints_them():
    assert parse_readings("input:l2:mean, m2:forget:l1:forward,input:l2:mean") == [
        Reading(0, "input", 1, "mean"), Reading(1, "forget", 0, "forward")]
    assert str(Reading(1, "forget", 0, "forward")) == "m2:forget:l1:forward"
    for bad in ("input:2:mean", "m0:input:l1:mean", "input:l0:mean", "output:l1:mean", "input:l1:sum"):
        with pytest.raises(ValueError):
            parse_readings(bad)


# ---- onlstm-trees eval --------------------------------------------------------------------------------------------
LINE = re.compile(r"^(?P<label>.+?)\s+sentence UF1\s+(?P<sentence>[\d.]+)\s+corpus UF1\s+(?P<corpus>[\d.]+)")


def _lines(capsys) -> dict[str, tuple[float, float]]:
    out = capsys.readouterr().out.splitlines()
    return {m["label"]: (float(m["sentence"]), float(m["corpus"])) for m in map(LINE.match, out) if m}


def test_eval_ensemble_of_one_reading_prints_that_readings_uf1(capsys, tmp_path):
    gold = tmp_path / "gold.mrg"
    gold.write_text(T1_T2 + T3)
    assert main(["eval", "--gold", str(gold), "--checkpoint", str(CKPT), "--gate", "input"]) == 0
    single = _lines(capsys)
    assert main(["eval", "--gold", str(gold), "--checkpoint", str(CKPT), "--ensemble", "input:l1:backward"]) == 0
    assert _lines(capsys)["ensemble m1:input:l1:backward"] == single["layer 1 (backward)"]
    # two models (the same checkpoint twice): the choice's first member is the best single reading
    assert main(["eval", "--gold", str(gold), "--checkpoint", str(CKPT), "--checkpoint", str(CKPT),
                 "--choose-ensemble"]) == 0
    chosen = _lines(capsys)
    best = next(label for label in chosen if label.startswith("best single reading"))
    ensemble = next(label for label in chosen if label.startswith("ensemble chosen here"))
    assert ensemble.split()[-1].split(",")[0] == best.split()[-1]
    assert chosen[ensemble][0] > chosen[best][0] or ensemble.split()[-1] == best.split()[-1]
    assert main(["eval", "--gold", str(gold), "--checkpoint", str(CKPT), "--ensemble", "m2:input:l1:mean"]) == 2
    assert "no model 2" in capsys.readouterr().err
