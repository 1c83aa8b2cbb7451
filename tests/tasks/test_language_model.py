"""The language model: data (sentence frames, BPTT windows), no look-ahead, perplexity, training, reuse."""

from __future__ import annotations

import logging
import math
from functools import partial

import json

import pytest
import torch
import yaml

from helpers.cli import last_metrics, run_cli, single_and_ddp_test_metrics, tiny_ner_config
from helpers.lm import text_data, tiny_lm_config, write_toy_corpus
from onlstm_tasks.cli import main
from onlstm_tasks.data.core.batching import TokenBatch
from onlstm_tasks.data.lm.module import EOS, IGNORE, LanguageModelDataModule, build_lm_vocabulary, stream_windows
from onlstm_tasks.data.core.features import WordNormalizer
from onlstm_tasks.encoders import LSTM, ONLSTM, IndependentDirections
from onlstm_tasks.metrics import Perplexity
from onlstm_tasks.sample_data import sample_path
from onlstm_tasks.tasks.language_model import LanguageModel
from onlstm_tasks.tasks.loading import load_task_model
from onlstm_tasks.tasks.ner import NERTagger
from helpers.shared_data import SHARED_DATA, requires_shared_data


pytestmark = pytest.mark.usefixtures("one_thread", "plain_argv")  # (conftest.py)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, str]:
    return write_toy_corpus(tmp_path_factory.mktemp("toy"))


def data_module(files, **kwargs) -> LanguageModelDataModule:
    return LanguageModelDataModule(**text_data(files, **kwargs))


def small_model(vocab, bidirectional=False, encoder=None, **kwargs) -> LanguageModel:
    encoder = encoder or partial(ONLSTM, hidden_size=[16, 8], chunk_size=4, num_layers=2)
    return LanguageModel(vocab, embedding_dim=8, encoder=encoder, bidirectional=bidirectional, **kwargs)


# ---- data -------------------------------------------------------------------------------------------------------


def test_text_rows_become_sentences_and_blank_rows_are_counted(corpus, caplog):
    dm = data_module(corpus)
    with caplog.at_level(logging.INFO, logger="onlstm_tasks"):
        splits = dm.splits()
    assert [len(splits[s]) for s in ("train", "validation", "test")] == [300, 40, 40]
    assert splits["train"][0][-1] == "." and all(words for words in splits["train"])
    assert "blank row(s) skipped" in caplog.text  # 12 blank rows in train, counted
    vocab = dm.word_vocab
    assert vocab[:3] == ["<pad>", "<unk>", EOS] and "cat" in vocab


def test_vocabulary_limits():
    sentences = [["a", "b", "b", "c", "c", "c", "1999"]]
    vocab = build_lm_vocabulary(sentences, WordNormalizer(), min_freq=2)
    assert vocab.itos == ["<pad>", "<unk>", EOS, "c", "b"]
    assert build_lm_vocabulary(sentences, WordNormalizer(), max_size=4).itos == ["<pad>", "<unk>", EOS, "c"]
    assert "0000" in build_lm_vocabulary(sentences, WordNormalizer()).stoi  # digits normalised
    with pytest.raises(ValueError, match="max_vocab_size"):
        build_lm_vocabulary(sentences, WordNormalizer(), max_size=3)


def test_sentence_batches_frame_each_sentence_and_align_both_targets(corpus):
    dm = data_module(corpus)
    dm.setup("fit")
    batch = next(iter(dm.val_dataloader()))
    eos = dm.word_vocab.index(EOS)
    ids, mask = batch.tokens.word_ids, batch.tokens.mask
    for row in range(ids.size(0)):
        n = int(mask[row].sum())
        seq = ids[row, :n].tolist()
        assert seq[0] == eos and seq[-1] == eos and eos not in seq[1:-1]
        assert batch.forward_targets[row, : n - 1].tolist() == seq[1:]  # position t predicts t + 1
        assert batch.backward_targets[row, 1:n].tolist() == seq[:-1]  # position t predicts t - 1
        assert (batch.forward_targets[row, n - 1:] == IGNORE).all()
        assert batch.backward_targets[row, 0] == IGNORE and (batch.backward_targets[row, n:] == IGNORE).all()


