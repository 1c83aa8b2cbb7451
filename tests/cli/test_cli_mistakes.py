"""A user's mistakes on the command line, one table (issue 42): every row is a command and the words its one line
must hold. Each must end with exit code 2, at most 3 lines on stderr, no traceback, and no new folder under the
directory it runs in (the quickstart config writes ``runs/quickstart`` there). In-process ``main([...])`` calls;
most fail before any data is read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
import yaml

from helpers.paths import REPO
from onlstm_tasks.cli import main

ROOT = REPO
QUICK = str(ROOT / "configs/quickstart.yaml")
SAMPLE = ROOT / "onlstm_tasks/sample_data/ner"
ENCODER = "--model.init_args.encoder.init_args."
EMBEDDER = "--model.init_args.embedder.init_args."


@dataclass
class Case:
    """``args`` after the subcommand, with ``{in}`` for the folder of the row's inputs (made by ``setup``)."""

    id: str
    subcommand: str
    args: list[str]
    words: tuple[str, ...]
    setup: Callable[[Path], None] | None = None
    absent: tuple[str, ...] = ()  # words the line must not hold
    quickstart: bool = True  # start from configs/quickstart.yaml with the bundled sample as data
    marks: list = field(default_factory=list)


def _file(name: str, text: str | bytes) -> Callable[[Path], None]:
    def setup(inputs: Path) -> None:
        target = inputs / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text if isinstance(text, bytes) else text.encode())
    return setup


def _data_folder(edit: Callable[[dict[str, str | bytes]], None]) -> Callable[[Path], None]:
    """A copy of the bundled sample under ``{in}/data`` with ``edit`` applied to its files' texts."""
    def setup(inputs: Path) -> None:
        texts = {split: (SAMPLE / f"{split}.txt").read_text() for split in ("train", "validation", "test")}
        edit(texts)
        (inputs / "data").mkdir()
        for split, text in texts.items():
            (inputs / "data" / f"{split}.txt").write_bytes(text if isinstance(text, bytes) else text.encode())
    return setup


def _bogus_label(texts: dict[str, str]) -> None:
    """``B-BOGUS`` on line 6 of validation.txt, a token inside the sentence that starts on line 1."""
    lines = texts["validation"].splitlines()
    assert lines[5].split()[1] == "O"
    lines[5] = lines[5].split()[0] + " B-BOGUS"
    texts["validation"] = "\n".join(lines) + "\n"


def _bytes(texts: dict[str, str | bytes]) -> None:
    texts["train"] = texts["train"].encode() + b"\n\xff\xfe O\n"


def _damaged_last(inputs: Path) -> None:
    folder = Path("runs/quickstart/lightning_logs/version_0/checkpoints")
    folder.mkdir(parents=True)
    (folder / "last.ckpt").write_bytes(b"PK\x03\x04 cut short")


def _swapped_encoder_config(inputs: Path) -> None:
    """The quickstart config with the encoder's class_path line changed to GRU and nothing else."""
    config = yaml.safe_load(Path(QUICK).read_text())
    config["model"]["init_args"]["encoder"]["class_path"] = "onlstm_tasks.encoders.GRU"
    config["data"]["init_args"]["path"] = str(SAMPLE)
    (inputs / "gru.yaml").write_text(yaml.safe_dump(config))


CKPT = _file("model.ckpt", b"not really")
SLOW = pytest.mark.slow
NO_GPU = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")

