"""Token embedders: shapes, padding invariance, pretrained vectors, gradients, a tiny offline BERT."""

from __future__ import annotations

import gzip
import logging
import re
from collections.abc import Callable, Sequence

import pytest
import torch

from onlstm_tasks.data.core.batching import TokenBatch
from onlstm_tasks.data.core.vocab import Vocabulary
from onlstm_tasks.embedders import CharCNN, CharLSTM, ConcatEmbedder, TokenEmbedder, WordEmbedding

SENTENCES = [
    ["Anika", "Dravetz", "joined", "Quandor", "Bank", "."],
    ["She", "left", "Ostervale", "."],
    ["Hello"],
]
WORDS = Vocabulary.from_iterable(w for s in SENTENCES for w in s)
CHARS = Vocabulary.from_iterable(c for s in SENTENCES for w in s for c in w)


def make_batch(sentences: list[list[str]], extra_tokens: int = 0, extra_chars: int = 0) -> TokenBatch:
    """Pad ``sentences`` into a batch, optionally with more padding (tokens / chars) than needed."""
    T = max(len(s) for s in sentences) + extra_tokens
    C = max(len(w) for s in sentences for w in s) + extra_chars
    word_ids = torch.zeros(len(sentences), T, dtype=torch.long)
    char_ids = torch.zeros(len(sentences), T, C, dtype=torch.long)
    mask = torch.zeros(len(sentences), T, dtype=torch.bool)
    for b, s in enumerate(sentences):
        for t, w in enumerate(s):
            word_ids[b, t] = WORDS.index(w)
            char_ids[b, t, : len(w)] = torch.tensor([CHARS.index(c) for c in w])
            mask[b, t] = True
    return TokenBatch(word_ids=word_ids, char_ids=char_ids, mask=mask, words=[list(s) for s in sentences])


def build_all() -> list[TokenEmbedder]:
    torch.manual_seed(0)
    word = WordEmbedding(WORDS.itos, dim=8)
    cnn = CharCNN(len(CHARS), char_dim=6, filters=5, kernel_size=3)
    cnn_even = CharCNN(len(CHARS), char_dim=6, filters=4, kernel_size=4)
    lstm = CharLSTM(len(CHARS), char_dim=6, hidden_size=3)
    concat = ConcatEmbedder([WordEmbedding(WORDS.itos, dim=4), CharCNN(len(CHARS), filters=3), CharLSTM(len(CHARS))])
    return [word, cnn, cnn_even, lstm, concat]


@pytest.mark.parametrize("embedder", build_all(), ids=lambda e: type(e).__name__)
def test_shape_and_zero_padding(embedder: TokenEmbedder) -> None:
    batch = make_batch(SENTENCES)
    out = embedder.eval()(batch)
    assert out.shape == (3, 6, embedder.output_size)
    assert torch.all(out[~batch.mask] == 0)
    assert out[batch.mask].abs().sum(dim=-1).gt(0).all()


@pytest.mark.parametrize("embedder", build_all(), ids=lambda e: type(e).__name__)
def test_padding_changes_nothing(embedder: TokenEmbedder) -> None:
    embedder.eval()
    batched = embedder(make_batch(SENTENCES, extra_tokens=3, extra_chars=4))
    for b, sentence in enumerate(SENTENCES):
        alone = embedder(make_batch([sentence]))  # tightest padding
        torch.testing.assert_close(batched[b, : len(sentence)], alone[0], atol=1e-6, rtol=1e-5)


def test_concat_derives_output_size() -> None:
    parts = [WordEmbedding(WORDS.itos, dim=7), CharCNN(len(CHARS), filters=11), CharLSTM(len(CHARS), hidden_size=5)]
    assert ConcatEmbedder(parts, dropout=0.5).output_size == 7 + 11 + 2 * 5


def test_word_without_characters_gets_zeros() -> None:
    batch = make_batch(SENTENCES)
    batch.char_ids[0, 1] = 0  # a real token whose characters are all padding
    for embedder in (CharCNN(len(CHARS)), CharLSTM(len(CHARS))):
        out = embedder(batch)
        assert torch.all(out[0, 1] == 0) and out[0, 0].abs().sum() > 0


def test_gradients_reach_every_parameter() -> None:
    model = ConcatEmbedder(
        [WordEmbedding(WORDS.itos, dim=4), CharCNN(len(CHARS), filters=3), CharLSTM(len(CHARS), hidden_size=2)],
        dropout=0.1,
    )
    model(make_batch(SENTENCES)).pow(2).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    # the padding rows of the lookup tables stay untouched
    assert torch.all(model.parts[0].embedding.weight.grad[0] == 0)
    assert torch.all(model.parts[1].embedding.weight.grad[0] == 0)