def test_stream_windows_cover_the_stream_in_order_and_split_rows_between_processes(caplog):
    sentences = [list(range(10 * i + 3, 10 * i + 3 + 7)) for i in range(10)]  # 70 distinct ids
    stream = [i for s in sentences for i in s]
    with caplog.at_level(logging.INFO, logger="onlstm_tasks"):
        parts = [stream_windows(sentences, rows=2, bptt=4, world=2, rank=r) for r in (0, 1)]
    assert "2 token(s) at the end of the stream" in caplog.text  # 70 = 4 rows x 17 + 2 left out
    assert len(parts[0]) == len(parts[1])  # every process runs the same number of windows
    rows = []
    for part in parts:
        inputs = torch.cat([x for _, x, _ in part], dim=1)
        targets = torch.cat([y for _, _, y in part], dim=1)
        assert [n for n, _, _ in part] == list(range(len(part)))
        assert torch.equal(inputs[:, 1:], targets[:, :-1])  # targets are the next tokens
        rows += [torch.cat((inputs[r], targets[r, -1:])).tolist() for r in range(inputs.size(0))]
    assert [i for row in rows for i in row] == stream[:68]  # the 4 rows, in order, are the stream


def test_ner_sources_give_their_words(caplog):
    dm = LanguageModelDataModule(path=str(sample_path("ner")), name=None, format="columns",
                                 reader_options={"scheme": "iob2"})
    splits = dm.splits()
    assert len(splits["train"]) == 400 and all(isinstance(w, str) for w in splits["train"][0])


# ---- the model ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("kind", ["onlstm", "lstm"])
def test_no_direction_sees_the_words_it_predicts(bidirectional, kind):
    torch.manual_seed(0)
    vocab = ["<pad>", "<unk>", EOS] + [f"w{i}" for i in range(20)]
    encoder = None if kind == "onlstm" else partial(LSTM, hidden_size=8, num_layers=2)
    model = small_model(vocab, bidirectional, encoder=encoder, tie_weights=kind == "onlstm").eval()

    def logits(ids):
        ids = torch.tensor([ids])
        batch = TokenBatch(ids, torch.zeros(*ids.shape, 1, dtype=torch.long), ids != 0, [[]])
        return model.net(batch)

    base = [2, 5, 6, 7, 8, 9, 2]
    out = logits(base)
    t = 3
    changed_after = logits(base[: t + 1] + [12, 13, 2])  # words after t differ
    changed_before = logits([2, 14, 15] + base[t:])  # words before t differ
    assert torch.allclose(out.forward[0, : t + 1], changed_after.forward[0, : t + 1], atol=1e-6)
    assert not torch.allclose(out.forward[0, t + 1:], changed_after.forward[0, t + 1:])
    if bidirectional:
        assert torch.allclose(out.backward[0, t:], changed_before.backward[0, t:], atol=1e-6)
        assert not torch.allclose(out.backward[0, :t], changed_before.backward[0, :t])
    else:
        assert out.backward is None


def test_untrained_perplexity_is_about_the_vocabulary_size(corpus):
    dm = data_module(corpus)
    dm.setup("validate")
    torch.manual_seed(0)
    model = small_model(dm.word_vocab).eval()
    metric = Perplexity()
    with torch.no_grad():
        for batch in dm.val_dataloader():
            metric.update(*model._nll(model.net(batch.tokens), batch)["forward"])
    ppl = float(metric.compute()["ppl"])
    assert 0.8 * len(dm.word_vocab) < ppl < 1.25 * len(dm.word_vocab)


