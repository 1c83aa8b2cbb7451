"""``tree_source: lm``: trees from a frozen pretrained language model for the tree-reading encoders and heads.

The language model is a tiny bidirectional ON-LSTM fitted a few steps by ``onlstm-tasks fit`` on the toy corpus. Its
trees must equal those ``onlstm-trees`` induces from the checkpoint (the probe), it must stay frozen (no gradient,
eval mode, out of the optimiser), and a task checkpoint must test and predict with the language model's file gone.
"""

from __future__ import annotations

import json
import shutil
from functools import partial

import pytest
import torch
import yaml

from helpers.cli import tiny_absa_config, tiny_ner_config
from helpers.lm import CHARS, WORDS, fit_tiny_bidirectional_lm, toy_sentences
from onlstm_tasks import load
from onlstm_tasks.cli import main
from onlstm_tasks.data.core.features import words_to_batch
from onlstm_tasks.encoders import LSTM, ONLSTM, ChildSumTreeLSTM, DependencyGuidedEncoder
from onlstm_tasks.encoders.base import combine_directions
from onlstm_tasks.errors import CheckpointError, ConfigError
from onlstm_tasks.modules.tree_aspect_head import TreeAwareAspectHead
from onlstm_tasks.probing.loading import load_probe
from onlstm_tasks.probing.probe import EncoderProbe
from onlstm_tasks.sample_data import sample_path
from onlstm_tasks.tasks.absa import AspectSentimentClassifier
from onlstm_tasks.tasks.lm_trees import LanguageModelTrees
from onlstm_tasks.tasks.ner import NERTagger
from onlstm_tasks.trees.induce import distances_to_heads
from onlstm_tasks.trees.source import TreeSource


pytestmark = pytest.mark.usefixtures("one_thread", "plain_argv")  # (conftest.py)


@pytest.fixture(scope="module")
def lm_path(tmp_path_factory):
    """A bidirectional 2-layer ON-LSTM language model fitted on the toy corpus (its best checkpoint)."""
    return fit_tiny_bidirectional_lm(tmp_path_factory.mktemp("lm"), 120, 2)


def heads_1based(heads: list[int]) -> list[int]:
    return [0 if h == i else h + 1 for i, h in enumerate(heads)]


def probe_heads(path, sentences, layer: int, how: str, gate: str = "forget") -> list[list[int]]:
    """0-based heads (root -> itself) of the trees ``onlstm-trees`` induces from the checkpoint."""
    distances = load_probe(path).distances(sentences, batch_size=3, which=gate)
    out = []
    for d in distances:
        heads = distances_to_heads(combine_directions(d, how, dim=1)[layer].tolist())
        out.append([i if h == 0 else h - 1 for i, h in enumerate(heads)])
    return out


@pytest.mark.parametrize(("layer", "how", "gate"), [(-1, "mean", "forget"), (0, "forward", "forget"),
                                                    (1, "backward", "forget"), (0, "mean", "input")])
def test_lm_heads_equal_those_the_probe_induces_from_the_checkpoint(lm_path, layer, how, gate):
    sentences = toy_sentences(12)
    source = TreeSource("lm", distance_layer=layer, direction_combination=how, lm_checkpoint=str(lm_path),
                        distance_gate=gate)
    trees = LanguageModelTrees.from_checkpoint(str(lm_path), source)
    mask = words_to_batch(sentences, ["<pad>", "<unk>"], ["<pad>", "<unk>"]).mask
    heads = trees.heads(sentences, mask)
    expected = probe_heads(lm_path, sentences, layer, how, gate)
    if gate != "forget":  # the other gate gives other trees: the field is read, not ignored
        assert expected != probe_heads(lm_path, sentences, layer, how)
    got = [heads[row, : len(words)].tolist() for row, words in enumerate(sentences)]
    assert got == expected
    assert len({tuple(h) for h in got}) > 1  # not a degenerate tree for every sentence
    assert (heads[mask.logical_not()] == torch.arange(mask.size(1)).expand_as(mask)[mask.logical_not()]).all()
    assert trees.heads(sentences[::-1], mask.flip(0)).flip(0)[mask].tolist() == heads[mask].tolist()  # cached