CASES = [
    # files and folders
    Case("data path missing", "fit", ["--data.init_args.path", "/nonexistent/data"],
         ("--data.init_args.path /nonexistent/data", "no such file or folder")),
    Case("relative data path missing", "fit", ["--data.init_args.path", "no/such/data"],
         ("--data.init_args.path no/such/data", "no such file or folder")),
    Case("data path a file without a split's name", "fit", ["--data.init_args.path", "{in}/notes.md"],
         ("notes.md",), setup=_file("notes.md", "hello\n")),
    Case("predict file missing", "predict", ["--ckpt_path", "{in}/model.ckpt", "--data.init_args.predict_file",
                                             "missing.txt"],
         ("--data.init_args.predict_file missing.txt", "no such file"), setup=CKPT),
    Case("predict file a folder", "predict", ["--ckpt_path", "{in}/model.ckpt", "--data.init_args.predict_file",
                                              "{in}"],
         ("--data.init_args.predict_file", "is a folder, not a file"), setup=CKPT),
    Case("checkpoint missing", "test", ["--ckpt_path", "{in}/nothing.ckpt"], ("--ckpt_path", "no such file")),
    Case("checkpoint a folder", "test", ["--ckpt_path", "{in}"], ("--ckpt_path", "is a folder, not a file")),
    Case("checkpoint not a checkpoint", "test", ["--ckpt_path", "{in}/model.ckpt"], ("not a checkpoint",),
         setup=CKPT),
    Case("damaged last.ckpt under --ckpt_path last", "fit", ["--ckpt_path", "last"],
         ("not a checkpoint", "last.ckpt"), setup=_damaged_last),
    Case("root folder is a file", "fit", ["--trainer.default_root_dir", "{in}/file"],
         ("--trainer.default_root_dir", "is a file"), setup=_file("file", "x")),
    Case("word vectors missing", "fit", ["--data.init_args.vectors", "{in}/vectors.txt"],
         ("--data.init_args.vectors", "no such file")),
    Case("config missing", "fit", ["--config", "{in}/nosuch.yaml"], ("nosuch.yaml",), quickstart=False),
    Case("config a folder", "fit", ["--config", "{in}"], ("{in}",), quickstart=False),
    Case("config YAML syntax error", "fit", ["--config", "{in}/bad.yaml"], ("bad.yaml:4: not valid YAML", "line 3"),
         setup=_file("bad.yaml", "trainer:\n  max_epochs: 1\n  devices: [1\nmodel: x\n"), quickstart=False),
    Case("data file not UTF-8", "fit", ["--data.init_args.path", "{in}/data"], ("train.txt",),
         setup=_data_folder(_bytes)),
    Case("unseen label names its own line", "fit", ["--data.init_args.path", "{in}/data"],
         ("validation.txt:6", "B-BOGUS"), setup=_data_folder(_bogus_label)),
    # values out of range
    Case("learning rate negative", "fit", ["--model.init_args.optimizer.init_args.lr", "-1"],
         ("--model.init_args.optimizer.init_args.lr", "-1")),
    Case("Adam betas out of range", "fit", ["--model.init_args.optimizer.init_args.betas", "[0.9, 1.5]"],
         ("--model.init_args.optimizer.init_args", "beta")),
    Case("batch size negative", "fit", ["--data.init_args.batch_size", "-3"],
         ("--data.init_args.batch_size", "must be positive")),
    Case("batch size zero", "fit", ["--data.init_args.batch_size", "0"], ("--data.init_args.batch_size",)),
    Case("hidden size zero", "fit", [ENCODER + "hidden_size", "0"], ("hidden_size",)),
    Case("chunk size negative", "fit", [ENCODER + "chunk_size", "-8"], ("chunk_size",)),
    Case("no layers", "fit", [ENCODER + "num_layers", "0"], (ENCODER[2:] + "num_layers", "must be positive")),
    Case("encoder dropout above 1", "fit", [ENCODER + "dropout", "1.5"], (ENCODER[2:] + "dropout", "[0, 1)")),
    Case("model dropout negative", "fit", ["--model.init_args.dropout", "-0.1"],
         ("--model.init_args.dropout", "[0, 1)")),
    Case("embedder dropout 1", "fit", [EMBEDDER + "dropout", "1.0"], (EMBEDDER[2:] + "dropout",)),
    Case("epochs below -1", "fit", ["--trainer.max_epochs", "-5"], ("--trainer.max_epochs", "at least -1")),
    # typos at each depth
    Case("typo in a trainer option", "fit", ["--trainer.max_epohcs", "3"], ("trainer.max_epohcs", "max_epochs")),
    Case("typo at the top", "fit", ["--seed_everythng", "3"], ("seed_everythng",)),
    Case("typo in a model option", "fit", ["--model.init_args.dropuot", "0.1"], ("dropuot", "`dropout`")),
    Case("typo in an encoder option", "fit", [ENCODER + "hiden_size", "32"], ("hiden_size", "`hidden_size`")),
    Case("typo in an embedder option", "fit", [EMBEDDER + "word_dm", "32"], ("word_dm", "`word_dim`")),
    Case("typo in a data option", "fit", ["--data.init_args.batch_sise", "8"], ("batch_sise", "batch_size")),
    # wrong types at each depth
    Case("trainer option of the wrong type", "fit", ["--trainer.max_epochs", "abc"], ("max_epochs", "'abc'")),
    Case("model option of the wrong type", "fit", ["--model.init_args.dropout", "abc"], ("dropout", "'abc'")),
    Case("encoder option of the wrong type", "fit", [ENCODER + "hidden_size", "abc"], ("hidden_size", "'abc'")),
    Case("data option of the wrong type", "fit", ["--data.init_args.batch_size", "many"],
         ("batch_size", "'many'")),
    # an encoder swapped for one that takes other options
    Case("class_path line changed to GRU", "fit", ["--config", "{in}/gru.yaml"], ("chunk_size", "GRU", "ONLSTM"),
         absent=("did you mean",), setup=_swapped_encoder_config, quickstart=False),
    Case("GRU given an ON-LSTM option", "fit", ["--model.init_args.encoder", "onlstm_tasks.encoders.GRU",
                                               ENCODER + "chunk_size", "4"], ("chunk_size", "GRU")),
    Case("a GPU asked for without one", "fit", ["--trainer.accelerator", "gpu"], ("no CUDA GPU here",),
         marks=[NO_GPU]),
    # issue 50: the last tracebacks
    Case("data path a training file, no test split for test_after_fit", "fit",
         ["--data.init_args.path", str(SAMPLE / "train.txt")],
         ("--data.init_args.path", "no 'test' split", "--test_after_fit false")),
    Case("embedder's pretrained vectors missing", "fit", [EMBEDDER + "pretrained", "{in}/vectors.txt"],
         (EMBEDDER[2:] + "pretrained", "no such file")),
    Case("logger folder under a file", "fit", ["--trainer.logger.init_args.save_dir", "{in}/file/logs"],
         ("--trainer.logger.init_args.save_dir", "is a file, so no folder"), setup=_file("file", "x")),
    Case("root folder under a file", "fit", ["--trainer.default_root_dir", "{in}/file/runs"],
         ("--trainer.default_root_dir", "is a file, so no folder"), setup=_file("file", "x")),
    Case("logger folder where none can be made", "fit", ["--trainer.logger.init_args.save_dir", "/proc/onlstm"],
         ("--trainer.logger.init_args.save_dir", "no folder can be made")),
    Case("predict without a checkpoint", "predict", ["--data.init_args.predict_file", "{in}/s.txt"],
         ("predict needs --ckpt_path",), setup=_file("s.txt", "Hello there\n")),
    Case("no devices", "fit", ["--trainer.devices", "0"], ("--trainer.devices 0", "positive number of devices")),
    Case("devices below -1", "fit", ["--trainer.devices", "-2"], ("--trainer.devices -2",)),
    Case("no devices in a list", "fit", ["--trainer.devices", "[]"], ("--trainer.devices", "at least one device")),
    Case("fit without a config", "fit", [], ("needs a model and data", "--config"), quickstart=False),
    Case("a model too large for memory", "fit", [ENCODER + "hidden_size", "10000000"],
         ("does not fit in memory", ENCODER[2:] + "hidden_size 10000000")),
    Case("a reader option the format does not take", "fit", ["--data.init_args.reader_options", "{schema: iob2}"],
         ("--data.init_args.reader_options", "'schema'", "scheme")),
]