def test_perplexity_pools_tokens_not_ratios():
    whole, a, b = Perplexity(), Perplexity(), Perplexity()
    whole.update(torch.tensor(10.0), torch.tensor(2))
    whole.update(torch.tensor(3.0), torch.tensor(10))
    a.update(torch.tensor(10.0), torch.tensor(2))
    b.update(torch.tensor(3.0), torch.tensor(10))
    assert math.isclose(float(whole.compute()["ppl"]), math.exp(13 / 12), rel_tol=1e-9)
    # what a DDP sum of the two processes' states computes
    pooled = Perplexity()
    pooled.nll, pooled.count = a.nll + b.nll, a.count + b.count
    assert math.isclose(float(pooled.compute()["ppl"]), float(whole.compute()["ppl"]), rel_tol=1e-12)
    assert math.isnan(float(Perplexity().compute()["ppl"]))


def test_constructor_errors():
    vocab = ["<pad>", "<unk>", EOS, "a"]
    with pytest.raises(ValueError, match="must be unidirectional"):
        LanguageModel(vocab, 8, encoder=partial(ONLSTM, hidden_size=8, chunk_size=4, bidirectional=True))
    with pytest.raises(ValueError, match="tie_weights needs"):
        LanguageModel(vocab, 8, encoder=partial(ONLSTM, hidden_size=16, chunk_size=4))
    with pytest.raises(ValueError, match="<eos>"):
        LanguageModel(["<pad>", "<unk>", "a"], 8)


def test_probing_reads_sentences_as_in_training_and_returns_the_words_only():
    torch.manual_seed(0)
    vocab = ["<pad>", "<unk>", EOS, "a", "b", "c"]
    model = small_model(vocab, bidirectional=True).eval()
    sentences = [["a", "b", "c", "a"], ["c"]]
    with torch.no_grad():
        out = model.encode_words(sentences)
        x, mask = model.embed_words(sentences)  # framed: <eos> words <eos>
        framed = model.sentence_encoder()(x, mask)
    assert out.distances.shape == (2, 2, 2, 4) and out.hidden.shape[:2] == (2, 4)
    for row, words in enumerate(sentences):
        n = len(words)
        assert torch.equal(out.distances[..., row, :n], framed.distances[..., row, 1:n + 1])
        assert torch.equal(out.hidden[row, :n], framed.hidden[row, 1:n + 1])
        assert (out.hidden[row, n:] == 0).all() and (out.distances[..., row, n:] == 0).all()


# ---- training through the CLI, stream mode, reuse ------------------------------------------------------------


@pytest.fixture(scope="module")
def bi_checkpoint(tmp_path_factory, corpus):
    """A bidirectional ON-LSTM language model trained a few steps on the toy corpus by ``onlstm-tasks fit``."""
    folder = tmp_path_factory.mktemp("lm_bi")
    config = tiny_lm_config(folder, text_data(corpus), model={"bidirectional": True}, max_epochs=4,
                            limit_train_batches=1.0)
    main(["fit", "--config", str(config), "--test_after_fit", "true"])
    return folder


def test_a_few_steps_of_training_lower_the_perplexity(bi_checkpoint):
    metrics = last_metrics(bi_checkpoint / "logs")
    vocab = len(torch.load(bi_checkpoint / "ckpt" / "best.ckpt", weights_only=True)["hyper_parameters"]["word_vocab"])
    # untrained: about the vocabulary size (see above); 4 epochs of a toy grammar are far below it
    assert metrics["val_ppl"] < 0.5 * vocab and metrics["test_ppl"] < 0.5 * vocab
    assert {"val_ppl_forward", "val_ppl_backward", "test_ppl_forward", "test_ppl_backward"} <= set(metrics)
    both = math.exp(metrics["test_nll"])
    assert min(metrics["test_ppl_forward"], metrics["test_ppl_backward"]) <= both + 1e-3
    assert both <= max(metrics["test_ppl_forward"], metrics["test_ppl_backward"]) + 1e-3
    model = load_task_model(bi_checkpoint / "ckpt" / "best.ckpt")
    assert isinstance(model, LanguageModel) and isinstance(model.net.encoder, IndependentDirections)