# ----------------------------------------------------------------------------------------------------
# pretrained vectors

VOCAB = ["<pad>", "<unk>", "the", "Paris", "london", "Rome", "zzz"]


def write(path, lines: list[str]) -> str:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def loaded(*args, **kwargs) -> WordEmbedding:
    """A WordEmbedding with its pretrained vectors read (they are read lazily, at first use)."""
    emb = WordEmbedding(*args, **kwargs)
    emb.load_pretrained()
    return emb


def test_glove_loading_exact_before_lowercase_and_coverage(tmp_path, caplog) -> None:
    glove = write(
        tmp_path / "glove.txt",
        [
            "paris 1 1 1",  # lowercase of "Paris": used only if "Paris" itself is absent
            "the 0.5 -0.5 2",
            "Paris 2 2 2",  # exact match wins although it comes later
            "London 3 3 3",  # "london" in the vocabulary takes the cased file word
            "other 9 9 9",
        ],
    )
    torch.manual_seed(0)
    random_init = WordEmbedding(VOCAB, dim=3).embedding.weight.detach().clone()
    torch.manual_seed(0)
    with caplog.at_level(logging.INFO, logger="onlstm_tasks.embedders.word"):
        emb = loaded(VOCAB, dim=3, pretrained=glove)
    w = emb.embedding.weight.detach()
    torch.testing.assert_close(w[2], torch.tensor([0.5, -0.5, 2.0]))
    torch.testing.assert_close(w[3], torch.tensor([2.0, 2.0, 2.0]))
    torch.testing.assert_close(w[4], torch.tensor([3.0, 3.0, 3.0]))
    torch.testing.assert_close(w[5], random_init[5])  # missing words keep their random rows
    torch.testing.assert_close(w[1], random_init[1])  # <unk> is never looked up
    assert torch.all(w[0] == 0)
    assert emb.coverage == pytest.approx(3 / 5)
    assert "3 / 5" in caplog.text and "60.0%" in caplog.text


def test_lowercase_lookup_can_be_switched_off(tmp_path) -> None:
    glove = write(tmp_path / "glove.txt", ["rome 1 1", "zzz 2 2"])
    assert loaded(VOCAB, dim=2, pretrained=glove).coverage == pytest.approx(2 / 5)
    assert loaded(VOCAB, dim=2, pretrained=glove, lowercase_lookup=False).coverage == pytest.approx(1 / 5)


def test_word2vec_text_format(tmp_path) -> None:
    w2v = write(tmp_path / "vectors.w2v.txt", ["3 2", "Rome 1 2", "the 3 4", "unused 5 6"])
    emb = loaded(VOCAB, dim=2, pretrained=w2v)
    torch.testing.assert_close(emb.embedding.weight[5].detach(), torch.tensor([1.0, 2.0]))
    torch.testing.assert_close(emb.embedding.weight[2].detach(), torch.tensor([3.0, 4.0]))
    assert emb.coverage == pytest.approx(2 / 5)


def test_gzipped_vectors(tmp_path) -> None:
    path = tmp_path / "glove.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("the 1 2\nRome 3 4\n")
    assert loaded(VOCAB, dim=2, pretrained=str(path)).coverage == pytest.approx(2 / 5)


@pytest.mark.parametrize(
    ("lines", "line_number"),
    [
        (["the 1 2 3", "Rome 1 2 3"], 1),  # the file is 3-d, the embedding 2-d
        (["5 3", "the 1 2 3"], 1),  # word2vec header says 3-d
        (["the 1 2", "", "Rome 1"], 3),  # a short line later on
        (["the 1 2", "Rome 1 x"], 2),  # not a number (on a matched word)
    ],
)
def test_bad_vector_file_names_file_and_line(tmp_path, lines, line_number) -> None:
    path = write(tmp_path / "bad.txt", lines)
    with pytest.raises(ValueError, match=rf"bad\.txt:{line_number}:"):
        loaded(VOCAB, dim=2, pretrained=path)


def test_word_containing_spaces(tmp_path) -> None:
    path = write(tmp_path / "glove.txt", ["the 1 2", ". . . 7 8", "zzz 3 4"])
    vocab = VOCAB + [". . ."]
    emb = loaded(vocab, dim=2, pretrained=path)
    torch.testing.assert_close(emb.embedding.weight[-1].detach(), torch.tensor([7.0, 8.0]))


def test_freeze(tmp_path) -> None:
    path = write(tmp_path / "glove.txt", ["the 1 2"])
    emb = loaded(VOCAB, dim=2, pretrained=path, freeze=True)
    assert not any(p.requires_grad for p in emb.parameters())