def test_the_distance_cache_is_bounded_and_evicting_changes_no_tree(lm_path, monkeypatch):
    sentences = toy_sentences(10)
    source = TreeSource("lm", lm_checkpoint=str(lm_path))
    unbounded = LanguageModelTrees.from_checkpoint(str(lm_path), source).distances(sentences)
    trees = LanguageModelTrees.from_checkpoint(str(lm_path), source)
    monkeypatch.setattr(trees, "cache_sentences", 4)
    for start in range(0, 10, 3):  # batches of 5 (more than the bound: all of them are returned) and 3
        got = trees.distances(sentences[start:start + 3] + sentences[:2])
        for a, b in zip(got, unbounded[start:start + 3] + unbounded[:2], strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-6)  # other batches: the same up to rounding
        assert len(trees._cache) <= 4
    assert list(trees._cache) == [tuple(sentences[i]) for i in (8, 0, 1, 9)]  # the newest four, oldest first


def test_a_language_model_without_distances_is_named_in_one_line(lm_path):
    trees = LanguageModelTrees.from_checkpoint(str(lm_path), TreeSource("lm", lm_checkpoint=str(lm_path)))
    onlstm = trees.models[0].encoder
    trees.models[0].encoder = LSTM(onlstm.input_size, 4, bidirectional=True)  # an encoder without master gates
    with pytest.raises(ConfigError, match=r"has a LSTM encoder, which gives no syntactic distances; train"):
        trees.distances(toy_sentences(2))


def ner_model(lm_path, encoder_factory) -> NERTagger:
    return NERTagger(WORDS, CHARS, ["O", "B-X", "I-X"], encoder=encoder_factory)


def lm_source(lm_path, **fields) -> TreeSource:
    return TreeSource("lm", lm_checkpoint=str(lm_path), **fields)


def tagged_batch():
    sentences = [["the", "cat", "saw", "a", "dog", "."], ["a", "dog", "saw", "the", "bird"]]
    tokens = words_to_batch(sentences, WORDS, CHARS)
    tags = torch.zeros(tokens.mask.shape, dtype=torch.long)
    tags[0, 1], tags[1, 1] = 1, 1
    return tokens, tags


@pytest.mark.parametrize("kind", ["dependency_guided", "tree_lstm"])
def test_no_gradient_reaches_the_lm_and_an_optimiser_step_leaves_it_unchanged(lm_path, kind):
    inner = partial(ONLSTM, hidden_size=8, chunk_size=4, bidirectional=True)
    if kind == "dependency_guided":
        factory = partial(DependencyGuidedEncoder, encoder=inner, tree_source=lm_source(lm_path))
    else:
        factory = partial(ChildSumTreeLSTM, hidden_size=8, encoder=inner, tree_source=lm_source(lm_path))
    model = ner_model(lm_path, factory)
    lm_params = dict(model.tree_lm.named_parameters())
    assert lm_params and not any(p.requires_grad for p in lm_params.values())
    before = {k: v.detach().clone() for k, v in lm_params.items()}
    model.train()
    assert not model.tree_lm.training and not any(m.training for m in model.tree_lm.modules())
    assert model.net.training
    optimizer = model.configure_optimizers()
    in_optimizer = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert not in_optimizer & {id(p) for p in lm_params.values()}
    tokens, tags = tagged_batch()
    heads = model.tree_lm.heads(tokens.words, tokens.mask)
    loss = model.net.loss(tokens, tags, heads)
    loss.backward()
    assert all(p.grad is None for p in lm_params.values())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.net.parameters())
    optimizer.step()
    for key, value in lm_params.items():
        assert torch.equal(value, before[key]), key
    # the encoder read the language model's tree
    encoded = model.net.encoder(model.net.embedder(tokens), tokens.mask, heads)
    assert torch.equal(encoded.heads[0], heads)


def test_the_tree_aware_aspect_head_reads_the_lm_heads(lm_path):
    head = partial(TreeAwareAspectHead, encoder=partial(ONLSTM, hidden_size=8, chunk_size=4),
                   tree_source=lm_source(lm_path, distance_layer=0))
    model = AspectSentimentClassifier(WORDS, CHARS, ["neg", "pos"], head=head)
    tokens, _ = tagged_batch()
    aspect = torch.zeros(tokens.mask.shape, dtype=torch.bool)
    aspect[:, 1] = True

    class Batch:
        pass

    batch = Batch()
    batch.tokens, batch.aspect_mask, batch.labels = tokens, aspect, torch.tensor([0, 1])
    torch.nn.functional.cross_entropy(model(batch), batch.labels).backward()
    assert all(p.grad is None for p in model.tree_lm.parameters())
    expected = probe_heads(lm_path, tokens.words, 0, "mean")
    heads = model.tree_heads(batch)
    assert [heads[r, : len(w)].tolist() for r, w in enumerate(tokens.words)] == expected