def test_stream_mode_trains_with_the_state_carried(tmp_path, corpus):
    config = tiny_lm_config(tmp_path, text_data(corpus, mode="stream", bptt=8, batch_size=4, eval_batch_size=4),
                            max_epochs=2, limit_train_batches=1.0)
    main(["fit", "--config", str(config), "--test_after_fit", "true"])
    metrics = last_metrics(tmp_path / "logs")
    vocab = len(torch.load(tmp_path / "ckpt" / "best.ckpt", weights_only=True)["hyper_parameters"]["word_vocab"])
    assert metrics["test_ppl"] < 0.5 * vocab  # untrained: about the vocabulary size


def test_stream_mode_refuses_encoders_that_cannot_carry_state(tmp_path, corpus):
    config = tiny_lm_config(tmp_path, text_data(corpus, mode="stream", bptt=8, batch_size=4),
                            model={"bidirectional": True}, max_epochs=1, limit_train_batches=2)
    with pytest.raises(ValueError, match="sentence mode"):
        main(["fit", "--config", str(config)])


def test_stream_mode_restarts_the_state_at_each_loader_start(corpus):
    dm = data_module(corpus, mode="stream", bptt=5, batch_size=3, eval_batch_size=3)
    dm.setup("fit")
    torch.manual_seed(0)
    model = small_model(dm.word_vocab).eval()
    windows = list(dm.val_dataloader())
    with torch.no_grad():
        model._run(windows[0], "val")
        second = model._run(windows[1], "val").forward
        fresh = model.net(windows[1].tokens).forward  # from a zero state
        again = model._run(windows[0], "val").forward  # window 0 again: the state restarts
        whole = model.net(windows[0].tokens).forward
    assert not torch.allclose(second, fresh)
    assert torch.allclose(again, whole)


def ner_with_lm(tmp_path, lm_folder, encoder):
    """A tiny NER config (word-only 16-d embedder, ``encoder``) starting from the language model in ``lm_folder``."""
    config = tiny_ner_config(tmp_path, encoder=encoder)
    cfg = yaml.safe_load(config.read_text())
    cfg["model"]["init_args"]["embedder"] = {"class_path": "onlstm_tasks.embedders.word_char.WordCharEmbedder",
                                             "init_args": {"word_dim": 16, "char_encoder": "none"}}
    cfg["model"]["init_args"]["pretrained_lm"] = str(lm_folder / "ckpt" / "best.ckpt")
    config.write_text(yaml.safe_dump(cfg))
    return config


LM_ENCODER = {"class_path": "onlstm_tasks.encoders.ONLSTM",
              "init_args": {"hidden_size": [16, 16], "chunk_size": 4, "num_layers": 2}}


def test_an_lm_checkpoint_starts_the_ner_encoder_and_word_vectors(tmp_path, bi_checkpoint, caplog):
    lm = torch.load(bi_checkpoint / "ckpt" / "best.ckpt", weights_only=True)
    lm_vocab = lm["hyper_parameters"]["word_vocab"]
    encoder = {"class_path": "onlstm_tasks.encoders.IndependentDirections", "init_args": {"encoder": LM_ENCODER}}
    config = ner_with_lm(tmp_path, bi_checkpoint, encoder)
    with caplog.at_level(logging.INFO, logger="onlstm_tasks"):
        main(["fit", "--config", str(config), "--trainer.max_epochs", "1", "--trainer.limit_train_batches", "1",
              "--trainer.limit_val_batches", "1", "--model.init_args.optimizer.init_args.lr", "0.0"])
    assert "initialised from language model" in caplog.text and "vocabulary words" in caplog.text
    ner = torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=True)
    lm_state, ner_state = lm["state_dict"], ner["state_dict"]
    encoder_keys = [k for k in lm_state if k.startswith("net.encoder.")]
    assert encoder_keys
    for key in encoder_keys:  # lr 0: the weights after one step are those loaded
        assert torch.equal(ner_state[key], lm_state[key]), key
    ner_vocab = ner["hyper_parameters"]["word_vocab"]
    shared = [w for w in ner_vocab[2:] if w in lm_vocab]
    for word in shared[:5] or ["<unk>"]:
        assert torch.equal(ner_state["net.embedder.embed.parts.0.embedding.weight"][ner_vocab.index(word)],
                           lm_state["net.embedder.embedding.weight"][lm_vocab.index(word)])


