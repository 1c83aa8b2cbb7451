"""Every shipped config parses through the CLI, encoder-swap pairs differ only in the encoder block, and an
``lr_scheduler`` given in YAML reaches ``configure_optimizers``. ``--print_config`` builds nothing:
tests/cli/test_every_config.py instantiates every config and runs a training and a validation step."""

import sys

import pytest
import torch
import yaml

from helpers.paths import REPO
from helpers.cli import tiny_ner_config
from onlstm_tasks.cli import main
from onlstm_tasks.cli.lightning_cli import TasksCLI
from helpers.shared_data import SHARED_DATA, requires_shared_data

CONFIGS = sorted((REPO / "configs").rglob("*.yaml"))


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_config_parses(config, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["onlstm-tasks"])
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(config), "--print_config"])
    assert exit_info.value.code in (0, None)
    assert "class_path" in capsys.readouterr().out


def test_ontonotes_pair_differs_only_in_the_encoder():
    configs_dir = REPO / "configs"
    onlstm = yaml.safe_load((configs_dir / "ner/ontonotes_onlstm_crf.yaml").read_text())
    lstm = yaml.safe_load((configs_dir / "ner/ontonotes_lstm_crf.yaml").read_text())
    assert onlstm["model"]["init_args"].pop("encoder") != lstm["model"]["init_args"].pop("encoder")
    assert onlstm == lstm


def _load(name: str) -> dict:
    return yaml.safe_load((REPO / "configs" / name).read_text())


@pytest.mark.parametrize("domain", ["restaurants", "laptops"])
@pytest.mark.parametrize("head", ["td", "attention"])
def test_absa_encoder_pairs_differ_only_in_the_encoder(domain, head):
    a, b = _load(f"absa/semeval14_{domain}_onlstm_{head}.yaml"), _load(f"absa/semeval14_{domain}_lstm_{head}.yaml")
    assert a["model"]["init_args"]["head"]["init_args"].pop("encoder") != \
        b["model"]["init_args"]["head"]["init_args"].pop("encoder")
    assert a == b


@pytest.mark.parametrize("domain", ["restaurants", "laptops"])
def test_absa_head_pairs_differ_only_in_the_head_class(domain):
    a, b = _load(f"absa/semeval14_{domain}_onlstm_td.yaml"), _load(f"absa/semeval14_{domain}_onlstm_attention.yaml")
    assert a["model"]["init_args"]["head"].pop("class_path") != b["model"]["init_args"]["head"].pop("class_path")
    assert a == b


def _without_tree_source(config: dict, *path: str) -> tuple[str, dict]:
    block = config["model"]["init_args"]
    for key in path:
        block = block[key]["init_args"]
    if isinstance(block["tree_source"], dict) and block["tree_source"].get("kind") == "lm":  # the LM's fields too
        return block.pop("tree_source")["kind"], config
    if isinstance(block["tree_source"], dict):  # the whole TreeSource: only its kind may differ
        return block["tree_source"].pop("kind"), config
    return block.pop("tree_source"), config


def _without_whole_tree_source(config: dict, *path: str) -> dict:
    block = config["model"]["init_args"]
    for key in path:
        block = block[key]["init_args"]
    block.pop("tree_source")
    return config


def test_dependency_guided_ner_configs_differ_only_in_the_tree_source():
    configs = {s: _load(f"ner/uner_onlstm_crf_dg_{s}.yaml") for s in ("none", "induced", "gold", "lm")}
    stripped = {s: _without_tree_source(c, "encoder") for s, c in configs.items()}
    assert {s: source for s, (source, _) in stripped.items()} == {s: s for s in configs}
    assert stripped["none"][1] == stripped["induced"][1] == stripped["gold"][1]
    # lm: the tree source replaced whole (its checkpoint, layer and directions); the rest the same
    assert stripped["lm"][1] == _without_whole_tree_source(_load("ner/uner_onlstm_crf_dg_induced.yaml"), "encoder")


def test_tree_aware_absa_configs_differ_only_in_the_tree_source_and_gold_parses():
    configs = {s: _load(f"absa/semeval14_laptops_onlstm_tree_{s}.yaml") for s in ("none", "induced", "gold", "lm")}
    stripped = {s: _without_tree_source(c, "head") for s, c in configs.items()}
    assert {s: source for s, (source, _) in stripped.items()} == {s: s for s in configs}
    assert stripped["lm"][1] == _without_whole_tree_source(_load("absa/semeval14_laptops_onlstm_tree_induced.yaml"),
                                                           "head")
    assert stripped["gold"][1]["data"]["init_args"].pop("parses")
    assert "parses" not in stripped["none"][1]["data"]["init_args"]
    assert stripped["none"][1] == stripped["induced"][1] == stripped["gold"][1]


# ------------------------------------------------------------------------------------------ uner config defaults


def test_uner_config_writes_predictions_under_runs_uner():
    config = _load("ner/uner_onlstm_crf.yaml")
    writers = [c for c in config["trainer"]["callbacks"]
               if c["class_path"] == "onlstm_tasks.callbacks.JsonlPredictionWriter"]
    # no explicit output: the writer writes predictions.jsonl in the trainer's default_root_dir
    assert len(writers) == 1 and not (writers[0].get("init_args") or {}).get("output")
    assert config["trainer"]["default_root_dir"] == "runs/uner"


