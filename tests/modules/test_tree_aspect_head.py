"""TreeAwareAspectHead: padding invariance for every tree source, position weights by tree hops, clear errors; gold
trees from parser JSON into aspect batches; every interaction function in an AspectSentimentClassifier built from
YAML, trained one step; the CLI end to end with gold trees."""

from __future__ import annotations

import functools
import json
import sys

import pytest
import torch
import yaml
from helpers.paths import FIXTURES as FIXTURE_ROOT
from helpers.cli import tiny_absa_config
from helpers.model_invariants import assert_a_step_lowers_the_loss
from helpers.shared_data import SHARED_DATA, requires_shared_data

from helpers.yaml_build import from_yaml
from helpers.aspect_batch import D, LENGTHS, aspect_batch
from onlstm_tasks.cli import main
from onlstm_tasks.data.absa.module import AspectSentimentDataModule
from onlstm_tasks.data.core.examples import DataFormatError
from onlstm_tasks.embedders.word_char import WordCharEmbedder
from onlstm_tasks.encoders import LSTM, ONLSTM, DependencyGuidedEncoder
from onlstm_tasks.interaction import GCNInteraction
from onlstm_tasks.modules.tree_aspect_head import TreeAwareAspectHead
from onlstm_tasks.tasks.absa import AspectSentimentClassifier, HeadFactory
from onlstm_tasks.trees.heads import heads_to_tensor, hop_distances
from onlstm_tasks.trees.induce import distances_to_heads

torch.set_num_threads(1)

FIXTURES = FIXTURE_ROOT / "absa"
ENC = functools.partial(ONLSTM, hidden_size=8, chunk_size=2)
SOURCES = {
    "none": {"tree_source": "none"},
    "induced-hard": {"tree_source": "induced"},
    "induced-soft": {"tree_source": "induced", "induced_heads": "soft", "soft_temperature": 0.5},
    "gold": {"tree_source": "gold"},
    "gold-max-no-weights": {"tree_source": "gold", "pooling": "max", "position_weighting": False},
}
INTERACTION_CLASSES = ["SelfInteraction", "ConcatInteraction", "AdditionInteraction", "MLPInteraction",
                       "GatedInteraction", "GCNInteraction"]


def batch(seed=0):
    x, mask, aspect, g = aspect_batch(seed)
    trees = [distances_to_heads(torch.rand(n, generator=g).tolist()) for n in LENGTHS.tolist()]
    return x, mask, aspect, heads_to_tensor(trees, 7)


def head(seed=0, **options) -> TreeAwareAspectHead:
    torch.manual_seed(seed)
    return TreeAwareAspectHead(D, ENC, **options)


@pytest.mark.parametrize("source", SOURCES)
def test_padding_invariance_and_gradients(source):
    h = head(**SOURCES[source]).eval()
    assert h.output_size == 8
    x, mask, aspect, gold = batch()
    out = h(x, mask, aspect, gold)
    assert out.shape == (3, 8)
    noisy = torch.where(mask[..., None], x, torch.randn_like(x) * 50)
    torch.testing.assert_close(h(noisy, mask, aspect, gold), out)
    for b, n in enumerate(LENGTHS.tolist()):
        alone = h(x[b : b + 1, :n], mask[b : b + 1, :n], aspect[b : b + 1, :n], gold[b : b + 1, :n])
        torch.testing.assert_close(alone[0], out[b], atol=1e-6, rtol=1e-5)
    h.train()
    h(x, mask, aspect, gold).pow(2).sum().backward()
    for name, p in h.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_hop_distances_on_a_hand_made_tree():
    # 1-based heads [2, 0, 2, 3]: 0 - 1 - 2 - 3 is a path; second sentence: 0 <- 1, padded
    heads = heads_to_tensor([[2, 0, 2, 3], [0, 1]], 4)
    mask = torch.tensor([[True] * 4, [True, True, False, False]])
    sources = torch.tensor([[False, False, False, True], [True, False, False, False]])
    assert hop_distances(heads, mask, sources).tolist() == [[3, 2, 1, 0], [0, 1, 4, 4]]
    # a forest (two roots): the other tree is unreachable
    forest = heads_to_tensor([[0, 0, 2, 3]], 4)
    assert hop_distances(forest, mask[:1], sources[:1]).tolist() == [[4, 2, 1, 0]]


