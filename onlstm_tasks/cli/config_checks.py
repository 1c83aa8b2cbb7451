"""Checks of a parsed configuration, made before anything is built or read: every mistake they find is one
:class:`~onlstm_tasks.errors.ConfigError` naming the option (``--model.init_args.encoder.init_args.dropout``) or the
file, with what it takes.

- :func:`check_accelerator`: a GPU asked for on a machine without one;
- :func:`check_values`: values whose range is known, by argument name (:data:`RULES`), at any depth of the config,
  and the trainer's own (:data:`TRAINER_RULES`);
- :func:`check_optimizers`: each configured ``torch.optim`` optimizer built once on a dummy parameter, so that what
  it refuses (a learning rate of -1, betas outside [0, 1)) is known at parse time, not after the model summary;
- :func:`check_init_args`: a package class's own ``check_init_args(init_args)`` (sizes that depend on each other);
- :func:`check_paths`: the data folder, the prediction file, the word vectors and the checkpoint exist and are of
  the right kind; the run's folders are not files.

:class:`~onlstm_tasks.cli.lightning_cli.TasksCLI` calls :func:`check_config` once, right after parsing.
"""

from __future__ import annotations

import importlib
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jsonargparse import Namespace

from .config_help import class_nodes, config_files
from ..errors import ConfigError

log = logging.getLogger(__name__)

Rule = Callable[[Any], "str | None"]  # a value -> what is wrong with it, or None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def positive(value: Any) -> str | None:
    values = value if isinstance(value, (list, tuple)) else [value]
    if any(_number(v) and v <= 0 for v in values):
        return f"must be positive, got {value}"
    return None


def at_least(low: float) -> Rule:
    def rule(value: Any) -> str | None:
        return f"must be at least {low:g}, got {value}" if _number(value) and value < low else None
    return rule


def probability(value: Any) -> str | None:
    if _number(value) and not 0 <= value < 1:
        return f"must be in [0, 1) (a probability), got {value}"
    return None


def fraction(value: Any) -> str | None:
    if _number(value) and not 0 < value < 1:
        return f"must be between 0 and 1 (exclusive), got {value}"
    return None


def non_negative(value: Any) -> str | None:
    if _number(value) and (value < 0 or (isinstance(value, float) and math.isnan(value))):
        return f"must be 0 or more, got {value}"
    return None


# init_args by name, wherever they appear (model, embedder, encoder, head, data module, optimizer)
SIZES = ("batch_size", "eval_batch_size", "max_tokens", "hidden_size", "chunk_size", "num_layers", "word_dim",
         "char_dim", "char_features", "max_word_length", "num_heads", "kernel_size", "embedding_dim",
         "num_stages", "input_size", "vocab_size")  # (attention_size 0 means "the encoder's size")
PROBABILITIES = ("dropout", "dropconnect", "unk_replace", "word_dropout", "output_dropout", "input_dropout",
                 "embedding_dropout")
RULES: dict[str, Rule] = {**{name: positive for name in SIZES}, **{name: probability for name in PROBABILITIES},
                          "validation_ratio": fraction, "num_workers": non_negative, "lr": non_negative,
                          "weight_decay": non_negative}
# the trainer's options (Lightning checks them only when the trainer is built, after the data is read)
TRAINER_RULES: dict[str, Rule] = {"max_epochs": at_least(-1), "max_steps": at_least(-1), "min_epochs": non_negative,
                                  "accumulate_grad_batches": positive, "gradient_clip_val": non_negative,
                                  "check_val_every_n_epoch": positive, "log_every_n_steps": non_negative}


def as_dict(node: Any) -> Any:
    return node.as_dict() if isinstance(node, Namespace) else node


def devices_value(value: Any) -> str | None:
    """Lightning's ``devices``: a positive count, -1 (all), ``auto``, or a non-empty list of device indices."""
    if isinstance(value, str):
        text = value.strip()
        if text == "auto" or not text:
            return None
        try:
            value = int(text)
        except ValueError:
            return None  # "0,1" and the like: Lightning parses those
    if isinstance(value, (list, tuple)):
        return "must list at least one device" if not value else None
    if _number(value) and (value == 0 or value < -1):
        return f"must be a positive number of devices, -1 (all) or auto, got {value}"
    return None


