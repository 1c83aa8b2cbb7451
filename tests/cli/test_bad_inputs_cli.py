"""Bad inputs to ``onlstm-tasks``: each refused with one line ``error: ...`` and exit code 2, no traceback (issue 22:
items 5-12 and 14). In-process ``main([...])`` calls, fast: most fail before any data is read."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from helpers.paths import REPO
from onlstm_tasks.cli import main

ROOT = REPO
QUICK = str(ROOT / "configs/quickstart.yaml")
SAMPLE = str(ROOT / "onlstm_tasks/sample_data/ner")


@pytest.fixture(autouse=True)
def _fresh_log_handler():
    """main() attaches a stderr handler to the package logger: drop it after each test (capsys swaps stderr)."""
    import logging

    yield
    logging.getLogger("onlstm_tasks").handlers.clear()


def run(capsys, *args: str) -> tuple[int, list[str]]:
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:") or "Traceback" in line]
    return exit_info.value.code, lines


def quick(tmp_path, *extra: str) -> list[str]:
    return ["--config", QUICK, "--data.init_args.path", SAMPLE, "--trainer.default_root_dir", str(tmp_path),
            "--trainer.logger.init_args.save_dir", str(tmp_path), *extra]


def test_config_typo_did_you_mean(capsys, tmp_path):  # item 11
    code, lines = run(capsys, "fit", *quick(tmp_path, "--model.init_args.encoder.init_args.hiden_size", "30"))
    assert code == 2
    assert lines == ["error: unknown key `hiden_size` in model.init_args.encoder.init_args (ONLSTM); did you mean "
                     "`hidden_size`?"]


def test_chunk_size_one_line(capsys, tmp_path):  # item 5: no vocabulary dump
    code, lines = run(capsys, "fit", *quick(tmp_path, "--model.init_args.encoder.init_args.hidden_size", "30"))
    assert code == 2 and len(lines) == 1
    assert "multiple of chunk_size" in lines[0] and len(lines[0]) < 300
    assert "model.init_args.encoder.init_args" in lines[0]  # the key to fix
    assert not list(tmp_path.rglob("*.ckpt"))


def test_chunk_size_checked_before_the_data_is_read(capsys, tmp_path):  # item 5: fails early
    code, lines = run(capsys, "fit", *quick(tmp_path, "--model.init_args.encoder.init_args.hidden_size", "30",
                                            "--data.init_args.path", str(tmp_path / "no_such_folder")))
    assert code == 2 and len(lines) == 1 and "multiple of chunk_size" in lines[0]


def _ckpt(path: Path, hparams: dict, value: float = 1.0) -> str:
    torch.save({"state_dict": {"net.w": torch.tensor([value, 1.0])}, "hyper_parameters": hparams}, path)
    return str(path)


@pytest.mark.parametrize("content", [b"", random.Random(0).randbytes(2000), random.Random(1).randbytes(2000),
                                     b"PK\x03\x04truncated"])
def test_not_a_checkpoint(capsys, tmp_path, content):  # item 8
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(content)
    code, lines = run(capsys, "test", *quick(tmp_path, "--ckpt_path", str(bad)))
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith(f"error: not a checkpoint: {bad} (") and "weights_only" not in lines[0]
    assert "Unsupported" not in lines[0] and "Error" not in lines[0]  # the loader's jargon stays out


def test_checkpoint_of_another_task(capsys, tmp_path):  # item 10
    ckpt = _ckpt(tmp_path / "absa.ckpt", {"_class_path": "onlstm_tasks.tasks.absa.AspectSentimentClassifier"})
    code, lines = run(capsys, "test", *quick(tmp_path, "--ckpt_path", ckpt))
    assert code == 2
    assert lines == [f"error: {ckpt} is an aspect-sentiment checkpoint; this config trains NER models (give a checkpoint "
                     "of NERTagger, or the config the checkpoint was trained with)"]


def test_nan_weights_refused_and_predict_writes_nothing(capsys, tmp_path):  # item 12
    ckpt = _ckpt(tmp_path / "nan.ckpt", {"_class_path": "onlstm_tasks.tasks.ner.NERTagger"}, float("nan"))
    sentences = tmp_path / "s.txt"
    sentences.write_text("Peter lives in Berlin .\n")
    out = tmp_path / "pred.jsonl"
    code, lines = run(capsys, "predict", *quick(tmp_path, "--ckpt_path", ckpt, "--data.init_args.predict_file",
                                                  str(sentences), "--trainer.callbacks+=JsonlPredictionWriter"))
    assert code == 2 and lines == [f"error: {ckpt}: parameter net.w holds 1 NaN/inf value(s): the weights are broken "
                                   "(training diverged?); use an earlier checkpoint"]
    assert not out.exists() and not (tmp_path / "predictions.jsonl").exists()


def test_data_error_one_line_no_checkpoint(capsys, tmp_path):  # item 6
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "validation", "test"):
        (data / f"{split}.txt").write_text((Path(SAMPLE) / f"{split}.txt").read_text())
    with open(data / "train.txt", "a") as f:
        f.write("\nbroken line with too many columns here\n")
    code, lines = run(capsys, "fit", *quick(tmp_path, "--data.init_args.path", str(data)))
    assert code == 2 and len(lines) == 1 and "train.txt:" in lines[0]
    assert not list(tmp_path.rglob("*.ckpt"))


def test_debug_shows_traceback(tmp_path):  # --debug: the project's error propagates
    from onlstm_tasks.errors import ConfigError

    with pytest.raises(ConfigError):
        main(["fit", "--debug", *quick(tmp_path, "--model.init_args.encoder.init_args.hiden_size", "30")])


def test_offline_hub_names_local_copy(capsys, tmp_path, monkeypatch):  # item 7
    from onlstm_tasks.data.core import splits

    monkeypatch.setattr(splits, "hub_unreachable", lambda: "huggingface.co: no network")
    code, lines = run(capsys, "fit", *quick(tmp_path, "--data.init_args.path", "ontonotes/conll2012_ontonotesv5",
                                            "--data.init_args.format", "ontonotes"))
    assert code == 2 and len(lines) == 1
    assert "--data.init_args.path ../shared/data/conll2012_ontonotesv5 --data.init_args.revision null" in lines[0]


@pytest.mark.parametrize("content,what", [("", "empty JSON lines"), ('{"tokens": ["a"', "not valid JSON lines")])
def test_bad_jsonl(capsys, tmp_path, content, what):  # item 9
    (tmp_path / "train.jsonl").write_text(content)
    code, lines = run(capsys, "fit", *quick(tmp_path, "--data.init_args.path", str(tmp_path),
                                            "--data.init_args.data_dir", "null", "--data.init_args.format", "tokens",
                                            "--data.init_args.data_files", "{train: train.jsonl}"))
    assert code == 2 and len(lines) == 1
    assert str(tmp_path / "train.jsonl") in lines[0] and what in lines[0]


def test_short_form_encoder_warns_dropped_keys(caplog, tmp_path):  # item 14
    from onlstm_tasks.cli.lightning_cli import dropped_init_args, TasksCLI

    cli = TasksCLI(model_class=None, datamodule_class=None, subclass_mode_model=True, subclass_mode_data=True,
                   run=False, args=quick(tmp_path, "--model.init_args.encoder", "LSTM"))
    warnings = dropped_init_args(quick(tmp_path, "--model.init_args.encoder", "LSTM"), cli.config)
    assert len(warnings) == 1 and "chunk_size=8" in warnings[0] and "--model.init_args.encoder" in warnings[0]


# ---- issue 34: a newcomer's rough edges ----------------------------------------------------------------------------
def test_nested_config_typo_names_the_key_and_the_nearest_one(capsys, tmp_path):
    code, lines = run(capsys, "fit", *quick(tmp_path, "--model.init_args.encodr.init_args.hidden_size", "32"))
    assert code == 2
    assert lines == ["error: unknown key `encodr` in model.init_args (NERTagger); did you mean `encoder`?"]


@pytest.mark.parametrize("value", ["{scheme:iob1}", "{scheme:iob1,other:x}"])
def test_a_mapping_yaml_cannot_read_names_the_argument_and_the_yaml_form(capsys, tmp_path, value):
    code, lines = run(capsys, "fit", *quick(tmp_path, "--data.init_args.reader_options", value))
    fixed = value.replace(":", ": ")
    assert code == 2
    assert lines == [f"error: --data.init_args.reader_options: expected a mapping, got {value!r} (YAML needs a space "
                     f"after each colon: --data.init_args.reader_options '{fixed}')"]


def test_a_value_of_the_wrong_type_names_the_full_key(capsys, tmp_path):
    code, lines = run(capsys, "fit", *quick(tmp_path, "--model.init_args.encoder.init_args.hidden_size", "abc"))
    assert code == 2
    assert lines == ["error: --model.init_args.encoder.init_args.hidden_size: expected an integer or a list, got 'abc'"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
@pytest.mark.parametrize("accelerator", ["gpu", "cuda"])
def test_a_gpu_asked_for_without_one_is_one_line_before_any_data_is_read(capsys, tmp_path, accelerator):
    code, lines = run(capsys, "fit", *quick(tmp_path, "--trainer.accelerator", accelerator,
                                            "--data.init_args.path", str(tmp_path / "no_such_folder")))
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith(f"error: --trainer.accelerator {accelerator}: no CUDA GPU here (")
    assert lines[0].endswith("use --trainer.accelerator cpu, or auto to take a GPU only where there is one")


def test_random_bytes_are_refused_in_plain_words(capsys, tmp_path):
    bad = tmp_path / "bad.ckpt"
    bad.write_bytes(random.Random(0).randbytes(2000))
    code, lines = run(capsys, "test", *quick(tmp_path, "--ckpt_path", str(bad)))
    assert code == 2
    assert lines == [f"error: not a checkpoint: {bad} (its bytes are not a file saved by torch.save: damaged, cut "
                     "short, or another kind of file; give a .ckpt that onlstm-tasks fit wrote)"]