def test_position_weights_follow_tree_hops_or_linear_distance():
    mask = torch.ones(1, 5, dtype=torch.bool)
    aspect = torch.tensor([[False, False, False, False, True]])
    star = heads_to_tensor([[0, 1, 1, 1, 1]], 5)  # token 0 heads everyone: token 4 is 2 hops from 1, 2, 3
    weights = TreeAwareAspectHead.position_weights(star, mask, aspect)
    torch.testing.assert_close(weights, torch.tensor([[0.8, 0.6, 0.6, 0.6, 1.0]]))
    linear = TreeAwareAspectHead.position_weights(None, mask, aspect)
    torch.testing.assert_close(linear, torch.tensor([[0.2, 0.4, 0.6, 0.8, 1.0]]))
    soft = torch.nn.functional.one_hot(star, 5).float() * 0.9 + 0.02  # most probable heads = the star
    torch.testing.assert_close(TreeAwareAspectHead.position_weights(soft, mask, aspect), weights)


def test_the_tree_changes_the_output_and_gold_heads_reach_a_tree_encoder():
    x, mask, aspect, gold = batch()
    star = torch.where(mask, torch.zeros_like(gold), gold)
    h = head(tree_source="gold").eval()
    assert not torch.allclose(h(x, mask, aspect, gold), h(x, mask, aspect, star))
    # a dependency-guided encoder inside the head reads the same gold heads
    torch.manual_seed(0)
    nested = TreeAwareAspectHead(D, functools.partial(DependencyGuidedEncoder, encoder=ENC, tree_source="gold"))
    assert nested(x, mask, aspect, gold).shape == (3, 8)
    with pytest.raises(ValueError, match="tree_source='gold' needs gold dependency heads"):
        nested(x, mask, aspect)


def test_clear_errors():
    x, mask, aspect, _ = batch()
    with pytest.raises(ValueError, match="but LSTM returns none"):
        TreeAwareAspectHead(D, functools.partial(LSTM, hidden_size=8), tree_source="induced")(x, mask, aspect)
    with pytest.raises(ValueError, match="tree_source='gold' needs gold dependency heads"):
        head(tree_source="gold")(x, mask, aspect)
    with pytest.raises(ValueError, match="tree_source must be one of"):
        head(tree_source="parsed")


# ---- gold trees from parser JSON --------------------------------------------------------------------------


SPLIT_FILES = {"train": "Gadgets_Train_v1.xml", "validation": "Gadgets_Test_Gold.xml", "test": "Gadgets_Test_Gold.xml"}


def xml_data(**options) -> AspectSentimentDataModule:
    return AspectSentimentDataModule(path=str(FIXTURES / "xml"), parses=str(FIXTURES / "parses"), batch_size=4,
                                     data_files=SPLIT_FILES, **options)


def test_parses_give_every_batch_gold_heads_on_the_examples_words():
    data = xml_data()
    data.setup("fit")
    data.setup("test")
    for split in ("train", "validation", "test"):
        batch = data._collate(split)(list(range(len(data.examples(split)))))
        assert batch.heads is not None and batch.heads.shape == batch.tokens.mask.shape
    by_words = {tuple(words): heads[: len(words)] for split in ("train", "test")
                for batch in [data._collate(split)(list(range(len(data.examples(split)))))]
                for words, heads in zip(batch.tokens.words, batch.heads.tolist())}
    # PTB "The trackpad 's gestures feel natural ." -> the words "The trackpad's gestures feel natural ."
    assert by_words[("The", "trackpad's", "gestures", "feel", "natural", ".")] == [1, 2, 3, 3, 3, 3]
    # PTB quotes `` '' match the text's straight quotes: one word per token, the parser's tree unchanged
    words = ("Its", '"', "quick", "start", '"', "guide", "was", "useless", "&", "the", "price", "was", "fair", ".")
    assert by_words[words] == [5, 5, 3, 5, 5, 7, 7, 7, 12, 10, 12, 12, 7, 7]
    assert by_words[("The", "charger", "is", "bulky", ".")] == [1, 3, 3, 3, 3]


def test_a_sentence_without_parse_is_an_error(tmp_path):
    rows = json.loads((FIXTURES / "parses" / "Gadgets_Train_depparsed.json").read_text())
    (tmp_path / "Partial_depparsed.json").write_text(json.dumps(rows[1:]))
    data = AspectSentimentDataModule(path=str(FIXTURES / "xml"), parses=str(tmp_path))
    with pytest.raises(DataFormatError, match=r"Gadgets_Train_v1\.xml:\d+: no parse of this sentence in data\.parses"):
        data.setup("fit")
    with pytest.raises(FileNotFoundError, match="no \\*_depparsed.json file"):
        AspectSentimentDataModule(path=str(FIXTURES / "xml"), parses=str(tmp_path / "nowhere")).setup("fit")


