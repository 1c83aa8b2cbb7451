"""``load``: a predictor from a Lightning checkpoint, a ``save_pretrained`` folder or a Hub repo id."""

from __future__ import annotations

from pathlib import Path

import torch
from huggingface_hub import snapshot_download

from onlstm_tasks.api.predictors import Predictor
from onlstm_tasks.tasks.registry import TASKS, import_class
from onlstm_tasks.tasks.loading import load_for_export, load_pretrained



def load(source: str | Path, device: str | torch.device = "cpu", revision: str | None = None) -> Predictor:
    """The predictor of a trained model: :class:`Tagger` (NER), :class:`AspectClassifier` or
    :class:`LanguageModelPredictor`.

    ``source`` is a Lightning checkpoint file (read with ``weights_only=True``), a folder written by
    ``save_pretrained`` / ``onlstm-tasks export`` (no pickle at all), or a Hugging Face Hub repo id (downloaded with
    ``huggingface_hub.snapshot_download`` at ``revision``; ``HF_HUB_OFFLINE=1`` uses the local cache only).
    """
    path = Path(source)
    if path.is_file():
        model = load_for_export(path, device)
    elif path.is_dir():
        model = load_pretrained(path, device)
    elif path.suffix == ".ckpt" or str(source).startswith((".", "/", "~")) or str(source).count("/") > 1:
        raise FileNotFoundError(f"{source}: no such checkpoint file or folder")
    else:
        model = load_pretrained(snapshot_download(repo_id=str(source), revision=revision), device)
    return predictor_for(model)


def predictor_for(model) -> Predictor:
    """The predictor of a task model (its data-module settings from ``model.pretrained_info``, when loaded)."""
    for task in TASKS.values():  # the registered tasks (onlstm_tasks.tasks.registry)
        if isinstance(model, import_class(task.model)):
            return import_class(task.predictor)(model, (model.pretrained_info or {}).get("data"))
    raise TypeError(f"no predictor for {type(model).__name__}; expected a model of one of "
                    f"{[task.class_name for task in TASKS.values()]}")
