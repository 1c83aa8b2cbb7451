"""``save_pretrained`` / ``from_pretrained`` / ``push_to_hub`` for the task models (``huggingface_hub``'s
:class:`~huggingface_hub.ModelHubMixin`), as a folder of plain files that loads without unpickling anything:

- ``config.json``: the model's class path and its resolved init arguments (the plain values LightningCLI saves as
  hyper-parameters: factories as ``class_path`` + ``init_args``), the data module's word options, the run's facts;
- ``word_vocab.json``, ``char_vocab.json``, ``labels.json``: the data facts (vocabularies and label set);
- ``model.safetensors``: the weights only;
- ``README.md``: the model card (:mod:`onlstm_tasks.tasks.model_card`).

Every ``class_path`` in ``config.json`` is checked against :data:`ALLOWED_CLASS_PREFIXES` and the weights file is
read before anything named in the config is imported or built.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import ModelCard, ModelHubMixin, snapshot_download
from jsonargparse import ArgumentParser
from lightning.pytorch.core.mixins.hparams_mixin import _given_hyperparameters_context
from safetensors import SafetensorError
from safetensors.torch import load_file, load_model, save_model

from onlstm_tasks.tasks.model_card import model_card
from onlstm_tasks.tasks.registry import DATA_FACTS

log = logging.getLogger(__name__)

FORMAT = "onlstm-tasks/1"
WEIGHTS = "model.safetensors"
CONFIG = "config.json"
# DATA_FACTS (tasks.registry): kept as JSON files beside config.json
ALLOWED_CLASS_PREFIXES = ("onlstm_tasks.", "torch.optim.")  # classes a config.json may name (models, optimisers)
INSTANTIATOR = "lightning.pytorch.cli.instantiate_module"  # as LightningCLI saves it: load_from_checkpoint works


class PretrainedFormatError(ValueError):
    """A folder that is not a readable ``save_pretrained`` folder (missing/corrupted file, foreign class)."""


def class_path_of(cls: type) -> str:
    return f"{cls.__module__}.{cls.__name__}"


def plain_init_args(hparams: dict[str, Any], where: str) -> dict[str, Any]:
    """The init arguments of saved hyper-parameters, minus Lightning's bookkeeping and the data facts, checked to be
    JSON (factories as ``class_path``/``init_args`` dicts, as LightningCLI writes them)."""
    args = {k: v for k, v in hparams.items() if k not in ("_instantiator", "_class_path", *DATA_FACTS)}
    for key, value in args.items():
        try:
            json.dumps(value)
        except TypeError:
            raise ValueError(f"{where}: the init argument {key!r} is a Python object ({type(value).__name__}), not a "
                             f"plain value; only models configured with plain values (YAML/CLI configs, or "
                             f"from_pretrained) can be saved as a folder") from None
    return args


def foreign_class_paths(value: Any) -> Iterator[str]:
    """Every ``class_path`` in a (nested) config that is outside :data:`ALLOWED_CLASS_PREFIXES`."""
    if isinstance(value, dict):
        path = value.get("class_path")
        if isinstance(path, str) and not path.startswith(ALLOWED_CLASS_PREFIXES):
            yield path
        for item in value.values():
            yield from foreign_class_paths(item)
    elif isinstance(value, list):
        for item in value:
            yield from foreign_class_paths(item)


def read_pretrained_config(folder: str | Path) -> dict[str, Any]:
    """``config.json`` of a ``save_pretrained`` folder, checked: the format, and no class outside the package."""
    path = Path(folder) / CONFIG
    if not path.is_file():
        raise PretrainedFormatError(f"{path}: missing; not a folder written by save_pretrained / onlstm-tasks export")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise PretrainedFormatError(f"{path}: not valid JSON ({err})") from None
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise PretrainedFormatError(f"{path}: expected \"format\": \"{FORMAT}\" (a folder written by save_pretrained)")
    foreign = [config.get("class_path")] if not str(config.get("class_path")).startswith("onlstm_tasks.") else []
    foreign += list(foreign_class_paths(config.get("init_args")))
    if foreign:
        raise PretrainedFormatError(f"{path}: names the class {foreign[0]!r}, outside {ALLOWED_CLASS_PREFIXES}; "
                                    f"refusing to import it (nothing was run)")
    return config


def check_weights(folder: str | Path) -> None:
    """Reads ``model.safetensors`` whole (no pickle), before any model is built: a clear error for a missing or
    corrupted file."""
    path = Path(folder) / WEIGHTS
    if not path.is_file():
        raise PretrainedFormatError(f"{path}: missing; not a folder written by save_pretrained / onlstm-tasks export")
    try:
        load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise PretrainedFormatError(f"{path}: not a readable safetensors file ({str(err).splitlines()[0]}); "
                                    f"re-export the model") from None


def read_data_facts(folder: str | Path, config: dict[str, Any]) -> dict[str, list[str]]:
    facts = {}
    for fact, name in (config.get("files") or {}).items():
        if fact not in DATA_FACTS:
            raise PretrainedFormatError(f"{Path(folder) / CONFIG}: unknown entry {fact!r} in \"files\"")
        path = Path(folder) / name
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise PretrainedFormatError(f"{path}: cannot read the {fact} ({err})") from None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise PretrainedFormatError(f"{path}: expected a JSON list of strings")
        facts[fact] = value
    return facts


def build_task_model(cls: type, init_args: dict[str, Any], facts: dict[str, list[str]]):
    """``cls(**init_args, **facts)`` with the factories in ``init_args`` built by jsonargparse (as LightningCLI
    builds them) and the plain values kept as the model's hyper-parameters, so the model saves again (as a folder or
    a Lightning checkpoint). The vocabularies are passed as they are, never type-checked item by item."""
    foreign = list(foreign_class_paths(init_args))
    if foreign:
        raise PretrainedFormatError(f"the configuration names the class {foreign[0]!r}, outside "
                                    f"{ALLOWED_CLASS_PREFIXES}; refusing to import it")
    parser = ArgumentParser(exit_on_error=False)
    parser.add_class_arguments(cls, "module", fail_untyped=False, skip=set(facts), instantiate=False)
    parsed = parser.parse_object({"module": init_args})
    resolved = parsed.module.as_dict()  # every init argument, defaults included (as LightningCLI saves them)
    built = parser.instantiate(parsed).module
    hparams = {"_class_path": class_path_of(cls), **facts, **resolved}
    with _given_hyperparameters_context(hparams=hparams, instantiator=INSTANTIATOR):
        return cls(**vars(built), **facts)


class TaskHubMixin(ModelHubMixin, library_name="onlstm-tasks", tags=["onlstm-tasks"], license="mit"):
    """``save_pretrained(dir)``, ``cls.from_pretrained(dir or repo id)``, ``push_to_hub(repo id)`` for a task model
    (see the module docstring for the folder). ``pretrained_info`` holds what the folder says beyond the model: the
    data module's hyper-parameters (``data``) and the run's facts (``run``: metrics, source checkpoint, ...)."""

    pretrained_info: dict[str, Any] | None = None

    def _save_pretrained(self, save_directory: Path) -> None:
        save_directory = Path(save_directory)
        where = type(self).__name__
        info = self.pretrained_info or {}
        facts = {fact: list(self.hparams[fact]) for fact in DATA_FACTS if self.hparams.get(fact) is not None}
        config = {"format": FORMAT, "class_path": class_path_of(type(self)),
                  "init_args": plain_init_args(dict(self.hparams), where),
                  "files": {fact: f"{fact}.json" for fact in facts},
                  "data": info.get("data"), "run": info.get("run") or {}}
        for fact, values in facts.items():
            (save_directory / f"{fact}.json").write_text(json.dumps(values, ensure_ascii=False), encoding="utf-8")
        (save_directory / CONFIG).write_text(json.dumps(config, indent=2, ensure_ascii=False), encoding="utf-8")
        if config["run"].get("training_config"):
            (save_directory / "training_config.yaml").write_text(config["run"]["training_config"], encoding="utf-8")
        save_model(self, str(save_directory / WEIGHTS))
        # safetensors writes its file through a private temporary one (mode 0600): give it the mode the other
        # files got from the umask
        (save_directory / WEIGHTS).chmod((save_directory / CONFIG).stat().st_mode & 0o777)
        self._pretrained_config = config

    def generate_model_card(self, *args, **kwargs) -> ModelCard:
        config = getattr(self, "_pretrained_config", None) or {"class_path": class_path_of(type(self)),
                                                               "data": None, "run": {}}
        return model_card(config, self._hub_mixin_info.model_card_data, **kwargs)

    @classmethod
    def _from_pretrained(cls, *, model_id: str, revision: str | None, cache_dir: str | Path | None,
                         force_download: bool, local_files_only: bool, token: str | bool | None,
                         map_location: str | torch.device = "cpu", **model_kwargs):
        if model_kwargs:
            raise TypeError(f"from_pretrained got unexpected arguments {sorted(model_kwargs)}")
        folder = model_id
        if not os.path.isdir(folder):
            folder = snapshot_download(repo_id=model_id, revision=revision, cache_dir=cache_dir, token=token,
                                       force_download=force_download, local_files_only=local_files_only)
        return cls.load_pretrained_folder(folder, map_location)

    @classmethod
    def load_pretrained_folder(cls, folder: str | Path, map_location: str | torch.device = "cpu"):
        """The model of a local ``save_pretrained`` folder, in eval mode: config checked, weights read (no pickle),
        then the model built and filled (strict)."""
        config = read_pretrained_config(folder)
        if config["class_path"] != class_path_of(cls):
            raise PretrainedFormatError(f"{Path(folder) / CONFIG}: holds a {config['class_path']}, not a "
                                        f"{class_path_of(cls)}; load it with onlstm_tasks.load")
        check_weights(folder)
        model = build_task_model(cls, config.get("init_args") or {}, read_data_facts(folder, config))
        # load_model (not load_state_dict) restores tensors save_model stored once for several names (tied weights)
        missing, unexpected = load_model(model, str(Path(folder) / WEIGHTS), strict=False)
        if missing or unexpected:
            raise PretrainedFormatError(f"{Path(folder) / WEIGHTS}: does not fit the configured model (missing "
                                        f"{sorted(missing)[:5]}, unexpected {sorted(unexpected)[:5]})")
        model.pretrained_info = {"data": config.get("data"), "run": config.get("run") or {}}
        return model.to(map_location).eval()
