"""NERTagger on the bundled sample's vocabularies: the shared model invariants for every encoder, IOBES decoding,
a tiny offline BERT embedder, and an overfit check."""

from __future__ import annotations

import functools

import lightning.pytorch as pl
import pytest
import torch
from helpers.model_invariants import (
    assert_batched_equals_single,
    assert_checkpoint_round_trip,
    assert_gradients_reach_every_parameter,
)

from onlstm_tasks.data.ner.module import NERDataModule
from onlstm_tasks.embedders.word_char import WordCharEmbedder
from onlstm_tasks.encoders import GRU, LSTM, ONLSTM
from onlstm_tasks.sample_data import sample_path
from onlstm_tasks.tasks.ner import NERTagger, scheme_of
from onlstm_tasks.trees.source import HasDistances

EMBEDDER = functools.partial(WordCharEmbedder, word_dim=16, char_dim=8, char_features=8, dropout=0.0)
ENCODERS = {
    "onlstm": functools.partial(ONLSTM, hidden_size=16, chunk_size=4, bidirectional=True),
    "lstm": functools.partial(LSTM, hidden_size=16, bidirectional=True),
    "gru": functools.partial(GRU, hidden_size=16, bidirectional=True),
}
ENCODER_TYPES = {"onlstm": ONLSTM, "lstm": LSTM, "gru": GRU}


def sample_data(**options) -> NERDataModule:
    dm = NERDataModule(path=str(sample_path("ner")), data_dir=None, revision=None, format="columns",
                       reader_options={"scheme": "iob2"}, **options)
    dm.setup("fit")
    return dm


def build(dm: NERDataModule, encoder: str = "onlstm", seed: int = 0, **options) -> NERTagger:
    torch.manual_seed(seed)
    options = {"embedder": EMBEDDER, "dropout": 0.0, **options}
    return NERTagger(dm.word_vocab, dm.char_vocab, dm.labels, encoder=ENCODERS[encoder], **options)


pytestmark = pytest.mark.usefixtures("one_thread")  # (conftest.py)


@pytest.fixture(scope="module")
def dm() -> NERDataModule:
    return sample_data()