def test_an_untrained_ner_model_differs_from_the_lm_and_a_misfit_encoder_is_an_error(tmp_path, bi_checkpoint):
    lm = torch.load(bi_checkpoint / "ckpt" / "best.ckpt", weights_only=True)
    vocab = ["<pad>", "<unk>", "the", "cat"]
    from onlstm_tasks.embedders.word import WordEmbedding

    factory = partial(IndependentDirections, encoder=partial(ONLSTM, hidden_size=[16, 16], chunk_size=4,
                                                               num_layers=2))
    ner = NERTagger(vocab, ["<pad>", "<unk>"], ["O", "B-X", "I-X"], embedder=lambda w, c: WordEmbedding(w, 16),
                    encoder=factory, pretrained_lm=str(bi_checkpoint / "ckpt" / "best.ckpt"))
    key = "forward_encoder.cells.0.weight_hh"
    assert not torch.equal(ner.net.encoder.state_dict()[key], lm["state_dict"][f"net.encoder.{key}"])
    ner.setup("fit")
    assert torch.equal(ner.net.encoder.state_dict()[key], lm["state_dict"][f"net.encoder.{key}"])

    misfit = NERTagger(vocab, ["<pad>", "<unk>"], ["O", "B-X", "I-X"], embedder=lambda w, c: WordEmbedding(w, 16),
                       encoder=partial(ONLSTM, hidden_size=16, chunk_size=4, bidirectional=True),
                       pretrained_lm=str(bi_checkpoint / "ckpt" / "best.ckpt"))
    with pytest.raises(ValueError, match="does not fit"):
        misfit.setup("fit")
    ner.setup("test")  # only fit reads the language model


def test_trees_eval_accepts_an_lm_checkpoint(capsys, bi_checkpoint, tmp_path):
    from onlstm_tasks.probing.cli import main as trees_main

    gold = tmp_path / "gold.txt"
    gold.write_text("(S (NP (DT the) (NN cat)) (VP (VBD saw) (NP (DT a) (NN dog))) (. .))\n"
                    "(S (NP (DT a) (JJ small) (NN bird)) (VP (VBD liked) (NP (DT the) (NN river))))\n")
    code = trees_main(["eval", "--gold", str(gold), "--checkpoint", str(bi_checkpoint / "ckpt" / "best.ckpt")])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert [line.split("  ")[0] for line in out if line.startswith("layer")] == [
        f"layer {layer} ({how})" for layer in (1, 2) for how in ("mean", "forward", "backward")]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sentence", "stream"])