@requires_shared_data
def test_uner_config_default_data_files_exist_in_the_kit():
    from onlstm_tasks.data.ner.module import NERDataModule

    data = _load("ner/uner_onlstm_crf.yaml")["data"]["init_args"]
    assert data["data_files"] == {"train": "en_ewt-uner-dev.conllx", "test": "en_ewt-uner-test.conllx"}
    # the config's path is relative to the project root, where the CLI runs
    splits = NERDataModule(**{**data, "path": str(SHARED_DATA / "uner_en_ewt")}).splits()
    assert sorted(splits) == ["test", "train", "validation"]  # validation carved from the training split
    assert all(splits.values())


# ------------------------------------------------------------------------------------- lr schedulers from YAML

SCHEDULERS = {
    "StepLR": {"class_path": "torch.optim.lr_scheduler.StepLR", "init_args": {"step_size": 3, "gamma": 0.5}},
    # the monitored metric is val_f1, which improves upwards
    "ReduceLROnPlateau": {"class_path": "torch.optim.lr_scheduler.ReduceLROnPlateau",
                          "init_args": {"mode": "max", "factor": 0.5, "patience": 2}},
}


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_ner_config_with_an_lr_scheduler_parses(name, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["onlstm-tasks"])
    config = _load("ner/uner_onlstm_crf.yaml")
    config["model"]["init_args"]["lr_scheduler"] = SCHEDULERS[name]
    path = tmp_path / "with_scheduler.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(path), "--print_config"])
    assert exit_info.value.code in (0, None)
    printed = yaml.safe_load(capsys.readouterr().out)["model"]["init_args"]["lr_scheduler"]
    assert printed["class_path"] == SCHEDULERS[name]["class_path"]
    assert printed["init_args"].items() >= SCHEDULERS[name]["init_args"].items()


def _cli(tmp_path, scheduler: dict, **trainer) -> TasksCLI:
    """LightningCLI (not run) on a tiny config (sample data) with ``scheduler`` as the NERTagger's lr_scheduler."""
    config = yaml.safe_load(tiny_ner_config(tmp_path, **trainer).read_text())
    config["model"]["init_args"]["lr_scheduler"] = scheduler
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return TasksCLI(model_class=None, datamodule_class=None, subclass_mode_model=True, subclass_mode_data=True,
                    args=["--config", str(path)], run=False, save_config_kwargs={"overwrite": True},
                    trainer_defaults={"use_distributed_sampler": False})  # as main() builds it


def test_configure_optimizers_returns_the_step_lr_scheduler(tmp_path):
    configured = _cli(tmp_path, SCHEDULERS["StepLR"]).model.configure_optimizers()
    optimizer, scheduler = configured["optimizer"], configured["lr_scheduler"]["scheduler"]
    assert isinstance(optimizer, torch.optim.Adam) and optimizer.param_groups[0]["lr"] == 0.01
    assert isinstance(scheduler, torch.optim.lr_scheduler.StepLR)
    assert scheduler.optimizer is optimizer and (scheduler.step_size, scheduler.gamma) == (3, 0.5)


def test_configure_optimizers_returns_reduce_on_plateau_maximising_val_f1(tmp_path):
    configured = _cli(tmp_path, SCHEDULERS["ReduceLROnPlateau"]).model.configure_optimizers()
    scheduler = configured["lr_scheduler"]["scheduler"]
    assert isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)
    assert scheduler.optimizer is configured["optimizer"]
    assert (scheduler.mode, scheduler.factor, scheduler.patience) == ("max", 0.5, 2)
    assert configured["lr_scheduler"]["monitor"] == "val_f1"


def test_reduce_on_plateau_steps_on_val_f1_during_fit(tmp_path):
    cli = _cli(tmp_path, SCHEDULERS["ReduceLROnPlateau"], max_epochs=2, limit_train_batches=1)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)  # Lightning raises if val_f1 is never logged
    scheduler = cli.trainer.lr_scheduler_configs[0].scheduler
    assert scheduler.last_epoch == 2  # stepped after each epoch's validation
    assert scheduler.best > float("-inf")  # on a val_f1 value (the start value is -inf in mode max)


def test_reduce_on_plateau_minimising_a_score_is_an_error(tmp_path):
    wrong = {"class_path": "torch.optim.lr_scheduler.ReduceLROnPlateau", "init_args": {"factor": 0.5}}  # mode min
    with pytest.raises(ValueError, match="set its mode to 'max'"):
        _cli(tmp_path, wrong).model.configure_optimizers()


# ------------------------------------------------------------------------------------------ language models


