"""``tree_source: {kind: lm, lm_checkpoint: [A, B], ensemble: READINGS}``: a tree ensemble over the readings of one
or several frozen language models as a task model's trees.

Oracles: an ensemble of one reading gives that reading's trees; an ensemble's trees are the greedy trees of the mean
rank-normalised distances that ``onlstm-trees`` reads off the checkpoints (the probe and
:mod:`onlstm_tasks.trees.ensemble`, the code ``onlstm-trees eval --ensemble`` scores); a task checkpoint holds every
member, so it tests and predicts with the language models' files gone.
"""

from __future__ import annotations

import json
import shutil
from functools import partial

import pytest
import torch
import yaml

from helpers.cli import tiny_ner_config
from helpers.lm import CHARS, WORDS, fit_tiny_bidirectional_lm, toy_sentences
from onlstm_tasks.cli import main
from onlstm_tasks.data.core.features import words_to_batch
from onlstm_tasks.encoders import ONLSTM, DependencyGuidedEncoder
from onlstm_tasks.encoders.base import combine_directions
from onlstm_tasks.errors import ConfigError
from onlstm_tasks.probing.loading import load_probe
from onlstm_tasks.tasks.lm_trees import LanguageModelTrees
from onlstm_tasks.tasks.ner import NERTagger
from onlstm_tasks.trees.ensemble import ensemble_distances, parse_readings
from onlstm_tasks.trees.induce import heads_tensor
from onlstm_tasks.trees.source import TreeSource

@pytest.fixture(scope="module")
def lm_paths(tmp_path_factory):
    """Two tiny bidirectional 2-layer ON-LSTM language models of different seeds."""
    return [fit_tiny_bidirectional_lm(tmp_path_factory.mktemp(f"lm{seed}"), 120, 2, seed=seed) for seed in (1, 2)]

pytestmark = pytest.mark.usefixtures("one_thread", "plain_argv")  # (conftest.py)


def lm_heads(trees: LanguageModelTrees, sentences) -> list[list[int]]:
    mask = words_to_batch(sentences, ["<pad>", "<unk>"], ["<pad>", "<unk>"]).mask
    heads = trees.heads(sentences, mask)
    return [heads[row, :len(words)].tolist() for row, words in enumerate(sentences)]


def probe_ensemble_heads(paths, sentences, spec: str) -> list[list[int]]:
    """The oracle: per reading, the probe's distances of its checkpoint, gate, layer and directions; their
    ensemble distances; the greedy tree's 0-based heads."""
    readings = parse_readings(spec)
    per_model_gate = {(m, g): load_probe(paths[m]).distances(sentences, batch_size=3, which=g)
                      for m, g in {(r.model, r.gate) for r in readings}}
    out = []
    for row, words in enumerate(sentences):
        members = [combine_directions(per_model_gate[r.model, r.gate][row], r.combination, dim=1)[r.layer]
                   for r in readings]
        d = ensemble_distances(members).float()[None]
        out.append(heads_tensor(d, torch.ones(1, len(words), dtype=torch.bool))[0].tolist())
    return out


@pytest.mark.parametrize(("reading", "fields"), [("input:l2:mean", {"distance_layer": 1, "distance_gate": "input"}),
                                                 ("m1:forget:l1:forward", {"distance_layer": 0,
                                                                           "direction_combination": "forward"})])
def test_an_ensemble_of_one_reading_equals_that_reading(lm_paths, reading, fields):
    sentences = toy_sentences(12)
    single = TreeSource("lm", lm_checkpoint=str(lm_paths[0]), **fields)
    ensemble = TreeSource("lm", lm_checkpoint=str(lm_paths[0]), ensemble=reading)
    expected = lm_heads(LanguageModelTrees.from_checkpoint(str(lm_paths[0]), single), sentences)
    assert lm_heads(LanguageModelTrees.from_checkpoint(str(lm_paths[0]), ensemble), sentences) == expected
    assert len({tuple(h) for h in expected}) > 1


def test_an_ensemble_of_two_language_models_gives_the_trees_of_its_mean_ranked_distances(lm_paths):
    sentences = toy_sentences(12)
    spec = "m1:input:l2:mean,m2:forget:l1:backward,m2:input:l2:forward"
    source = TreeSource("lm", lm_checkpoint=[str(p) for p in lm_paths], ensemble=spec)
    got = lm_heads(LanguageModelTrees.from_checkpoint(source.lm_checkpoints, source), sentences)
    assert got == probe_ensemble_heads(lm_paths, sentences, spec)
    members = [lm_heads(LanguageModelTrees.from_checkpoint(source.lm_checkpoints, TreeSource(
        "lm", lm_checkpoint=source.lm_checkpoint, ensemble=str(r))), sentences) for r in parse_readings(spec)]
    assert any(got != m for m in members)  # the ensemble is not just one of its members