def test_config_errors_are_one_line_and_name_the_file(tmp_path):
    with pytest.raises(ConfigError, match="needs lm_checkpoint"):
        TreeSource("lm")
    missing = tmp_path / "no-such-lm.ckpt"
    factory = partial(DependencyGuidedEncoder, encoder=partial(ONLSTM, hidden_size=8, chunk_size=4),
                      tree_source=lm_source(missing))
    with pytest.raises(CheckpointError, match="no-such-lm.ckpt"):
        ner_model(missing, factory)


def test_cli_reports_a_missing_lm_checkpoint_in_one_line(tmp_path, capsys):
    missing = tmp_path / "gone" / "best.ckpt"
    config = tiny_ner_config(tmp_path, encoder=dg_encoder(str(missing)))
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(config)])
    assert exit_info.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(err) == 1 and str(missing) in err[0], err


def test_a_tagger_reading_lm_trees_is_probed_with_them_and_one_reading_gold_trees_says_why_not(lm_path):
    """onlstm-trees on a dependency-guided tagger: its later stages read the language model's trees for the probe's
    raw sentences as in training; gold heads cannot come from raw sentences, which the error says."""
    inner = partial(ONLSTM, hidden_size=8, chunk_size=4, bidirectional=True)
    model = ner_model(lm_path, partial(DependencyGuidedEncoder, encoder=inner, tree_source=lm_source(lm_path)))
    model.eval()
    sentences = [["the", "cat", "saw", "a", "dog", "."], ["a", "dog", "saw", "the", "bird"]]
    got = EncoderProbe(model).distances(sentences, batch_size=2)
    tokens = words_to_batch(sentences, WORDS, CHARS)
    heads = model.tree_lm.heads(tokens.words, tokens.mask)
    with torch.no_grad():
        expected = model.net.encoder(model.net.embedder(tokens), tokens.mask, heads).distances
        chain = model.net.encoder(model.net.embedder(tokens), tokens.mask, (heads + 1).clamp(max=4)).distances
    assert expected.size(0) == 2  # one layer per stage: the second read the tree
    for row, words in enumerate(sentences):
        torch.testing.assert_close(got[row], expected[:, :, row, :len(words)], rtol=0, atol=1e-6)
    assert not torch.allclose(chain[1], expected[1])  # the second stage's distances depend on the tree
    gold = ner_model(lm_path, partial(DependencyGuidedEncoder, encoder=inner, tree_source="gold"))
    with pytest.raises(ValueError, match="gold dependency heads .* cannot be probed from words alone"):
        EncoderProbe(gold).distances(sentences)


def dg_encoder(lm_checkpoint: str, layer: int = -1) -> dict:
    return {"class_path": "onlstm_tasks.encoders.DependencyGuidedEncoder",
            "init_args": {"encoder": {"class_path": "onlstm_tasks.encoders.ONLSTM",
                                      "init_args": {"hidden_size": 8, "chunk_size": 4, "bidirectional": True}},
                          "tree_source": {"kind": "lm", "lm_checkpoint": lm_checkpoint, "distance_layer": layer}}}


def predict_input(tmp_path, sentences) -> str:
    path = tmp_path / "input.txt"
    path.write_text("".join(" ".join(words) + "\n" for words in sentences), encoding="utf-8")
    return str(path)


