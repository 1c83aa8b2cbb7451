"""``tree_source`` is one :class:`TreeSource` in every model that reads a tree: given whole (a TreeSource, or in
YAML a mapping of its fields), as its kind alone (the short form), or, deprecated, as the flat arguments of
configs and checkpoints written before it was passed whole."""

from __future__ import annotations

import contextlib
import functools

import pytest
from jsonargparse import ArgumentParser

from onlstm_tasks.encoders import ONLSTM, ChildSumTreeLSTM, DependencyGuidedEncoder
from onlstm_tasks.encoders.base import EncoderFactory, ONLSTMOutput
from onlstm_tasks.modules.tree_aspect_head import TreeAwareAspectHead
from onlstm_tasks.trees.source import TreeSource

ENC = functools.partial(ONLSTM, hidden_size=8, chunk_size=2, bidirectional=True)
BUILDERS = {
    "DependencyGuidedEncoder": lambda **kw: DependencyGuidedEncoder(6, ENC, **kw),
    "TreeAwareAspectHead": lambda **kw: TreeAwareAspectHead(6, ENC, **kw),
    "ChildSumTreeLSTM": lambda **kw: ChildSumTreeLSTM(6, 4, encoder=ENC, **kw),
}


def test_coerce_accepts_the_three_forms():
    whole = TreeSource("induced", "soft", 0, "max", 0.5)
    assert TreeSource.coerce(whole) is whole
    assert TreeSource.coerce({"kind": "induced", "induced_heads": "soft", "distance_layer": 0,
                              "direction_combination": "max", "soft_temperature": 0.5}) == whole
    assert TreeSource.coerce("gold") == TreeSource("gold")
    with pytest.raises(ValueError, match="tree_source must be one of"):
        TreeSource.coerce("parser")
    with pytest.raises(ValueError, match="tree_source must be a TreeSource"):
        TreeSource.coerce(3)


def test_flat_arguments_are_deprecated_but_mapped():
    with pytest.warns(DeprecationWarning, match="DG: the flat arguments distance_layer, induced_heads"):
        source = TreeSource.coerce("induced", "DG", induced_heads="soft", distance_layer=0, soft_temperature=None)
    assert source == TreeSource("induced", induced_heads="soft", distance_layer=0)
    with pytest.raises(ValueError, match="disagree"):
        TreeSource.coerce({"kind": "induced", "distance_layer": 0}, distance_layer=1)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_tree_model_takes_the_tree_source_whole(name):
    build = BUILDERS[name]
    source = TreeSource("induced", distance_layer=0, direction_combination="forward")
    assert build(tree_source=source).tree_source == source
    assert build(tree_source={"kind": "induced", "distance_layer": 0,
                              "direction_combination": "forward"}).tree_source == source
    assert build(tree_source="induced").tree_source == TreeSource("induced")
    with pytest.warns(DeprecationWarning, match=f"{name}: the flat arguments"):
        old = build(tree_source="induced", distance_layer=0, direction_combination="forward")
    assert old.tree_source == source


def test_the_tree_lstm_rejects_soft_heads():
    with pytest.raises(ValueError, match="induced_heads must be 'hard'"):
        ChildSumTreeLSTM(6, 4, encoder=ENC, tree_source={"kind": "induced", "induced_heads": "soft"})


def parse_encoder(init_args: dict):
    parser = ArgumentParser(exit_on_error=False)
    parser.add_argument("--encoder", type=EncoderFactory)
    cfg = parser.parse_object({"encoder": {"class_path": "onlstm_tasks.encoders.DependencyGuidedEncoder",
                                           "init_args": init_args}})
    return parser, cfg


@pytest.mark.parametrize("init_args, expected", [
    ({"tree_source": "gold"}, TreeSource("gold")),
    ({"tree_source": {"kind": "induced", "induced_heads": "soft", "soft_temperature": 0.5}},
     TreeSource("induced", "soft", soft_temperature=0.5)),
    ({"tree_source": "induced", "induced_heads": "soft", "soft_temperature": 0.5},  # written before: deprecated
     TreeSource("induced", "soft", soft_temperature=0.5)),
], ids=["short", "whole", "flat-deprecated"])
def test_yaml_forms_through_jsonargparse(init_args, expected):
    parser, cfg = parse_encoder({"encoder": {"class_path": "onlstm_tasks.encoders.ONLSTM",
                                             "init_args": {"hidden_size": 8, "chunk_size": 2}}, **init_args})
    dumped = parser.dump(cfg)
    assert "tree_source:" in dumped
    if isinstance(init_args["tree_source"], dict):
        assert "kind: induced" in dumped
    factory = parser.instantiate(cfg).encoder
    with pytest.warns(DeprecationWarning) if "induced_heads" in init_args else contextlib.nullcontext():
        encoder = factory(6)
    assert encoder.tree_source == expected



def test_distance_gate_chooses_the_master_gate_whose_distances_give_the_tree():
    import torch

    from onlstm_tasks.trees.induce import heads_tensor

    torch.manual_seed(0)
    mask = torch.ones(2, 7, dtype=torch.bool)
    mask[1, 5:] = False
    forget, inputs = torch.rand(2, 1, 2, 7), torch.rand(2, 1, 2, 7)  # [layers, directions, B, T]
    encoded = ONLSTMOutput(hidden=torch.zeros(2, 7, 4), layers=(), distances=forget, input_distances=inputs)
    for gate, d in (("forget", forget), ("input", inputs)):
        got = TreeSource("induced", distance_layer=1, distance_gate=gate).tree(mask, encoded=encoded)
        assert torch.equal(got, heads_tensor(d[1, 0], mask))
    assert not torch.equal(TreeSource("induced", distance_gate="input").tree(mask, encoded=encoded),
                           TreeSource("induced").tree(mask, encoded=encoded))
    with pytest.raises(ValueError, match="distance_gate must be one of"):
        TreeSource("induced", distance_gate="output")
    yaml = TreeSource.coerce({"kind": "lm", "lm_checkpoint": "lm.ckpt", "distance_gate": "input"})
    assert yaml.distance_gate == "input"