def test_bytes_that_are_not_utf8_name_file_and_line(tmp_path) -> None:
    for name, opener in (("bad.txt", open), ("bad.txt.gz", gzip.open)):
        with opener(tmp_path / name, "wb") as f:
            f.write(b"the 1 2\nRome 3 4\ncaf\xe9 5 6\n")  # Latin-1 e-acute
        with pytest.raises(ValueError, match=rf"{re.escape(name)}:3: expected UTF-8 text, found byte 0xe9 at column 4"):
            loaded(VOCAB, dim=2, pretrained=str(tmp_path / name))


def test_utf8_bom_and_crlf_line_ends(tmp_path) -> None:
    path = tmp_path / "glove.txt"
    path.write_bytes("\ufeffthe 1 2\r\nRome 3 4\r\n".encode())
    emb = loaded(VOCAB, dim=2, pretrained=str(path))
    torch.testing.assert_close(emb.embedding.weight[2].detach(), torch.tensor([1.0, 2.0]))
    torch.testing.assert_close(emb.embedding.weight[5].detach(), torch.tensor([3.0, 4.0]))


# ----------------------------------------------------------------------------------------------------
# when the vector file is read: at first use, never when a checkpoint's weights are loaded first


def test_vectors_are_read_at_the_first_forward_pass(tmp_path) -> None:
    path = write(tmp_path / "glove.txt", ["the 1 2"])
    words = Vocabulary(VOCAB[2:])
    emb = WordEmbedding(words.itos, dim=2, pretrained=path)
    assert emb.pretrained_pending and emb.coverage is None
    batch = TokenBatch(word_ids=torch.tensor([[words.index("the")]]), char_ids=torch.zeros(1, 1, 1, dtype=torch.long),
                       mask=torch.ones(1, 1, dtype=torch.bool), words=[["the"]])
    with torch.inference_mode():  # as in Lightning's test/predict loops
        out = emb(batch)
    torch.testing.assert_close(out[0, 0], torch.tensor([1.0, 2.0]))
    assert not emb.pretrained_pending and emb.coverage == pytest.approx(1 / 5)


def test_a_saved_state_dict_holds_the_vectors(tmp_path) -> None:
    path = write(tmp_path / "glove.txt", ["the 1 2"])
    state = WordEmbedding(VOCAB, dim=2, pretrained=path).state_dict()
    torch.testing.assert_close(state["embedding.weight"][2], torch.tensor([1.0, 2.0]))


def test_loaded_weights_replace_the_file_which_may_be_gone(tmp_path, caplog) -> None:
    path = write(tmp_path / "glove.txt", ["the 1 2", "Rome 3 4"])
    trained = loaded(VOCAB, dim=2, pretrained=path)
    with torch.no_grad():
        trained.embedding.weight.add_(0.5)  # as training would
    model = torch.nn.Sequential(trained)
    state = model.state_dict()
    (tmp_path / "glove.txt").unlink()
    restored = torch.nn.Sequential(WordEmbedding(VOCAB, dim=2, pretrained=path))  # as load_from_checkpoint builds it
    with caplog.at_level(logging.INFO, logger="onlstm_tasks.embedders.word"):
        restored.load_state_dict(state)
    assert "not read: the word embeddings come from the loaded weights" in caplog.text
    assert not restored[0].pretrained_pending
    torch.testing.assert_close(restored.state_dict()["0.embedding.weight"], state["0.embedding.weight"])


def test_a_missing_file_is_an_error_when_no_weights_were_loaded(tmp_path) -> None:
    emb = WordEmbedding(VOCAB, dim=2, pretrained=str(tmp_path / "nowhere.txt"))  # building alone reads nothing
    with pytest.raises(FileNotFoundError, match=r"nowhere\.txt: pretrained word vectors not found"):
        emb.load_pretrained()
    emb.load_state_dict({"other.weight": torch.zeros(1)}, strict=False)  # a state dict without this weight
    assert emb.pretrained_pending
    with pytest.raises(FileNotFoundError, match=r"nowhere\.txt"):
        emb.state_dict()


# ----------------------------------------------------------------------------------------------------
# construction from plain config values


def test_built_by_jsonargparse_with_vocab_passed_by_code() -> None:
    from jsonargparse import ArgumentParser

    parser = ArgumentParser()
    parser.add_argument("--chars", type=TokenEmbedder)
    parser.add_argument("--word", type=Callable[[Sequence[str]], TokenEmbedder])
    cfg = parser.parse_object(
        {
            "chars": {
                "class_path": "onlstm_tasks.embedders.ConcatEmbedder",
                "init_args": {
                    "dropout": 0.2,
                    "parts": [
                        {"class_path": "onlstm_tasks.embedders.CharCNN", "init_args": {"num_chars": 30}},
                        {"class_path": "onlstm_tasks.embedders.CharLSTM", "init_args": {"num_chars": 30}},
                    ],
                },
            },
            "word": {"class_path": "onlstm_tasks.embedders.WordEmbedding", "init_args": {"dim": 16}},
        }
    )
    built = parser.instantiate(cfg)
    assert built.chars.output_size == 50 + 50
    word = built.word(WORDS.itos)
    assert isinstance(word, WordEmbedding) and word.output_size == 16


