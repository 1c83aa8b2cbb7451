"""DependencyGuidedEncoder (Jie & Lu, 2019): padding invariance for every tree source, where each tree comes from,
gradients through soft heads, clear errors; gold heads from CoNLL-X into NER batches; every interaction function
in an NERTagger built from YAML, trained one step; the CLI end to end with gold trees."""

from __future__ import annotations

import functools
import sys

import pytest
import torch
import yaml
from helpers.cli import tiny_ner_config
from helpers.yaml_build import from_yaml
from helpers.tree_data import EMBEDDER, TREES, tree_data
from helpers.model_invariants import (
    assert_a_step_lowers_the_loss,
    assert_batched_equals_single,
    assert_checkpoint_round_trip,
)

from onlstm_tasks.cli import main
from onlstm_tasks.data.ner.module import NERDataModule, split_long
from onlstm_tasks.data.ner.readers import read_conllx
from onlstm_tasks.encoders import GRU, LSTM, ONLSTM, DependencyGuidedEncoder, EncoderOutput, TreeEncoder, TreeOutput
from onlstm_tasks.trees.source import HasDistances
from onlstm_tasks.encoders.base import combine_directions
from onlstm_tasks.interaction import ConcatInteraction, GCNInteraction, MLPInteraction, SelfInteraction
from onlstm_tasks.sample_data import sample_path
from onlstm_tasks.tasks.ner import EncoderFactory, NERTagger
from onlstm_tasks.trees.heads import heads_to_tensor, slice_heads
from onlstm_tasks.trees.induce import distances_to_heads, heads_tensor

torch.set_num_threads(1)

D = 6
STAGE = functools.partial(ONLSTM, hidden_size=8, chunk_size=2, bidirectional=True)
LENGTHS = torch.tensor([7, 5, 2, 1])
SOURCES = {
    "none": {"tree_source": "none"},
    "induced-hard": {"tree_source": "induced"},
    "induced-soft": {"tree_source": "induced", "induced_heads": "soft", "soft_temperature": 0.5},
    "gold": {"tree_source": "gold"},
}
INTERACTION_CLASSES = ["SelfInteraction", "ConcatInteraction", "AdditionInteraction", "MLPInteraction",
                       "GatedInteraction", "GCNInteraction"]


def dg(seed=0, encoder=STAGE, interaction=MLPInteraction, **options) -> DependencyGuidedEncoder:
    torch.manual_seed(seed)
    return DependencyGuidedEncoder(D, encoder, interaction, **options)


def padded_batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 7, D, generator=g)
    mask = torch.arange(7)[None, :] < LENGTHS[:, None]
    trees = [distances_to_heads(torch.rand(n, generator=g).tolist()) for n in LENGTHS.tolist()]
    return x, mask, heads_to_tensor(trees, 7)


# ---- the encoder ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_padding_invariance_for_every_tree_source(source):
    enc = dg(**SOURCES[source]).eval()
    x, mask, gold = padded_batch()
    out = enc(x, mask, gold)
    assert isinstance(enc, TreeEncoder) and out.hidden.shape == (4, 7, enc.output_size) == (4, 7, 16)
    noisy = torch.where(mask[..., None], x, torch.randn_like(x) * 100)
    torch.testing.assert_close(enc(noisy, mask, gold).hidden, out.hidden)
    for b, n in enumerate(LENGTHS.tolist()):
        alone = enc(x[b : b + 1, :n], None, gold[b : b + 1, :n])
        torch.testing.assert_close(out.hidden[b, :n], alone.hidden[0], atol=1e-6, rtol=1e-5)
        assert (out.hidden[b, n:] == 0).all()
        for layer, layer_alone in zip(out.layers, alone.layers):
            torch.testing.assert_close(layer[b, :n], layer_alone[0], atol=1e-6, rtol=1e-5)
        if isinstance(out, TreeOutput):
            tree, tree_alone = out.heads[0], alone.heads[0]
            got = tree[b, :n, :n] if tree.dim() == 3 else tree[b, :n]
            torch.testing.assert_close(got, tree_alone[0], atol=1e-6, rtol=1e-5)


def test_output_stacks_the_stages():
    enc = dg(num_stages=3, tree_source="induced")
    x, mask, _ = padded_batch()
    out = enc(x, mask)
    assert len(enc.stages) == 3 and len(enc.interactions) == 2 and len(out.layers) == 3
    assert out.distances.shape == (3, 2, 4, 7) and out.input_distances.shape == (3, 2, 4, 7)
    assert len(out.heads) == 2 and all(h.shape == (4, 7) and h.dtype == torch.long for h in out.heads)
    # the tree after stage l is induced from stage l's own distances (its last layer, directions averaged)
    for stage, tree in enumerate(out.heads):
        torch.testing.assert_close(tree, heads_tensor(combine_directions(out.distances[stage], "mean", dim=0), mask))
    assert isinstance(out, TreeOutput) and isinstance(out, HasDistances)
    assert not isinstance(dg(tree_source="none")(x, mask), TreeOutput)
    plain = dg(num_stages=1)(x, mask)
    assert len(plain.layers) == 1 and not isinstance(plain, TreeOutput) and isinstance(plain, HasDistances)