@pytest.fixture(autouse=True)
def _fresh_log_handler():
    """main() attaches a stderr handler to the package logger: drop it after each test."""
    import logging

    yield
    logging.getLogger("onlstm_tasks").handlers.clear()


def folders(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_dir()}


# one row of each kind in the fast tier (each row parses a whole LightningCLI, about a second); all in the full suite
FAST = {"data path missing", "predict file missing", "damaged last.ckpt under --ckpt_path last",
        "config YAML syntax error", "unseen label names its own line", "learning rate negative", "batch size negative",
        "encoder dropout above 1", "typo in an encoder option", "encoder option of the wrong type",
        "class_path line changed to GRU"}


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=[*c.marks, *([] if c.id in FAST else [SLOW])])
                                  for c in CASES])
def test_a_mistake_is_one_line_exit_2_and_leaves_no_folder(case, tmp_path, monkeypatch, capfd):
    inputs, work = tmp_path / "in", tmp_path / "work"
    inputs.mkdir()
    work.mkdir()
    monkeypatch.chdir(work)
    if case.setup is not None:
        case.setup(inputs)
    before = folders(work)
    args = [arg.replace("{in}", str(inputs)) for arg in case.args]
    if case.quickstart:
        args = ["--config", QUICK, "--data.init_args.path", str(SAMPLE), *args]
    with pytest.raises(SystemExit) as exit_info:
        main([case.subcommand, *args])
    err = capfd.readouterr().err
    lines = err.strip().splitlines()
    assert exit_info.value.code == 2, err[-3000:]
    assert "Traceback" not in err and len(lines) <= 3, err[-3000:]
    error = next(line for line in lines if line.startswith("error: "))
    for word in case.words:
        assert word.replace("{in}", str(inputs)) in error, error
    for word in case.absent:
        assert word not in error, error
    assert folders(work) == before, sorted(map(str, folders(work) - before))


def test_the_table_covers_forty_mistakes():
    assert len(CASES) >= 40 and len({c.id for c in CASES}) == len(CASES) and FAST <= {c.id for c in CASES}


def test_more_cpu_processes_than_cores_are_warned_of(monkeypatch):
    import os

    from onlstm_tasks.cli.config_checks import cpu_processes_beyond_cores

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    warning = cpu_processes_beyond_cores({"accelerator": "cpu", "devices": 3})
    assert warning and "--trainer.devices 3" in warning and "2 cores" in warning
    assert cpu_processes_beyond_cores({"accelerator": "auto", "devices": 2}) is None
    assert cpu_processes_beyond_cores({"accelerator": "cpu", "devices": "auto"}) is None