def test_language_model_configs_differ_only_where_they_say():
    uni, bi, lstm = (_load(f"lm/ontonotes_{v}.yaml") for v in ("onlstm", "onlstm_bi", "lstm"))
    assert (uni["model"]["init_args"].pop("bidirectional"), bi["model"]["init_args"].pop("bidirectional")) == (
        False, True)
    assert uni["model"] == bi["model"] and uni["data"] == bi["data"]
    assert lstm["model"]["init_args"].pop("bidirectional") is False
    assert lstm["model"]["init_args"].pop("encoder") != uni["model"]["init_args"].pop("encoder")
    assert (lstm["model"]["init_args"].pop("tie_weights"), uni["model"]["init_args"].pop("tie_weights")) == (
        False, True)
    assert lstm["model"] == uni["model"] and lstm["data"] == uni["data"]
    hub = _load("lm/wikitext103_onlstm.yaml")["data"]["init_args"]
    assert (hub["path"], hub["name"], hub["mode"]) == ("Salesforce/wikitext", "wikitext-103-raw-v1", "stream")


@pytest.mark.parametrize("init_path, scratch_path, holder", [
    ("ner/ontonotes_onlstm_crf_lm_init.yaml", "ner/ontonotes_onlstm_crf_lm_scratch.yaml", "encoder"),
    ("absa/semeval14_laptops_onlstm_td_lm_init.yaml", "absa/semeval14_laptops_onlstm_td_lm_scratch.yaml", "head"),
])
def test_lm_initialised_pairs_differ_only_in_pretrained_lm_and_match_the_language_model(init_path, scratch_path,
                                                                                         holder):
    """holder: the model argument whose ``encoder`` the language model's stacks start (NER: IndependentDirections
    over them; TD head: its left and right context encoders)."""
    init, scratch = _load(init_path), _load(scratch_path)
    assert init["model"]["init_args"].pop("pretrained_lm") == \
        "runs/lm_unlabelled_en_bi/lightning_logs/version_0/checkpoints/best.ckpt"
    for config in (init, scratch):  # each writes its own run folder
        config["trainer"].pop("default_root_dir"), config["trainer"].pop("logger")
    assert init == scratch
    lm_config = _load("lm/unlabelled_en_onlstm_bi.yaml")
    lm = lm_config["model"]["init_args"]
    assert lm["bidirectional"] and lm_config["trainer"]["default_root_dir"] == "runs/lm_unlabelled_en_bi"
    task = scratch["model"]["init_args"]
    encoder = task[holder]["init_args"]["encoder"]
    assert encoder["class_path"] == lm["encoder"]["class_path"]
    shape = ("hidden_size", "chunk_size", "num_layers")  # the task sets its own dropout
    assert {k: encoder["init_args"][k] for k in shape} == {k: lm["encoder"]["init_args"][k] for k in shape}
    assert task["embedder"]["init_args"]["word_dim"] == lm["embedding_dim"]


@pytest.mark.parametrize("encoder", ["onlstm", "lstm"])
def test_vectors_configs_differ_from_the_plain_recipe_only_in_the_vectors_and_run_folder(encoder):
    vectors, plain = _load(f"ner/ontonotes_{encoder}_crf_vectors.yaml"), _load(f"ner/ontonotes_{encoder}_crf.yaml")
    embedder = vectors["model"]["init_args"]["embedder"]["init_args"]
    data = vectors["data"]["init_args"]
    path = embedder.pop("pretrained")
    assert path == data.pop("vectors") and path.endswith(f".{embedder['word_dim']}d.txt")
    assert embedder.pop("fine_tune") == "all" and data.pop("vectors_max_words") == 100_000
    assert vectors["model"]["init_args"]["optimizer"]["init_args"].pop("fused") is True
    folder = f"runs/ontonotes_{encoder}_vectors"
    assert yaml.safe_dump(vectors).replace(folder, "runs/ontonotes") == yaml.safe_dump(plain)


def test_vectors_configs_pair_differs_only_in_the_encoder_and_run_folder():
    onlstm, lstm = _load("ner/ontonotes_onlstm_crf_vectors.yaml"), _load("ner/ontonotes_lstm_crf_vectors.yaml")
    assert onlstm["model"]["init_args"].pop("encoder") != lstm["model"]["init_args"].pop("encoder")
    assert yaml.safe_dump(onlstm).replace("onlstm_vectors", "lstm_vectors") == yaml.safe_dump(lstm)


def test_the_gpu_config_differs_from_the_shipped_one_only_in_batches_optimiser_and_folder():
    gpu, shipped = _load("ner/ontonotes_onlstm_crf_gpu.yaml"), _load("ner/ontonotes_onlstm_crf.yaml")
    assert gpu["data"]["init_args"].pop("max_tokens") == 4096
    assert gpu["data"]["init_args"].pop("pad_to_multiple_of") == 8
    assert gpu["data"]["init_args"].pop("batch_size") == 128 and shipped["data"]["init_args"].pop("batch_size") == 32
    assert gpu["model"]["init_args"]["optimizer"]["init_args"] == {"lr": 0.003, "fused": True}
    gpu["model"]["init_args"]["optimizer"]["init_args"] = shipped["model"]["init_args"]["optimizer"]["init_args"]
    assert yaml.safe_dump(gpu).replace("runs/ontonotes_gpu", "runs/ontonotes") == yaml.safe_dump(shipped)