# ----------------------------------------------------------------------------------------------------
# transformer (a tiny random BERT saved to disk; no network)

PIECES = (
    "[PAD] [UNK] [CLS] [SEP] [MASK] . , the a of in on she he joined left said bank "
    "an ##ika dr ##av ##etz qu ##and ##or ost ##er ##vale hello ##s ##ing un ##believ ##able"
).split()


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> str:
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = tmp_path_factory.mktemp("tiny_bert")
    (folder / "vocab.txt").write_text("\n".join(PIECES) + "\n", encoding="utf-8")
    BertTokenizerFast(str(folder / "vocab.txt")).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(PIECES), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )
    BertModel(config).save_pretrained(folder)
    return str(folder)


def bert_states(embedder, words: list[str]) -> tuple[torch.Tensor, list[int | None]]:
    enc = embedder.tokenizer([words], is_split_into_words=True, return_tensors="pt")
    with torch.no_grad():
        hidden = embedder.model(**{k: enc[k] for k in embedder.tokenizer.model_input_names}).last_hidden_state
    return hidden[0], enc.word_ids(0)


def test_transformer_first_and_mean_pooling(tiny_bert) -> None:
    from onlstm_tasks.embedders import TransformerEmbedding

    sentence = ["Anika", "Dravetz", "said", "unbelievable", "."]
    first = TransformerEmbedding(tiny_bert, pooling="first").eval()
    mean = TransformerEmbedding(tiny_bert, pooling="mean").eval()
    assert first.output_size == 16
    hidden, word_ids = bert_states(first, sentence)
    assert word_ids == [None, 0, 0, 1, 1, 1, 2, 3, 3, 3, 4, None]  # an ##ika / dr ##av ##etz / un ##believ ##able
    batch = TokenBatch(torch.zeros(1, 5, dtype=torch.long), torch.zeros(1, 5, 1, dtype=torch.long),
                       torch.ones(1, 5, dtype=torch.bool), [sentence])
    with torch.no_grad():
        out_first, out_mean = first(batch)[0], mean(batch)[0]
    torch.testing.assert_close(out_first[1], hidden[3])  # first piece of "Dravetz"
    torch.testing.assert_close(out_mean[1], hidden[3:6].mean(dim=0))
    torch.testing.assert_close(out_mean[3], hidden[7:10].mean(dim=0))
    torch.testing.assert_close(out_first[2], out_mean[2])  # a one-piece word


def test_transformer_padding_and_truncation(tiny_bert, caplog) -> None:
    from onlstm_tasks.embedders import TransformerEmbedding

    emb = TransformerEmbedding(tiny_bert, pooling="mean").eval()
    batch = make_batch(SENTENCES, extra_tokens=2)
    with torch.no_grad():
        batched = emb(batch)
        assert batched.shape == (3, 8, 16) and torch.all(batched[~batch.mask] == 0)
        for b, sentence in enumerate(SENTENCES):
            torch.testing.assert_close(batched[b, : len(sentence)], emb(make_batch([sentence]))[0], atol=1e-5, rtol=1e-4)

    # "Anika Dravetz joined Quandor Bank ." is 11 sub-words + 2 specials; keep 4 (an ##ika dr ##av)
    short = TransformerEmbedding(tiny_bert, pooling="mean", max_length=6).eval()
    with caplog.at_level(logging.WARNING), torch.no_grad():
        out = short(make_batch([SENTENCES[0], SENTENCES[2]]))
    assert "truncated" in caplog.text
    assert short.truncated_words == 4  # "Dravetz" keeps two of its pieces; the four words after it are lost
    assert out[0, :2].abs().sum(dim=-1).gt(0).all() and torch.all(out[0, 2:] == 0)
    torch.testing.assert_close(out[1, :1], batched[2, :1], atol=1e-5, rtol=1e-4)  # a short sentence is unaffected


def test_transformer_gradients_and_freeze(tiny_bert) -> None:
    from onlstm_tasks.embedders import TransformerEmbedding

    emb = TransformerEmbedding(tiny_bert)
    emb(make_batch(SENTENCES)).pow(2).sum().backward()
    for name, p in emb.named_parameters():
        assert p.grad is not None, name

    frozen = TransformerEmbedding(tiny_bert, freeze=True).train()
    assert not frozen.model.training and not any(p.requires_grad for p in frozen.parameters())
    assert not frozen(make_batch(SENTENCES)).requires_grad