@pytest.mark.slow  # an end-to-end CLI fit, test and predict
def test_a_ner_checkpoint_tests_and_predicts_with_the_lm_file_deleted(tmp_path, lm_path):
    lm_copy = tmp_path / "lm" / "copy.ckpt"
    lm_copy.parent.mkdir()
    shutil.copy(lm_path, lm_copy)
    config = tiny_ner_config(tmp_path, encoder=dg_encoder(str(lm_copy), layer=0), max_epochs=1)
    main(["fit", "--config", str(config)])
    best = tmp_path / "ckpt" / "best.ckpt"
    saved = torch.load(best, weights_only=True)
    assert json.loads(saved["hyper_parameters"]["lm_trees"])["word_vocab"][:3] == ["<pad>", "<unk>", "<eos>"]
    assert any(k.startswith("tree_lm.models.0.encoder.") for k in saved["state_dict"])
    sentences = toy_sentences(6, seed=5)
    expected = probe_heads(lm_copy, sentences, 0, "mean")
    shutil.rmtree(lm_copy.parent)
    main(["test", "--config", str(config), "--ckpt_path", str(best)])
    main(["predict", "--config", str(config), "--ckpt_path", str(best), "--data.init_args.path", "null",
          "--data.init_args.predict_file", predict_input(tmp_path, sentences),
          "--data.init_args.pretokenized", "true"])
    rows = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert [row["tokens"] for row in rows] == sentences
    assert [[i if h == 0 else h - 1 for i, h in enumerate(row["heads"])] for row in rows] == expected
    assert all(row["tree"].startswith("(") for row in rows)
    # the Python API and a save_pretrained folder need no language-model file either
    tagger = load(best)
    assert [[i if h == 0 else h - 1 for i, h in enumerate(r["heads"])] for r in tagger(sentences, pretokenized=True)] == expected
    tagger.model.save_pretrained(tmp_path / "exported")
    again = load(tmp_path / "exported")
    assert [r["heads"] for r in again(sentences, pretokenized=True)] == [row["heads"] for row in rows]


@pytest.mark.slow  # the NER test above runs the same TaskModel.attach_lm_trees in the fast tier
def test_an_absa_checkpoint_predicts_the_lm_trees_with_the_lm_file_deleted(tmp_path, lm_path):
    lm_copy = tmp_path / "lm" / "copy.ckpt"
    lm_copy.parent.mkdir()
    shutil.copy(lm_path, lm_copy)
    config = tiny_absa_config(tmp_path, {"path": str(sample_path("absa")), "data_dir": None, "revision": None,
                                         "format": "auto"}, head="TreeAspectHead", max_epochs=1)
    cfg = yaml.safe_load(config.read_text())
    cfg["model"]["init_args"]["head"] = {
        "class_path": "onlstm_tasks.modules.tree_aspect_head.TreeAwareAspectHead",
        "init_args": {"encoder": {"class_path": "onlstm_tasks.encoders.ONLSTM",
                                  "init_args": {"hidden_size": 8, "chunk_size": 4, "bidirectional": True}},
                      "tree_source": {"kind": "lm", "lm_checkpoint": str(lm_copy)}}}
    config.write_text(yaml.safe_dump(cfg))
    main(["fit", "--config", str(config)])
    best = tmp_path / "ckpt" / "best.ckpt"
    (expected_heads,) = probe_heads(lm_copy, [["the", "cat", "saw", "a", "small", "dog", "."]], -1, "mean")
    shutil.rmtree(lm_copy.parent)
    text = tmp_path / "input.jsonl"
    text.write_text(json.dumps({"text": "the cat saw a small dog .", "aspect": "dog"}) + "\n", encoding="utf-8")
    main(["predict", "--config", str(config), "--ckpt_path", str(best), "--data.init_args.path", "null",
          "--data.init_args.predict_file", str(text)])
    (row,) = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert row["aspect"] == "dog" and row["tree"].startswith("(")
    assert row["heads"] == heads_1based(expected_heads)


def test_words_are_framed_and_looked_up_as_the_language_model_reads_them(lm_path):
    from onlstm_tasks.tasks.frozen_lm import read_lm_config

    config, _ = read_lm_config(str(lm_path))
    vocab = config["word_vocab"]
    source = lm_source(lm_path)
    ids = LanguageModelTrees(config, source).word_ids([["The", "cat", "zzz"]]).word_ids[0].tolist()
    assert ids == [vocab.index("<eos>"), vocab.index("<unk>"), vocab.index("cat"), vocab.index("<unk>"),
                   vocab.index("<eos>")]
    config["word_options"]["lowercase"] = True  # the language model's data module lowercased its words
    ids = LanguageModelTrees(config, source).word_ids([["The", "cat", "zzz"]]).word_ids[0].tolist()
    assert ids[1] == vocab.index("the")