def test_ddp_two_processes_give_the_same_perplexity_as_one(tmp_path, corpus, mode):
    """Perplexity pools every process's tokens: 2 processes = 1. In stream mode one process with 2k rows lays the
    stream out exactly as two processes with k rows each (the same windows, split by rows)."""
    bidirectional = mode == "sentence"
    config = tiny_lm_config(tmp_path, text_data(corpus, mode=mode, bptt=8, batch_size=4),
                            model={"bidirectional": bidirectional}, max_epochs=1, limit_train_batches=3)
    main(["fit", "--config", str(config)])
    best = tmp_path / "ckpt" / "best.ckpt"
    if mode == "stream":  # 8 rows on one process, 4 on each of two: the same windows
        single = ["--data.init_args.eval_batch_size", "8"]
        main(["test", "--config", str(config), "--ckpt_path", str(best), *single,
              "--trainer.logger.init_args.save_dir", str(tmp_path / "test_1")])
        proc = run_cli("test", "--config", str(config), "--ckpt_path", str(best), "--trainer.devices", "2",
                       "--trainer.strategy", "ddp", "--trainer.logger.init_args.save_dir", str(tmp_path / "test_2"),
                       "--data.init_args.eval_batch_size", "4", timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "It is recommended to use `self.log(" not in proc.stderr  # the scores are gathered, not averaged
        scores = {1: last_metrics(tmp_path / "test_1"), 2: last_metrics(tmp_path / "test_2")}
    else:
        scores = single_and_ddp_test_metrics(config, best, tmp_path, "--data.init_args.eval_batch_size", "7")
    keys = ["test_ppl", "test_nll", "test_ppl_forward"] + (["test_ppl_backward"] if bidirectional else [])
    for key in keys:
        assert scores[2][key] == pytest.approx(scores[1][key], rel=1e-5), key


def test_a_bidirectional_lm_starts_td_lstm_left_from_its_forward_and_right_from_its_backward_stack(bi_checkpoint):
    from onlstm_tasks.embedders.word_char import WordCharEmbedder
    from onlstm_tasks.modules.aspect_heads import TargetDependentHead
    from onlstm_tasks.tasks.absa import AspectSentimentClassifier

    path = bi_checkpoint / "ckpt" / "best.ckpt"
    lm = torch.load(path, weights_only=True)["state_dict"]
    model = AspectSentimentClassifier(
        ["<pad>", "<unk>", "the", "cat", "zebra"], ["<pad>", "<unk>"], ["negative", "neutral", "positive"],
        embedder=partial(WordCharEmbedder, word_dim=16, char_encoder="none"),
        head=partial(TargetDependentHead, encoder=partial(ONLSTM, hidden_size=[16, 16], chunk_size=4, num_layers=2)),
        pretrained_lm=str(path))
    model.setup("fit")
    for side, stack in (("left", "forward"), ("right", "backward")):
        for key, value in getattr(model.net.head, side).state_dict().items():
            assert torch.equal(value, lm[f"net.encoder.{stack}_encoder.{key}"]), (side, key)
    words = model.net.embedder.embed.parts[0].embedding.weight
    lm_vocab = torch.load(path, weights_only=True)["hyper_parameters"]["word_vocab"]
    assert torch.equal(words[3], lm["net.embedder.embedding.weight"][lm_vocab.index("cat")])


def test_probe_master_gates_of_a_language_model_cover_the_words_only(tmp_path):
    from onlstm_tasks.probing.loading import load_probe

    config = tiny_lm_config(tmp_path, text_data(write_toy_corpus(tmp_path / "toy", {"train": 30, "validation": 5})),
                            max_epochs=1, limit_train_batches=1)
    main(["fit", "--config", str(config)])
    probe = load_probe(tmp_path / "ckpt" / "last.ckpt")
    words = ["the", "cat", "saw", "a", "dog", "."]
    gates = probe.master_gates(words, layer=0)
    distances = probe.distances([words])[0]  # [layers, directions, n]
    assert gates.forget.shape[0] == len(words)
    assert torch.allclose(gates.distances(), distances[0, 0], atol=1e-5)


def test_predict_scores_each_line_and_gives_its_induced_tree(tmp_path, bi_checkpoint):
    config = tiny_lm_config(bi_checkpoint, {"path": None})  # data comes from the checkpoint: no corpus needed
    cfg = yaml.safe_load(config.read_text())
    cfg["trainer"]["callbacks"] = [{"class_path": "onlstm_tasks.callbacks.JsonlPredictionWriter",
                                    "init_args": {"output": str(tmp_path / "scores.jsonl")}}]
    cfg["data"]["init_args"] = {"predict_file": str(tmp_path / "in.txt")}
    config = tmp_path / "predict.yaml"
    config.write_text(yaml.safe_dump(cfg))
    (tmp_path / "in.txt").write_text("the cat saw a dog .\n\n a   dog saw the  cat by the river .\nthe the the the\n"
                                     "Zelda saw 1999 cats\n")
    main(["predict", "--config", str(config), "--ckpt_path", str(bi_checkpoint / "ckpt" / "best.ckpt")])
    records = [json.loads(line) for line in (tmp_path / "scores.jsonl").read_text().splitlines()]
    # one record per input line: the blank second line too
    assert records[1] == {"text": "", "tokens": [], "empty": True}
    records = records[:1] + records[2:]
    assert [r["tokens"] for r in records] == [["the", "cat", "saw", "a", "dog", "."],
                                              "a dog saw the cat by the river .".split(), ["the"] * 4,
                                              ["Zelda", "saw", "1999", "cats"]]  # as written, not <unk> / 0000
    assert records[1]["text"] == " a   dog saw the  cat by the river ."
    for r in records:
        assert r["ppl_forward"] > 1 and r["ppl_backward"] > 1
        assert len(r["heads"]) == len(r["tokens"]) and r["tree"].count("(") == len(r["tokens"]) - 1
    # a grammatical sentence is likelier than a word salad under a model of the toy grammar
    assert records[0]["ppl_forward"] < records[2]["ppl_forward"]


def test_a_vocabulary_without_unknown_training_words_is_warned_about(corpus, caplog):
    with caplog.at_level(logging.INFO, logger="onlstm_tasks"):
        data_module(corpus).setup("fit")
    assert "never learns to predict <unk>" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="onlstm_tasks"):
        data_module(corpus, max_vocab_size=20).setup("fit")
    assert "never learns" not in caplog.text and "<unk> (" in caplog.text


