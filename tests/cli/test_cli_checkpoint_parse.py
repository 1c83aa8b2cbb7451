"""validate/test/predict with --ckpt_path restore the model's configuration from the checkpoint without
re-parsing the data facts (vocabularies, labels), which come from the data module instead."""

from __future__ import annotations

import copy

import jsonargparse
import pytest
import torch
from helpers.cli import tiny_ner_config

from onlstm_tasks.cli import main
from onlstm_tasks.cli.lightning_cli import DATA_FACTS


pytestmark = pytest.mark.usefixtures("one_thread")  # (conftest.py)


def test_checkpoint_hyper_parameters_are_parsed_without_the_data_facts(tmp_path, monkeypatch):
    # a checkpoint whose encoder differs from the config's: restoring must bring the checkpoint's back
    ckpt_encoder = {"class_path": "onlstm_tasks.encoders.ONLSTM", "init_args": {"hidden_size": 12, "chunk_size": 4}}
    main(["fit", "--config", str(tiny_ner_config(tmp_path / "a", encoder=ckpt_encoder, max_epochs=1,
                                                 limit_train_batches=1, limit_val_batches=1)),
          "--test_after_fit", "false"])
    best = tmp_path / "a" / "ckpt" / "best.ckpt"
    assert set(DATA_FACTS) <= set(torch.load(best, weights_only=True)["hyper_parameters"])

    parsed_objects = []
    original = jsonargparse.ArgumentParser.parse_object

    def spy(self, cfg_obj, *args, **kwargs):
        parsed_objects.append(copy.deepcopy(cfg_obj))  # parse_object may rewrite what it is given
        return original(self, cfg_obj, *args, **kwargs)

    monkeypatch.setattr(jsonargparse.ArgumentParser, "parse_object", spy)
    config = tiny_ner_config(tmp_path / "b", limit_test_batches=1)  # its encoder: bidirectional, hidden 16
    main(["test", "--config", str(config), "--ckpt_path", str(best)])
    restored = [obj["test"]["model"] for obj in parsed_objects if "test" in obj and "model" in obj["test"]]
    assert len(restored) == 1
    kwargs = restored[0]["dict_kwargs"]
    assert not set(DATA_FACTS) & set(kwargs)  # the facts were not re-parsed...
    assert kwargs["encoder"]["init_args"]["hidden_size"] == 12  # ...but the rest of the model was restored
