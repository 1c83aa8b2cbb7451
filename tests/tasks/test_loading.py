"""Loading a task model from a CLI checkpoint (``tasks/loading.py``): the same model Lightning's
``load_from_checkpoint`` builds, without passing the vocabularies through jsonargparse item by item."""

from __future__ import annotations

import lightning.pytorch.cli
import pytest
import torch

from helpers.paths import FIXTURES
from onlstm_tasks.tasks.loading import load_task_model, read_checkpoint, task_model_class

CHECKPOINTS = FIXTURES / "pre_move_checkpoints"


@pytest.mark.parametrize("name", ["ner_onlstm", "ner_dg_induced", "absa_tree_induced"])
def test_a_cli_checkpoint_loads_as_lightning_loads_it(monkeypatch, name):
    path = CHECKPOINTS / f"{name}.ckpt"
    hparams = read_checkpoint(path)["hyper_parameters"]
    assert hparams["_instantiator"] == "lightning.pytorch.cli.instantiate_module"  # written by the CLI
    want = task_model_class(hparams).load_from_checkpoint(str(path), map_location="cpu").eval()

    def refuse(*args, **kwargs):
        raise AssertionError("the vocabularies went through jsonargparse (quadratic in their size)")

    monkeypatch.setattr(lightning.pytorch.cli, "instantiate_module", refuse)
    got = load_task_model(path)
    assert type(got) is type(want) and not got.training
    # plain hyper-parameters as the CLI saves them, defaults of arguments newer than the checkpoint included
    # (Lightning's route keeps the built factories instead), with the checkpoint's vocabularies as they are
    assert set(hparams) <= set(got.hparams) and got.hparams["_instantiator"] == hparams["_instantiator"]
    assert all(got.hparams[fact] == hparams[fact] for fact in ("word_vocab", "char_vocab", "labels"))
    assert got.state_dict().keys() == want.state_dict().keys()
    for key, value in want.state_dict().items():
        assert torch.equal(got.state_dict()[key], value), key