@requires_shared_data
@pytest.mark.parametrize("kit", ["ontonotes", "uner"])
def test_the_shared_ner_kits_give_their_words_to_the_language_model(kit):
    if kit == "ontonotes":
        dm = LanguageModelDataModule(path=str(SHARED_DATA / "conll2012_ontonotesv5"), name=None,
                                     data_dir="english_v12", format="ontonotes")
        expected = {"train": 3000, "validation": 500, "test": 500}
    else:
        dm = LanguageModelDataModule(path=str(SHARED_DATA / "uner_en_ewt"), name=None, format="conllx",
                                     data_files={"train": "en_ewt-uner-dev.conllx",
                                                 "test": "en_ewt-uner-test.conllx"})
        expected = {"train": 2001 - 200, "validation": 200, "test": 2077}  # 10% of train carved for validation
    splits = dm.splits()
    assert {split: len(sentences) for split, sentences in splits.items()} == expected
    dm.setup("fit")
    batch = next(iter(dm.train_dataloader()))
    assert batch.tokens.word_ids.size(0) == 32 and batch.backward_targets is not None


def test_describing_the_data_module_reads_no_data(tmp_path):
    # jsonargparse formats the data module into a message whenever a CLI link finds no attribute (the ``labels``
    # a language model does not take); Lightning's own __str__ would build the loaders, i.e. read the dataset
    dm = LanguageModelDataModule(path=str(tmp_path / "missing"), format="text")
    assert "missing" in str(dm) and dm._splits is None


def test_master_gates_of_a_bidirectional_lm_match_its_distances_in_both_directions(bi_checkpoint):
    from onlstm_tasks.probing.loading import load_probe

    probe = load_probe(bi_checkpoint / "ckpt" / "best.ckpt")
    words = ["a", "small", "dog", "saw", "the", "river", "."]
    distances = probe.distances([words])[0]  # [layers, directions, n]
    for layer in (0, 1):
        for direction in (0, 1):
            gates = probe.master_gates(words, layer=layer, direction=direction)
            assert gates.forget.shape[0] == len(words)
            assert torch.allclose(gates.distances(), distances[layer, direction], atol=1e-5), (layer, direction)