def test_concatenation_sizes_the_next_stage():
    enc = dg(interaction=ConcatInteraction)
    assert enc.interactions[0].output_size == 32 and enc.stages[1].input_size == 32 and enc.output_size == 16


def test_gold_heads_are_used_and_other_sources_ignore_them():
    x, mask, gold = padded_batch()
    other = torch.where(mask, torch.zeros_like(gold), gold)  # every token headed by token 0
    enc = dg(tree_source="gold").eval()
    assert torch.equal(enc(x, mask, gold).heads[0], gold)
    assert not torch.allclose(enc(x, mask, gold).hidden, enc(x, mask, other).hidden)
    plain = dg(tree_source="none").eval()
    torch.testing.assert_close(plain(x, mask, gold).hidden, plain(x, mask, other).hidden)
    # with the self connection the tree is irrelevant: a plain stack
    selfish = dg(tree_source="gold", interaction=SelfInteraction).eval()
    torch.testing.assert_close(selfish(x, mask, gold).hidden, selfish(x, mask, other).hidden)


def test_clear_errors():
    x, mask, gold = padded_batch()
    with pytest.raises(ValueError, match=r"tree_source='induced' needs .* but LSTM returns none"):
        dg(encoder=functools.partial(LSTM, hidden_size=8), tree_source="induced")(x, mask)
    with pytest.raises(ValueError, match="but GRU returns none"):
        dg(encoder=functools.partial(GRU, hidden_size=8), tree_source="induced")(x, mask)
    with pytest.raises(ValueError, match=r"tree_source='gold' needs gold dependency heads.*batch has none"):
        dg(tree_source="gold")(x, mask)
    with pytest.raises(ValueError, match="real tokens of the same sentence"):
        dg(tree_source="gold")(x, mask, torch.full_like(gold, 6))
    with pytest.raises(ValueError, match="tree_source must be one of"):
        dg(tree_source="parser")
    with pytest.raises(ValueError, match="induced_heads must be one of"):
        dg(induced_heads="fuzzy")
    with pytest.raises(ValueError, match="distance_layer=3 is out of range"):
        dg(tree_source="induced", distance_layer=3)(x, mask)
    # LSTM stages are fine with gold trees
    out = dg(encoder=functools.partial(LSTM, hidden_size=8), tree_source="gold")(x, mask, gold)
    assert not isinstance(out, HasDistances) and torch.equal(out.heads[0], gold)


@pytest.mark.parametrize("induced_heads", ["soft", "hard"])
def test_soft_heads_carry_the_loss_gradient_to_the_distances(induced_heads):
    """With soft heads the stage-1 distances get a gradient through the tree (the loss reads only hidden states);
    hard heads are an argmax, so the distances get none."""
    enc = dg(tree_source="induced", induced_heads=induced_heads, soft_temperature=0.5)
    captured: list[EncoderOutput] = []

    def keep(module, inputs, output):
        output.distances.retain_grad()
        captured.append(output)

    enc.stages[0].register_forward_hook(keep)
    x, mask, _ = padded_batch()
    enc(x, mask).hidden.pow(2).sum().backward()
    grad = captured[0].distances.grad
    if induced_heads == "hard":
        assert grad is None
    else:
        assert grad is not None and grad[..., mask].abs().sum() > 0
        master_forget = enc.stages[0].cell(0).weight_ih  # its gradient includes the path through the tree
        assert master_forget.grad is not None and master_forget.grad.abs().sum() > 0


# ---- gold heads in NER batches ----------------------------------------------------------------------------


def test_gold_heads_flow_from_conllx_into_batches():
    dm = tree_data()
    examples = dm.examples("validation")
    for batch in dm.val_dataloader():
        assert batch.heads is not None and batch.heads.shape == batch.tokens.mask.shape
        expected = heads_to_tensor([examples[i].heads for i in batch.index], batch.tokens.mask.size(1))
        assert torch.equal(batch.heads, expected)
    # toy-dev-3: "Maria met the Red Cross in Oslo ." -> 0-based heads, the root (met) pointing to itself
    assert read_conllx(TREES / "dev.conllx")[0][2].heads == (2, 0, 5, 5, 2, 7, 2, 2)
    batch = dm.val_dataloader().collate_fn([2])
    assert batch.heads.tolist() == [[1, 1, 4, 4, 1, 6, 1, 1]]


