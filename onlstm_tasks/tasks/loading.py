"""Loading a task model from a Lightning checkpoint without knowing its class (probing its encoder:
:func:`onlstm_tasks.probing.loading.load_probe`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

from onlstm_tasks.data.core.checkpoint_file import read_checkpoint_file
from onlstm_tasks.tasks.registry import TASKS, import_class
from onlstm_tasks.tasks.absa import AspectSentimentClassifier
from onlstm_tasks.tasks.hub import (
    DATA_FACTS,
    INSTANTIATOR,
    PretrainedFormatError,
    build_task_model,
    plain_init_args,
    read_pretrained_config,
)
from onlstm_tasks.tasks.language_model import LanguageModel
from onlstm_tasks.tasks.ner import NERTagger

log = logging.getLogger(__name__)

def task_model_class(hparams: dict) -> type[pl.LightningModule]:
    """The class a checkpoint's hyper-parameters belong to: their ``_class_path`` (written by LightningCLI; one of
    :data:`~onlstm_tasks.tasks.registry.TASKS`), else guessed from the constructor arguments of a checkpoint
    written before LightningCLI saved it (``head`` -> aspect sentiment, ``embedding_dim`` -> language model,
    ``encoder`` -> NER)."""
    class_path = hparams.get("_class_path")
    if class_path is not None:
        return task_class(class_path, ValueError(f"unknown model class {class_path!r}: expected one of "
                                                 f"{sorted(TASKS)}"))
    if "head" in hparams:
        return AspectSentimentClassifier
    if "embedding_dim" in hparams:
        return LanguageModel
    if "encoder" in hparams:
        return NERTagger
    raise ValueError(f"cannot tell the model class from the hyper-parameters {sorted(hparams)}; expected a "
                     f"checkpoint of one of {sorted(TASKS)}")


def task_class(class_path: str, unknown: Exception) -> type[pl.LightningModule]:
    """The LightningModule of a registered task (:data:`~onlstm_tasks.tasks.registry.TASKS`); ``unknown`` is raised
    for any other class path (nothing of it is imported)."""
    if class_path not in TASKS:
        raise unknown
    return import_class(class_path)


def read_checkpoint(path: str | Path, trust: bool = False) -> dict[str, Any]:
    """A checkpoint file as a dict (on the CPU). Checkpoints written by ``onlstm-tasks fit`` hold only plain
    hyper-parameters and load with ``weights_only=True``; those of models built in Python with factory objects
    (``functools.partial``) need full unpickling, which can run code: ``trust=True`` only for your own files."""
    return read_checkpoint_file(path, weights_only=not trust)


def load_task_model(path: str | Path, map_location: str | torch.device = "cpu",
                    trust: bool = False) -> pl.LightningModule:
    """A task model (NERTagger, AspectSentimentClassifier, LanguageModel) from a Lightning checkpoint, in eval mode (``trust``:
    see :func:`read_checkpoint`)."""
    return _load_model(path, read_checkpoint(path, trust), map_location, trust)


def _load_model(path, checkpoint: dict, map_location, trust: bool) -> pl.LightningModule:
    hparams = checkpoint.get("hyper_parameters") or {}
    cls = task_model_class(hparams)
    if hparams.get("_instantiator") != INSTANTIATOR:  # built in Python: its hyper-parameters are the objects
        return cls.load_from_checkpoint(str(path), map_location=map_location, weights_only=not trust).eval()
    # Written by the CLI. Lightning would rebuild the factories by passing every hyper-parameter through
    # jsonargparse, which checks the vocabularies item by item in time quadratic in their size (8,000 words:
    # minutes; scripts/benchmark_checkpoint_load.py); rebuilt here with the vocabularies passed as they are
    return _rebuilt(cls, checkpoint, path).to(map_location).eval()


def _rebuilt(cls: type[pl.LightningModule], checkpoint: dict, path) -> pl.LightningModule:
    """A CLI checkpoint's task model rebuilt from its plain hyper-parameters (the factories by jsonargparse, the
    vocabularies passed as they are, as :meth:`TaskHubMixin.load_pretrained_folder` builds it), weights loaded; it
    keeps plain hyper-parameters, so it saves again (as a folder or a checkpoint)."""
    hparams = dict(checkpoint.get("hyper_parameters") or {})
    facts = {fact: list(hparams[fact]) for fact in DATA_FACTS if hparams.get(fact) is not None}
    model = build_task_model(cls, plain_init_args(hparams, str(path)), facts)
    model.on_load_checkpoint(checkpoint)
    model.load_state_dict(checkpoint["state_dict"])
    return model


def load_pretrained(folder: str | Path, map_location: str | torch.device = "cpu") -> pl.LightningModule:
    """The task model of a local ``save_pretrained`` folder, whatever its class (read from ``config.json``, which
    must name a registered task's model; nothing is unpickled)."""
    class_path = read_pretrained_config(folder)["class_path"]
    cls = task_class(class_path, PretrainedFormatError(f"{Path(folder) / 'config.json'}: unknown model class "
                                                       f"{class_path!r}; expected one of {sorted(TASKS)}"))
    return cls.load_pretrained_folder(folder, map_location)


def run_facts(checkpoint: dict, path: str | Path) -> dict[str, Any]:
    """What a checkpoint says about its run, for the model card: the checkpoint callbacks' best scores, the epoch
    and step, the source file, and the run's ``config.yaml`` (LightningCLI writes it in the log folder) when found
    beside the checkpoint or one or two folders up."""
    metrics = {}
    for state in (checkpoint.get("callbacks") or {}).values():
        if isinstance(state, dict) and state.get("monitor") and state.get("best_model_score") is not None:
            metrics[state["monitor"]] = float(state["best_model_score"])
    facts: dict[str, Any] = {"source": Path(path).name, "metrics": metrics}
    for key in ("epoch", "global_step"):
        if key in checkpoint:
            facts[key] = int(checkpoint[key])
    for folder in list(Path(path).resolve().parents)[:3]:
        if (folder / "config.yaml").is_file():
            facts["training_config"] = (folder / "config.yaml").read_text(encoding="utf-8")
            break
    return facts


def load_for_export(path: str | Path, map_location: str | torch.device = "cpu") -> pl.LightningModule:
    """A checkpoint's task model rebuilt from its plain hyper-parameters (so it saves as a folder), with the data
    module's hyper-parameters and the run's facts in ``pretrained_info`` (for ``config.json`` and the model card).
    The checkpoint is read with ``weights_only=True``."""
    checkpoint = read_checkpoint(path)
    model = _rebuilt(task_model_class(checkpoint.get("hyper_parameters") or {}), checkpoint, path)
    data = dict(checkpoint.get("datamodule_hyper_parameters") or {}) or None
    if data is not None:
        data = {"class_path": data.pop("_class_path", None),
                "init_args": {k: v for k, v in data.items() if k != "_instantiator"}}
    model.pretrained_info = {"data": data, "run": run_facts(checkpoint, path)}
    return model.to(map_location).eval()