def check_values(config: dict) -> None:
    for key, _class_path, init_args, _depth in class_nodes(config, ""):
        for name, value in init_args.items():
            rule = RULES.get(name)
            problem = rule(value) if rule is not None else None
            if problem:
                raise ConfigError(f"--{key}.init_args.{name}: {problem}")
    trainer = config.get("trainer") or {}
    for name, rule in {**TRAINER_RULES, "devices": devices_value}.items():
        problem = rule(trainer.get(name))
        if problem:
            raise ConfigError(f"--trainer.{name} {trainer.get(name)}: {problem}")


def cpu_processes_beyond_cores(trainer: dict) -> str | None:
    """A warning's text where more CPU processes are asked for than this machine has cores (each process's
    threads then compete for them), else None."""
    import os

    import torch

    accelerator = str(trainer.get("accelerator") or "auto").lower()
    devices = trainer.get("devices")
    if accelerator not in ("cpu", "auto") or (accelerator == "auto" and torch.cuda.is_available()):
        return None
    try:
        count = len(devices) if isinstance(devices, (list, tuple)) else int(devices)
    except (TypeError, ValueError):
        return None
    cores = os.cpu_count() or 1
    if count > cores:
        return (f"--trainer.devices {devices}: {count} CPU processes on {cores} cores; they will compete for the "
                f"cores (give at most {cores})")
    return None


def check_optimizers(config: dict) -> None:
    """Builds each ``torch.optim`` class of the config on one dummy parameter: a value the optimizer refuses is a
    one-line error naming its options now, not a traceback after the model is built."""
    import torch

    for key, class_path, init_args, _depth in class_nodes(config, ""):
        if not class_path.startswith("torch.optim.") or class_path.startswith("torch.optim.lr_scheduler"):
            continue
        module, _, name = class_path.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), name)
            cls([torch.nn.Parameter(torch.zeros(1))], **init_args)
        except (ValueError, TypeError) as err:
            raise ConfigError(f"--{key}.init_args: {name} refuses {init_args}: {err}") from None
        except (ImportError, AttributeError):
            continue  # the parser already said what it could not import


def check_init_args(node: Any, where: str) -> None:
    """Calls ``check_init_args(init_args)`` of every class of the package named in a parsed config that has one
    (e.g. :meth:`ONLSTM.check_init_args`), so a size error is one line before the data is read (the model is built
    only after the data module, whose vocabulary it needs). A refusal is a :class:`ConfigError` naming the key."""
    for key, class_path, init_args, _depth in class_nodes(as_dict(node), where):
        if not class_path.startswith("onlstm_tasks."):
            continue
        module, _, name = class_path.rpartition(".")
        check = getattr(getattr(importlib.import_module(module), name, None), "check_init_args", None)
        if callable(check):
            try:
                check(init_args)
            except ValueError as err:
                raise ConfigError(f"{key}.init_args: {err} ({class_path})") from None


def check_accelerator(trainer: Any) -> None:
    """Refuses ``--trainer.accelerator gpu|cuda|mps`` on a machine without one, in one line and before any data is
    read (Lightning would say so only after the data module and the model were built, in a long traceback)."""
    import torch

    accelerator = trainer.get("accelerator") if trainer is not None else None
    if not isinstance(accelerator, str):
        return
    name = accelerator.lower()
    if name in ("gpu", "cuda") and not torch.cuda.is_available():
        found = "this PyTorch build has no CUDA" if torch.version.cuda is None else "torch.cuda.is_available() is False"
        raise ConfigError(f"--trainer.accelerator {accelerator}: no CUDA GPU here ({found}); use --trainer.accelerator "
                          "cpu, or auto to take a GPU only where there is one")
    if name == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"--trainer.accelerator {accelerator}: no Apple MPS device here; use --trainer.accelerator "
                          "cpu, or auto to take one only where there is one")


def _file(option: str, value: Any, takes: str) -> None:
    if not isinstance(value, (str, Path)):
        return
    path = Path(value).expanduser()
    if not path.exists():
        raise ConfigError(f"{option} {value}: no such file (give {takes})")
    if path.is_dir():
        raise ConfigError(f"{option} {value}: is a folder, not a file (give {takes})")


def _writable_folder(option: str, folder: Any) -> None:
    """``folder`` is a folder the run can make: not a file, not under a file, and its nearest existing parent takes
    a new folder (tried with a temporary one, removed at once)."""
    import tempfile

    if not isinstance(folder, str):
        return
    path = Path(folder).expanduser()
    if path.is_file():
        raise ConfigError(f"{option} {folder}: is a file; the run writes a folder there (give another path)")
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{option} {folder}: {parent} is a file, so no folder can be made under it (give another "
                          "path)")
    try:
        tempfile.TemporaryDirectory(dir=parent).cleanup()
    except OSError as err:
        raise ConfigError(f"{option} {folder}: no folder can be made in {parent} ({err.strerror or err}); give a "
                          "path you can write to") from None


