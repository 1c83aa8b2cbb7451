"""The language model's output layer (full or adaptive softmax) against oracles, and the vocabulary cap."""

from __future__ import annotations

import logging
import math
from functools import partial

import pytest
import torch
from torch import nn

from helpers.lm import text_data, tiny_lm_config, write_toy_corpus
from helpers.cli import last_metrics
from onlstm_tasks.cli import main
from onlstm_tasks.data.core.batching import IGNORE
from onlstm_tasks.data.core.features import WordNormalizer
from onlstm_tasks.data.lm.module import EOS, LanguageModelDataModule, build_lm_vocabulary
from onlstm_tasks.encoders import ONLSTM
from onlstm_tasks.modules.lm_softmax import adaptive_softmax, log_probs, position_nll
from onlstm_tasks.tasks.language_model import LanguageModel
from onlstm_tasks.tasks.loading import load_task_model


pytestmark = pytest.mark.usefixtures("plain_argv")  # (conftest.py)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, str]:
    return write_toy_corpus(tmp_path_factory.mktemp("toy"), {"train": 200, "validation": 30, "test": 30})


def oracle_nll(log_p: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """-log p(target) gathered from the whole distribution, 0 at IGNORE."""
    real = targets != IGNORE
    picked = log_p.gather(-1, targets.clamp(min=0)[..., None])[..., 0]
    return torch.where(real, -picked, torch.zeros_like(picked))


@pytest.mark.parametrize("kind", ["full", "adaptive"])
def test_position_nll_is_minus_the_gathered_log_probability_and_rows_sum_to_one(kind):
    torch.manual_seed(0)
    vocab, width = 50, 12
    decoder = adaptive_softmax(width, vocab, [5, 20], div_value=2.0) if kind == "adaptive" else nn.Linear(width, vocab)
    states = torch.randn(3, 7, width)
    targets = torch.randint(0, vocab, (3, 7))
    targets[0, 5:] = IGNORE
    targets[2, 0] = IGNORE
    log_p = log_probs(decoder, states)
    assert log_p.shape == (3, 7, vocab)
    assert torch.allclose(log_p.exp().sum(-1), torch.ones(3, 7), atol=1e-5)
    nll = position_nll(decoder, states, targets)
    assert nll.shape == targets.shape and (nll[targets == IGNORE] == 0).all()
    assert torch.allclose(nll, oracle_nll(log_p, targets), atol=1e-5)


def test_adaptive_options_that_cannot_work_are_refused():
    vocab = ["<pad>", "<unk>", EOS, *"abcdefghij"]
    encoder = partial(ONLSTM, hidden_size=[8, 8], chunk_size=4, num_layers=2)
    with pytest.raises(ValueError, match="tie_weights needs softmax: full"):
        LanguageModel(vocab, 8, encoder=encoder, softmax="adaptive")
    with pytest.raises(ValueError, match="softmax must be one of"):
        LanguageModel(vocab, 8, encoder=encoder, softmax="sampled")
    with pytest.raises(ValueError, match="adaptive_cutoffs must be increasing"):
        LanguageModel(vocab, 8, encoder=encoder, softmax="adaptive", tie_weights=False, adaptive_cutoffs=[6, 4])
    with pytest.raises(ValueError, match="below the vocabulary size"):
        LanguageModel(vocab, 8, encoder=encoder, softmax="adaptive", tie_weights=False, adaptive_cutoffs=[4, 12])
    with pytest.raises(ValueError, match="too small for the default"):
        LanguageModel(vocab, 8, encoder=encoder, softmax="adaptive", tie_weights=False)


def adaptive_model(vocab, bidirectional=True) -> LanguageModel:
    encoder = partial(ONLSTM, hidden_size=[16, 8], chunk_size=4, num_layers=2)
    return LanguageModel(vocab, embedding_dim=8, encoder=encoder, bidirectional=bidirectional, tie_weights=False,
                         softmax="adaptive", adaptive_cutoffs=[8, 20], div_value=2.0)


def test_adaptive_perplexity_is_exp_of_the_mean_nll_and_predict_records_agree(corpus):
    dm = LanguageModelDataModule(**text_data(corpus, eval_batch_size=8))
    dm.setup("validate")
    torch.manual_seed(0)
    model = adaptive_model(dm.word_vocab).eval()
    total, count = {"forward": 0.0, "backward": 0.0}, {"forward": 0, "backward": 0}
    with torch.no_grad():
        for index, batch in enumerate(dm.val_dataloader()):
            model.validation_step(batch, index)
            out = model.net(batch.tokens)
            records = model.predict_step(batch, index)
            for direction, states, targets in (("forward", out.forward, batch.forward_targets),
                                               ("backward", out.backward, batch.backward_targets)):
                oracle = oracle_nll(model.net.log_probs(states), targets)
                total[direction] += float(oracle.sum())
                count[direction] += int((targets != IGNORE).sum())
                for row, record in enumerate(records):  # per-sentence NLL of predict records
                    assert math.isclose(record[f"nll_{direction}"], float(oracle[row].sum()), rel_tol=1e-4)
    scores = {d: model.scores[f"val_{d}"].compute() for d in ("forward", "backward", "both")}
    for direction in ("forward", "backward"):
        assert math.isclose(float(scores[direction]["ppl"]), math.exp(total[direction] / count[direction]),
                            rel_tol=1e-4)
    pooled = math.exp(sum(total.values()) / sum(count.values()))
    assert math.isclose(float(scores["both"]["ppl"]), pooled, rel_tol=1e-4)
    assert 0.5 * len(dm.word_vocab) < pooled < 2 * len(dm.word_vocab)  # untrained: about the vocabulary size
    encoded = model.encode_words([["the", "cat", "saw", "a", "dog", "."]])  # probing reads the encoder only
    assert encoded.hidden.shape[:2] == (1, 6)


@pytest.mark.slow  # end to end through the CLI; the softmax's own tests above run in the fast tier
def test_an_adaptive_bidirectional_lm_trains_and_tests_through_the_cli(tmp_path, corpus):
    config = tiny_lm_config(tmp_path, text_data(corpus), max_epochs=4, limit_train_batches=1.0,
                            model={"bidirectional": True, "tie_weights": False, "softmax": "adaptive",
                                   "adaptive_cutoffs": [8, 20], "div_value": 2.0})
    main(["fit", "--config", str(config), "--test_after_fit", "true"])
    metrics = last_metrics(tmp_path / "logs")
    model = load_task_model(tmp_path / "ckpt" / "best.ckpt")
    assert isinstance(model.net.decoder, nn.AdaptiveLogSoftmaxWithLoss)
    assert metrics["test_ppl"] < 0.5 * len(model.hparams.word_vocab)  # untrained: about the vocabulary size


def test_tie_weights_with_the_adaptive_softmax_is_a_one_line_config_error(tmp_path, corpus, capsys):
    config = tiny_lm_config(tmp_path, text_data(corpus), model={"softmax": "adaptive"})
    with pytest.raises(SystemExit) as stop:
        main(["fit", "--config", str(config)])
    assert stop.value.code == 2
    (err,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert "tie_weights needs softmax: full" in err and "model.init_args" in err


def test_the_vocabulary_cap_keeps_the_most_frequent_words_and_logs_what_reads_as_unk(corpus, caplog):
    with caplog.at_level(logging.INFO, logger="onlstm_tasks"):
        full = LanguageModelDataModule(**text_data(corpus))
        full.setup("fit")
        capped = LanguageModelDataModule(**text_data(corpus, max_vocab_size=12))
        capped.setup("fit")
    assert len(capped.word_vocab) == 12 and capped.word_vocab == full.word_vocab[:12]  # by frequency
    counts = {}
    for words in full.splits()["train"]:
        for w in words:
            counts[w] = counts.get(w, 0) + 1
    kept = capped.word_vocab[3:]
    assert min(counts[w] for w in kept) >= max(c for w, c in counts.items() if w not in kept)
    unknown = sum(c for w, c in counts.items() if w not in kept)
    assert f"{len(kept)} of {len(counts)} training word types kept" in caplog.text
    assert f"{unknown} of {sum(counts.values())} training tokens" in caplog.text
    batch = next(iter(capped.train_dataloader()))
    ids = batch.tokens.word_ids[batch.tokens.mask]
    assert (ids == 1).any() and int(ids.max()) < 12  # words outside the cap read as <unk> (id 1)


def test_a_literal_unk_in_the_text_is_counted_as_unknown_and_takes_no_vocabulary_slot(caplog):
    sentences = [["a", "<unk>", "b", "<unk>", "a", "c", "<pad>"]]
    with caplog.at_level(logging.INFO, logger="onlstm_tasks"):
        vocab = build_lm_vocabulary(sentences, WordNormalizer(), max_size=5)
    assert vocab.itos == ["<pad>", "<unk>", EOS, "a", "b"]  # max_size entries, <unk> once
    assert "2 of 3 training word types kept" in caplog.text
    assert "3 of 6 training tokens (50.00%, with 2 written <unk> in the text)" in caplog.text
