"""LM features: a frozen pretrained bidirectional language model's layers, scalar-mixed, concatenated to a tagger's
own features (``NERTagger(lm_features=...)``). The language model is a tiny bidirectional ON-LSTM fitted by
``onlstm-tasks fit`` on the toy corpus."""

from __future__ import annotations

import shutil

import pytest
import torch

from helpers.cli import tiny_ner_config
from helpers.lm import fit_tiny_bidirectional_lm
from onlstm_tasks import load
from onlstm_tasks.cli import main
from onlstm_tasks.tasks.lm_features import LanguageModelFeatures, WithLanguageModelFeatures
from onlstm_tasks.tasks.ner import NERTagger


pytestmark = pytest.mark.usefixtures("plain_argv")  # (conftest.py)


@pytest.fixture(scope="module")
def lm_path(tmp_path_factory):
    return fit_tiny_bidirectional_lm(tmp_path_factory.mktemp("lm"), 60, 1)


def tagger(lm_path) -> NERTagger:
    torch.manual_seed(0)
    return NERTagger(["the", "cat"], list("thecat"), ["O", "B-PER", "I-PER"], dropout=0.0, lm_features=str(lm_path))


def test_features_mix_every_layer_with_learned_weights_and_no_gradient_reaches_the_frozen_lm(lm_path):
    from onlstm_tasks.data.core.features import words_to_batch

    model = tagger(lm_path)
    embedder = model.net.embedder
    assert isinstance(embedder, WithLanguageModelFeatures)
    features = embedder.features
    frozen = [p for name, p in features.named_parameters() if name.startswith(("embedder.", "encoder."))]
    assert frozen and not any(p.requires_grad for p in frozen)
    assert features.mix_logits.requires_grad and features.gamma.requires_grad
    assert len(features.widths) == 1 + 2  # the word vectors and both layers (tiny_lm_config: 2 layers)
    model.train()
    assert not features.training  # the language model stays in eval mode
    words = [["the", "cat", "sat"], ["a", "dog"]]
    batch = words_to_batch(words, model.hparams.word_vocab, model.hparams.char_vocab)
    out = embedder(batch)
    assert out.shape == (2, 3, embedder.own.output_size + features.output_size)
    assert not out[1, 2, embedder.own.output_size:].any()  # padding stays zero
    out.pow(2).sum().backward()
    assert all(p.grad is None for p in frozen)
    assert features.mix_logits.grad is not None and features.gamma.grad is not None
    configured = model.configure_optimizers()
    optimizer = configured["optimizer"] if isinstance(configured, dict) else configured
    optimised = {id(p) for group in optimizer.param_groups for p in group["params"]}
    assert not any(id(p) in optimised for p in frozen) and id(features.gamma) in optimised


def test_the_mix_of_one_layer_is_that_layer(lm_path):
    """With all the weight on one layer and gamma 1 the mix is that layer, zero-padded to the widest."""
    features = LanguageModelFeatures.from_checkpoint(str(lm_path))
    words = [["the", "cat", "sat"], ["a", "dog"]]
    layers, mask = features.layers(words)
    with torch.no_grad():
        features.mix_logits.fill_(-1e4)
        features.mix_logits[2] = 0.0
    mixed = features(words, 3)
    width = layers[2].size(-1)
    torch.testing.assert_close(mixed[..., :width], layers[2])
    assert not mixed[..., width:].any()


@pytest.mark.slow
def test_an_lm_features_tagger_trains_and_predicts_with_the_lm_file_deleted(lm_path, tmp_path):
    lm_copy = tmp_path / "lm.ckpt"
    shutil.copy(lm_path, lm_copy)
    config = tiny_ner_config(tmp_path)
    main(["fit", "--config", str(config), "--model.init_args.lm_features", str(lm_copy)])
    checkpoint = tmp_path / "ckpt" / "best.ckpt"
    lm_copy.unlink()
    predictor = load(str(checkpoint))
    record = predictor(["the", "cat", "sat"], pretokenized=True)
    assert len(record["tags"]) == 3
    assert isinstance(predictor.model.net.embedder, WithLanguageModelFeatures)
