"""Loading a task model from a Lightning checkpoint without knowing its class (probing its encoder:
:func:`onlstm_tasks.probing.loading.load_probe`)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

from onlstm_tasks.data.checkpoint_file import read_checkpoint_file
from onlstm_tasks.tasks.absa import AspectSentimentClassifier
from onlstm_tasks.tasks.language_model import LanguageModel
from onlstm_tasks.tasks.ner import NERTagger

log = logging.getLogger(__name__)

TASK_MODELS: dict[str, type[pl.LightningModule]] = {
    f"{cls.__module__}.{cls.__name__}": cls for cls in (NERTagger, AspectSentimentClassifier, LanguageModel)
}


def task_model_class(hparams: dict) -> type[pl.LightningModule]:
    """The class a checkpoint's hyper-parameters belong to: their ``_class_path`` (written by LightningCLI), else
    guessed from the constructor arguments (``head`` -> aspect sentiment, ``embedding_dim`` -> language model,
    ``encoder`` -> NER)."""
    class_path = hparams.get("_class_path")
    if class_path is not None:
        if class_path not in TASK_MODELS:
            raise ValueError(f"unknown model class {class_path!r}: expected one of {sorted(TASK_MODELS)}")
        return TASK_MODELS[class_path]
    if "head" in hparams:
        return AspectSentimentClassifier
    if "embedding_dim" in hparams:
        return LanguageModel
    if "encoder" in hparams:
        return NERTagger
    raise ValueError(f"cannot tell the model class from the hyper-parameters {sorted(hparams)}; expected a "
                     f"checkpoint of one of {sorted(TASK_MODELS)}")


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
    cls = task_model_class(checkpoint.get("hyper_parameters") or {})
    return cls.load_from_checkpoint(str(path), map_location=map_location, weights_only=not trust).eval()