@pytest.mark.slow  # an end-to-end CLI fit, test and predict
def test_a_tagger_over_an_ensemble_tests_and_predicts_with_the_lm_files_deleted(tmp_path, lm_paths):
    copies = []
    for i, path in enumerate(lm_paths):
        copy = tmp_path / "lms" / f"lm{i}.ckpt"
        copy.parent.mkdir(exist_ok=True)
        shutil.copy(path, copy)
        copies.append(str(copy))
    spec = "m1:input:l2:mean,m2:forget:l2:mean"
    encoder = {"class_path": "onlstm_tasks.encoders.DependencyGuidedEncoder",
               "init_args": {"encoder": {"class_path": "onlstm_tasks.encoders.ONLSTM",
                                         "init_args": {"hidden_size": 8, "chunk_size": 4, "bidirectional": True}},
                             "tree_source": {"kind": "lm", "lm_checkpoint": copies, "ensemble": spec}}}
    config = tiny_ner_config(tmp_path, encoder=encoder, max_epochs=1)
    main(["fit", "--config", str(config)])
    best = tmp_path / "ckpt" / "best.ckpt"
    saved = torch.load(best, weights_only=True)
    assert [c["checkpoint"] for c in json.loads(saved["hyper_parameters"]["lm_trees"])] == copies
    assert {k.split(".")[2] for k in saved["state_dict"] if k.startswith("tree_lm.models.")} == {"0", "1"}
    sentences = toy_sentences(6, seed=5)
    expected = probe_ensemble_heads(copies, sentences, spec)
    shutil.rmtree(tmp_path / "lms")
    main(["test", "--config", str(config), "--ckpt_path", str(best)])
    text = tmp_path / "input.txt"
    text.write_text("".join(" ".join(words) + "\n" for words in sentences), encoding="utf-8")
    main(["predict", "--config", str(config), "--ckpt_path", str(best), "--data.init_args.path", "null",
          "--data.init_args.predict_file", str(text), "--data.init_args.pretokenized", "true"])
    rows = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert [[i if h == 0 else h - 1 for i, h in enumerate(row["heads"])] for row in rows] == expected
    # the resolved config re-reads (the list of checkpoints survives LightningCLI's round trip)
    resolved = yaml.safe_load((tmp_path / "logs" / "version_0" / "config.yaml").read_text())
    assert resolved["model"]["init_args"]["encoder"]["init_args"]["tree_source"]["lm_checkpoint"] == copies


def test_a_checkpoint_from_before_ensembles_still_loads(lm_paths):
    """Task checkpoints written with one language model kept its weights at ``tree_lm.embedder/encoder.*``."""
    source = TreeSource("lm", lm_checkpoint=str(lm_paths[0]))
    factory = partial(DependencyGuidedEncoder, encoder=partial(ONLSTM, hidden_size=8, chunk_size=4),
                      tree_source=source)
    model = NERTagger(WORDS, CHARS, ["O", "B-X", "I-X"], encoder=factory)
    old = {(k.replace("tree_lm.models.0.", "tree_lm.") if k.startswith("tree_lm.") else k): v
           for k, v in model.state_dict().items()}
    fresh = NERTagger(WORDS, CHARS, ["O", "B-X", "I-X"], encoder=factory, lm_trees=model.tree_lm.config_json())
    for p in fresh.tree_lm.parameters():
        p.data.zero_()
    fresh.load_state_dict(old)
    for key, value in model.tree_lm.state_dict().items():
        assert torch.equal(fresh.tree_lm.state_dict()[key], value), key


def test_ensemble_settings_are_checked_when_the_model_is_built(lm_paths):
    two = [str(p) for p in lm_paths]
    with pytest.raises(ConfigError, match="needs an ensemble"):
        TreeSource("lm", lm_checkpoint=two)
    with pytest.raises(ConfigError, match="ensemble applies to tree_source kind 'lm' only"):
        TreeSource("induced", ensemble="input:l1:mean")
    for spec, message in (("m3:input:l1:mean", "names 2 language model"), ("input:layer1", "a reading is written")):
        source = TreeSource("lm", lm_checkpoint=two, ensemble=spec)
        with pytest.raises(ConfigError, match=message):
            LanguageModelTrees.from_checkpoint(source.lm_checkpoints, source)
    source = TreeSource("lm", lm_checkpoint=two, ensemble="m2:input:l5:mean")  # the LM has 2 layers
    with pytest.raises(ConfigError, match="out of range"):
        LanguageModelTrees.from_checkpoint(source.lm_checkpoints, source).distances([["the", "cat"]])
    assert TreeSource("lm", lm_checkpoint=[two[0]]).lm_checkpoint == two[0]  # a list of one is that path