def _model_files(config: dict) -> list[tuple[str, Any]]:
    """The files a new model reads at construction: the word embedders' ``pretrained`` vectors."""
    found = []
    for key, class_path, init_args, _depth in class_nodes(config.get("model") or {}, "model"):
        if class_path.startswith("onlstm_tasks.embedders.") and isinstance(init_args.get("pretrained"), str):
            found.append((f"--{key}.init_args.pretrained", init_args["pretrained"]))
    return found


def check_paths(subcommand: str, config: dict) -> None:
    """The files and folders a run reads exist and are of the right kind, and the folders it writes can be made."""
    from ..data.core.data_files import check_hub_id

    data = (config.get("data") or {}).get("init_args") or {}
    path = data.get("path")
    if subcommand != "predict" and isinstance(path, str) and not Path(path).expanduser().exists():
        try:
            check_hub_id(path)
        except FileNotFoundError:
            raise ConfigError(f"--data.init_args.path {path}: no such file or folder, and not a hub dataset id "
                              "(owner/name); give the folder of the train/validation/test files") from None
    if subcommand == "predict":
        if config.get("ckpt_path") is None:
            raise ConfigError("predict needs --ckpt_path CKPT: a checkpoint that onlstm-tasks fit wrote (it holds "
                              "the weights, vocabularies and labels)")
        _file("--data.init_args.predict_file", data.get("predict_file"), "a text file to predict on")
    if subcommand == "fit":  # elsewhere the checkpoint holds the vectors the model trained with
        _file("--data.init_args.vectors", data.get("vectors"), "a word vectors file")
        if config.get("ckpt_path") is None:  # a resumed model takes its weights from the checkpoint
            for option, value in _model_files(config):
                _file(option, value, "a word vectors file, e.g. from scripts/train_vectors.py")
    ckpt = config.get("ckpt_path")
    if ckpt not in (None, "last", "best", "hpc", "registry"):
        _file("--ckpt_path", ckpt, "a .ckpt file that onlstm-tasks fit wrote")
    trainer = config.get("trainer") or {}
    logger = trainer.get("logger")
    folders = [("--trainer.default_root_dir", trainer.get("default_root_dir"))]
    if isinstance(logger, dict):
        folders.append(("--trainer.logger.init_args.save_dir", (logger.get("init_args") or {}).get("save_dir")))
    for index, callback in enumerate(trainer.get("callbacks") or []):
        if isinstance(callback, dict) and "dirpath" in (callback.get("init_args") or {}):
            folders.append((f"--trainer.callbacks[{index}].init_args.dirpath", callback["init_args"]["dirpath"]))
    for option, folder in folders:
        _writable_folder(option, folder)


def check_config_files(argv: list[str]) -> None:
    """Each ``--config`` file exists, is a file and is YAML (its line where it is not), before the parser reads it
    (jsonargparse names neither the file nor the line)."""
    import yaml

    for file in config_files(argv):
        _file("--config", file, "a YAML config, e.g. configs/quickstart.yaml")
        try:
            yaml.safe_load(Path(file).expanduser().read_text())
        except yaml.MarkedYAMLError as err:
            mark = err.problem_mark or err.context_mark
            where = f"{file}:{mark.line + 1}" if mark is not None else file
            started = f" that starts on line {err.context_mark.line + 1}" if err.context_mark is not None else ""
            what = "; ".join(str(x) for x in (f"{err.context}{started}" if err.context else None, err.problem) if x)
            raise ConfigError(f"{where}: not valid YAML ({what})") from None
        except (yaml.YAMLError, UnicodeDecodeError) as err:
            raise ConfigError(f"{file}: not a YAML file ({type(err).__name__})") from None


def check_config(subcommand: str, config: Any) -> None:
    """Every check of this module on the parsed configuration of ``subcommand`` (and a warning for more CPU
    processes than cores)."""
    plain = as_dict(config)
    check_accelerator(plain.get("trainer"))
    crowded = cpu_processes_beyond_cores(plain.get("trainer") or {})
    if crowded:
        log.warning(crowded)
    check_values(plain)
    check_init_args(plain.get("model"), "model")
    check_optimizers(plain)
    check_paths(subcommand, plain)