def test_prediction_inputs_without_parses_get_no_heads(tmp_path):
    data = xml_data()
    data.setup("fit")
    ckpt = tmp_path / "absa.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {"word_vocab": data.word_vocab, "char_vocab": data.char_vocab,
                                                        "labels": data.labels}}, ckpt)
    predict = AspectSentimentDataModule(path=None, vocab_from=str(ckpt), parses=str(FIXTURES / "parses"),
                                        predict_file=str(FIXTURES / "predict.jsonl"))
    predict.setup("predict")
    assert next(iter(predict.predict_dataloader())).heads is None


@requires_shared_data
def test_semeval_laptops_parses_cover_the_hub_layout():
    data = AspectSentimentDataModule(path=str(SHARED_DATA / "setfit-absa-semeval-laptops"),
                                     parses=str(SHARED_DATA / "semeval2014_laptops"), eval_batch_size=256)
    data.setup("test")
    for batch in data.test_dataloader():
        assert batch.heads is not None
        lengths = batch.tokens.mask.sum(1, keepdim=True)
        assert ((batch.heads < lengths) | ~batch.tokens.mask).all()
        roots = (batch.heads == torch.arange(batch.heads.size(1))) & batch.tokens.mask
        assert (roots.sum(1) == 1).all()  # one tree per sentence


# ---- the classifier ---------------------------------------------------------------------------------------


def head_from_yaml(interaction: str, tree_source: str = "gold") -> HeadFactory:
    snippet = f"""
    class_path: onlstm_tasks.modules.tree_aspect_head.TreeAwareAspectHead
    init_args:
      encoder:
        class_path: onlstm_tasks.encoders.ONLSTM
        init_args: {{hidden_size: 8, chunk_size: 2}}
      interaction:
        class_path: onlstm_tasks.interaction.{interaction}
      tree_source: {tree_source}
    """
    return from_yaml(HeadFactory, snippet)


@pytest.fixture(scope="module")
def data() -> AspectSentimentDataModule:
    dm = xml_data(keep_conflict=True)
    dm.setup("fit")
    return dm


@pytest.mark.filterwarnings("ignore:You are trying to `self.log")
@pytest.mark.parametrize("interaction", INTERACTION_CLASSES)
def test_every_interaction_plugs_into_the_classifier(data, interaction):
    torch.manual_seed(0)
    model = AspectSentimentClassifier(
        data.word_vocab, data.char_vocab, data.labels, dropout=0.0, head=head_from_yaml(interaction),
        embedder=functools.partial(WordCharEmbedder, word_dim=8, char_encoder="none", dropout=0.0))
    assert type(model.net.head) is TreeAwareAspectHead and type(model.net.head.interaction).__name__ == interaction
    batch = next(iter(data.train_dataloader()))
    assert batch.heads is not None
    assert_a_step_lowers_the_loss(model, batch)


def test_cli_fits_a_gold_tree_classifier(tmp_path, monkeypatch):
    data = {"path": str(FIXTURES / "xml"), "data_files": SPLIT_FILES, "parses": str(FIXTURES / "parses"),
            "batch_size": 4}
    config_path = tiny_absa_config(tmp_path, data, head="TargetDependentHead", max_epochs=1, limit_train_batches=2)
    config = yaml.safe_load(config_path.read_text())
    head = config["model"]["init_args"]["head"]
    head["class_path"] = "onlstm_tasks.modules.tree_aspect_head.TreeAwareAspectHead"
    head["init_args"].update({"tree_source": "gold", "interaction": {
        "class_path": "onlstm_tasks.interaction.GCNInteraction", "init_args": {"num_layers": 2}}})
    config_path.write_text(yaml.safe_dump(config))
    monkeypatch.setattr(sys, "argv", ["onlstm-tasks"])
    main(["fit", "--config", str(config_path)])
    assert (tmp_path / "ckpt" / "last.ckpt").exists()
    loaded = AspectSentimentClassifier.load_from_checkpoint(tmp_path / "ckpt" / "last.ckpt", weights_only=False)
    assert isinstance(loaded.net.head.interaction, GCNInteraction) and loaded.net.head.interaction.num_layers == 2