def varied_indices(dm: NERDataModule, split: str = "validation", count: int = 6) -> list[int]:
    """Indices of ``count`` sentences of pairwise different lengths (so a batch of them holds padding)."""
    by_length: dict[int, int] = {}
    for i, ex in enumerate(dm.examples(split)):
        by_length.setdefault(len(ex), i)
    lengths = sorted(by_length)
    picked = [by_length[n] for n in lengths[:: max(1, len(lengths) // count)]][:count]
    assert len(picked) == count and len({len(dm.examples(split)[i]) for i in picked}) == count
    return picked


def per_example(model: NERTagger):
    """``predict(batch)`` for the padding-invariance helper: everything the tagger computes, cut per sentence."""

    def predict(batch) -> list[dict]:
        emissions, encoded = model.net.emissions(batch.tokens)
        tags = model.net.decode(batch.tokens)
        predictions = model.predict_step(batch, 0)
        out = []
        for b, n in enumerate(batch.tokens.mask.sum(dim=1).tolist()):
            row = {"emissions": emissions[b, :n], "hidden": encoded.hidden[b, :n], "tags": tags[b, :n],
                   "prediction": {k: v for k, v in predictions[b].items() if k != "index"}}
            if isinstance(encoded, HasDistances):
                row["distances"] = encoded.distances[:, :, b, :n]
            out.append(row)
        return out

    return predict


# ---- the shared invariants, for every encoder -------------------------------------------------------------


@pytest.mark.parametrize("encoder", sorted(ENCODERS))
def test_encoder_factory_is_used(dm, encoder) -> None:
    model = build(dm, encoder)
    assert type(model.net.encoder) is ENCODER_TYPES[encoder]
    assert model.net.encoder.input_size == model.net.embedder.output_size == 16 + 8
    assert model.net.emit.out_features == len(dm.labels)


@pytest.mark.parametrize("encoder", sorted(ENCODERS))
def test_gradients_reach_every_parameter(dm, encoder) -> None:
    model = build(dm, encoder).train()
    batch = next(iter(dm.train_dataloader()))
    assert_gradients_reach_every_parameter(model, model.net.loss(batch.tokens, batch.tags))


def test_gradient_helper_names_a_dead_parameter(dm) -> None:
    model = build(dm).train()
    model.net.emit.register_parameter("unused", torch.nn.Parameter(torch.zeros(3)))
    batch = next(iter(dm.train_dataloader()))
    with pytest.raises(AssertionError, match=r"no gradient: \['net\.emit\.unused'\]"):
        assert_gradients_reach_every_parameter(model, model.net.loss(batch.tokens, batch.tags))


@pytest.mark.parametrize("encoder", sorted(ENCODERS))
def test_batched_predictions_equal_single(dm, encoder) -> None:
    model = build(dm, encoder).eval()
    collate = dm.val_dataloader().collate_fn
    with torch.no_grad():
        assert_batched_equals_single(per_example(model), collate, varied_indices(dm))


def test_batched_helper_detects_padding_leaks(dm) -> None:
    """The helper must fail for a model whose outputs depend on padding (here: a mean over the padded batch)."""
    model = build(dm).eval()
    collate = dm.val_dataloader().collate_fn

    def leaky(batch):
        emissions, _ = model.net.emissions(batch.tokens)
        emissions = emissions + emissions.mean(dim=1, keepdim=True)  # the mean includes padded positions
        return [emissions[b, :n] for b, n in enumerate(batch.tokens.mask.sum(dim=1).tolist())]

    with torch.no_grad(), pytest.raises(AssertionError, match="batched vs alone"):
        assert_batched_equals_single(leaky, collate, varied_indices(dm))


@pytest.mark.parametrize("encoder", sorted(ENCODERS))
def test_checkpoint_round_trip(dm, encoder, tmp_path) -> None:
    model = build(dm, encoder)
    with torch.no_grad():  # move the weights away from any default initialisation
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    batch = dm.val_dataloader().collate_fn(varied_indices(dm))
    loaded = assert_checkpoint_round_trip(
        NERTagger, model, tmp_path, lambda m: (m.net.emissions(batch.tokens)[0], m.net.decode(batch.tokens)))
    assert type(loaded.net.encoder) is ENCODER_TYPES[encoder]
    assert loaded.labels == dm.labels and loaded.hparams.word_vocab == dm.word_vocab


# ---- tag schemes -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "scheme"),
    [
        (["O", "B-PER", "I-PER"], "iob2"),
        (["O"], "iob2"),
        (["O", "B-PER", "I-PER", "E-PER", "S-PER"], "iobes"),
        (["O", "S-LOC"], "iobes"),
        (["O", "B-E-MAIL", "I-E-MAIL", "B-S-X", "I-S-X"], "iob2"),  # E-/S- inside a type name is not a prefix
    ],
)
def test_scheme_of(labels, scheme) -> None:
    assert scheme_of(labels) == scheme


def iobes_errors(tags: list[str]) -> list[str]:
    """Every violation of IOBES in ``tags`` (independent of the package's transition tables)."""
    errors, open_type = [], None  # type of the entity an I-/E- may continue
    for i, tag in enumerate(tags):
        prefix, typ = ("O", None) if tag == "O" else tag.split("-", 1)
        if prefix in ("I", "E") and typ != open_type:
            errors.append(f"{i}: {tag} does not continue an entity")
        if prefix in ("O", "B", "S") and open_type is not None:
            errors.append(f"{i}: {tag} while {open_type} is open")
        open_type = typ if prefix in ("B", "I") else None
    if open_type is not None:
        errors.append(f"end: {open_type} never closed")
    return errors


def iobes_entities(tags: list[str]) -> list[tuple[str, int, int]]:
    spans, start = [], 0
    for i, tag in enumerate(tags):
        if tag[:2] in ("B-", "S-"):
            start = i
        if tag[:2] in ("E-", "S-"):
            spans.append((tag[2:], start, i + 1))
    return spans


def test_iobes_tagger_decodes_valid_iobes_and_reports_iob2() -> None:
    dm = sample_data(tag_scheme="iobes")
    assert scheme_of(dm.labels) == "iobes"
    model = build(dm).eval()
    assert model.tag_scheme == "iobes"
    # push the emissions towards tags that cannot stand alone, so unconstrained choices would be invalid
    with torch.no_grad():
        for i, label in enumerate(dm.labels):
            model.net.emit.bias[i] += 3.0 if label[:2] in ("I-", "E-") else 0.0
    loader = dm.val_dataloader()
    batch = next(iter(loader))
    with torch.no_grad():
        emissions, _ = model.net.emissions(batch.tokens)
        decoded = model.net.decode(batch.tokens)
        predictions = model.predict_step(batch, 0)
    lengths = batch.tokens.mask.sum(dim=1).tolist()
    greedy = [[dm.labels[k] for k in emissions[b, :n].argmax(-1).tolist()] for b, n in enumerate(lengths)]
    assert any(iobes_errors(tags) for tags in greedy), "test too weak: greedy tags are valid anyway"
    seen_e_or_s = False
    for b, n in enumerate(lengths):
        tags = [dm.labels[k] for k in decoded[b, :n].tolist()]
        assert iobes_errors(tags) == [], (b, tags)
        seen_e_or_s |= any(t[:2] in ("E-", "S-") for t in tags)
        pred = predictions[b]
        assert pred["index"] == batch.index[b] and pred["tokens"] == batch.tokens.words[b]
        expected_iob2 = [t if t == "O" else {"B": "B", "S": "B", "I": "I", "E": "I"}[t[0]] + t[1:] for t in tags]
        assert pred["tags"] == expected_iob2
        assert [tuple(e) for e in pred["entities"]] == iobes_entities(tags)
    assert seen_e_or_s, "test too weak: no E-/S- tag was decoded"


# ---- a tiny offline BERT as part of the embedder -----------------------------------------------------------

PIECES = ("[PAD] [UNK] [CLS] [SEP] [MASK] . , the a of in on at to and said open club city year fc united "
          "##s ##ing ##er ##or ##on ##ville ##mark ##port th an ##d ##a 0 1 2 3 4 5 6 7 8 9").split()


def tiny_bert(folder) -> str:
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir()
    (folder / "vocab.txt").write_text("\n".join(PIECES) + "\n", encoding="utf-8")
    BertTokenizerFast(str(folder / "vocab.txt"), do_lower_case=True).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(PIECES), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=128, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    BertModel(config).save_pretrained(folder)
    return str(folder)


def test_tiny_bert_embedder_trains(tmp_path) -> None:
    bert = tiny_bert(tmp_path / "bert")
    dm = sample_data(batch_size=8, eval_batch_size=8)
    torch.manual_seed(0)
    model = NERTagger(dm.word_vocab, dm.char_vocab, dm.labels, dropout=0.0, encoder=ENCODERS["onlstm"],
                      embedder=functools.partial(EMBEDDER, transformer=bert))
    assert model.net.embedder.output_size == 16 + 8 + 16
    # Lightning trains submodules in the mode they were built in; from_pretrained alone would leave BERT in eval
    assert [name for name, m in model.named_modules() if not m.training] == []
    batch = next(iter(dm.train_dataloader()))
    assert_gradients_reach_every_parameter(model, model.net.loss(batch.tokens, batch.tags))

    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    trainer = pl.Trainer(fast_dev_run=1, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, enable_checkpointing=False)
    trainer.fit(model, datamodule=dm)
    assert trainer.state.finished and torch.isfinite(trainer.callback_metrics["train_loss"])
    unchanged = [name for name, p in model.named_parameters() if torch.equal(p.detach(), before[name])]
    # the word-embedding tables change only in the rows of the batch's words; every tensor must move
    assert unchanged == [], f"not updated by the training step: {unchanged}"
    assert any(name.startswith("net.embedder.embed.parts.2.model.") for name in before)  # BERT was trained


# ---- overfitting a handful of sentences --------------------------------------------------------------------


def test_overfits_a_handful_of_sentences(dm) -> None:
    model = build(dm, optimizer=functools.partial(torch.optim.Adam, lr=0.03)).train()
    examples = dm.examples("train")
    with_entities = [i for i, ex in enumerate(examples) if any(t != "O" for t in ex.tags)][:8]
    batch = dm.train_dataloader().collate_fn(with_entities)
    optimizer = model.configure_optimizers()
    losses = []
    for _ in range(40):
        optimizer.zero_grad()
        loss = model.net.loss(batch.tokens, batch.tags)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0], losses
    model.eval()
    with torch.no_grad():
        decoded = model.net.decode(batch.tokens)
    mask = batch.tokens.mask
    assert torch.equal(decoded[mask], batch.tags[mask])  # the memorised sentences are tagged exactly