def test_sources_without_heads_give_batches_without_heads():
    dm = NERDataModule(path=str(sample_path("ner")), data_dir=None, revision=None, format="columns",
                       reader_options={"scheme": "iob2"})
    dm.setup("fit")
    assert next(iter(dm.train_dataloader())).heads is None


def test_long_sentences_keep_their_heads_cut_to_each_piece():
    (example, *_), _ = read_conllx(TREES / "train.conllx")  # Anna visited Oslo yesterday . (root: visited)
    pieces = split_long(example, 2)
    assert [p.words for p in pieces] == [("Anna", "visited"), ("Oslo", "yesterday"), (".",)]
    assert [p.heads for p in pieces] == [(2, 0), (0, 0), (0,)]
    assert slice_heads([3, 1, 4, 0, 6, 4, 4], 3, 7) == [0, 3, 1, 1]


# ---- NERTagger with the dependency-guided encoder ---------------------------------------------------------

def encoder_from_yaml(interaction: str, tree_source: str = "gold", **options) -> EncoderFactory:
    snippet = f"""
    class_path: onlstm_tasks.encoders.DependencyGuidedEncoder
    init_args:
      encoder:
        class_path: onlstm_tasks.encoders.ONLSTM
        init_args: {{hidden_size: 8, chunk_size: 2, bidirectional: true}}
      interaction:
        class_path: onlstm_tasks.interaction.{interaction}
      tree_source: {tree_source}
    """
    config = yaml.safe_load(snippet)
    config["init_args"].update(options)
    return from_yaml(EncoderFactory, config)


@pytest.fixture(scope="module")
def dm() -> NERDataModule:
    return tree_data()


@pytest.mark.filterwarnings("ignore:You are trying to `self.log")
@pytest.mark.parametrize("interaction", INTERACTION_CLASSES)
def test_every_interaction_plugs_into_the_ner_tagger(dm, interaction):
    torch.manual_seed(0)
    model = NERTagger(dm.word_vocab, dm.char_vocab, dm.labels, embedder=EMBEDDER, dropout=0.0,
                      encoder=encoder_from_yaml(interaction))
    assert type(model.net.encoder) is DependencyGuidedEncoder
    assert type(model.net.encoder.interactions[0]).__name__ == interaction
    batch = next(iter(dm.train_dataloader()))
    assert batch.heads is not None
    assert_a_step_lowers_the_loss(model, batch)


@pytest.mark.parametrize("source", ["induced-soft", "gold"])
def test_tagger_padding_invariance_and_checkpoint(dm, source, tmp_path):
    options = {k: v for k, v in SOURCES[source].items() if k != "tree_source"}
    torch.manual_seed(0)
    model = NERTagger(dm.word_vocab, dm.char_vocab, dm.labels, embedder=EMBEDDER, dropout=0.0,
                      encoder=encoder_from_yaml("GCNInteraction", SOURCES[source]["tree_source"], **options)).eval()
    collate = dm.val_dataloader().collate_fn

    def predict(batch):
        emissions, _ = model.net.emissions(batch.tokens, batch.heads)
        return [emissions[b, :n] for b, n in enumerate(batch.tokens.mask.sum(1).tolist())]

    with torch.no_grad():
        assert_batched_equals_single(predict, collate, [0, 1, 2])
    batch = collate([0, 1, 2])
    loaded = assert_checkpoint_round_trip(NERTagger, model, tmp_path,
                                          lambda m: m.net.decode(batch.tokens, batch.heads))
    assert type(loaded.net.encoder.interactions[0]) is GCNInteraction


def test_gold_tagger_without_gold_heads_names_the_problem(dm):
    model = NERTagger(dm.word_vocab, dm.char_vocab, dm.labels, embedder=EMBEDDER,
                      encoder=encoder_from_yaml("MLPInteraction"))
    batch = next(iter(dm.train_dataloader()))
    with pytest.raises(ValueError, match="tree_source='gold' needs gold dependency heads"):
        model.net.loss(batch.tokens, batch.tags)


def test_cli_fits_a_gold_tree_tagger(tmp_path, monkeypatch):
    data = {"path": str(TREES), "data_dir": None, "revision": None, "format": "conllx", "batch_size": 3}
    encoder = yaml.safe_load("""
    class_path: onlstm_tasks.encoders.DependencyGuidedEncoder
    init_args:
      encoder:
        class_path: onlstm_tasks.encoders.ONLSTM
        init_args: {hidden_size: 8, chunk_size: 2, bidirectional: true}
      interaction: {class_path: onlstm_tasks.interaction.MLPInteraction}
      tree_source: gold
    """)
    config = tiny_ner_config(tmp_path, data=data, encoder=encoder, max_epochs=1, limit_train_batches=2)
    monkeypatch.setattr(sys, "argv", ["onlstm-tasks"])
    main(["fit", "--config", str(config)])
    assert (tmp_path / "ckpt" / "last.ckpt").exists()
