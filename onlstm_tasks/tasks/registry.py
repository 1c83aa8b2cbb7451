"""The tasks, each declared once: its LightningModule, how messages name it, its predictor (the Python API) and its
model-card text. The CLI (``onlstm-tasks --help``, the check of a checkpoint given to another task's config), the
API's ``load`` and the model card read them from here.

Classes are named by their import path and imported only when asked for (:func:`import_class`), so this module
imports nothing of the package, and ``onlstm-tasks --help`` lists the tasks without importing Lightning.

A new task: a network in ``onlstm_tasks/modules/``, a LightningModule in ``onlstm_tasks/tasks/``, a data module in
its own room of ``onlstm_tasks/data/``, a predictor in ``onlstm_tasks/api/predictors.py``, and one :func:`register` call below
(docs/guide.md, "Adding a task").
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Task:
    """One task. ``model`` and ``predictor`` are import paths (``package.module.Class``)."""

    model: str  # the LightningModule
    name: str  # how messages name its checkpoints: "an NER checkpoint"
    article: str  # "a" or "an", before the name
    summary: str  # one line for onlstm-tasks --help
    predictor: str  # the API's predictor class (onlstm_tasks.api.predictors)
    card: str  # the model card's task line
    pipeline_tag: str | None = None  # the Hugging Face Hub's pipeline tag

    @property
    def class_name(self) -> str:
        return self.model.rsplit(".", 1)[-1]


# model arguments that are facts of the data: the CLI links them from the data module, a user never sets them, and
# a saved model keeps them as JSON files beside its config
DATA_FACTS = ("word_vocab", "char_vocab", "labels")

TASKS: dict[str, Task] = {}  # by the model's import path, in the order declared


def register(task: Task) -> Task:
    TASKS[task.model] = task
    return task


def task_named(class_name: str) -> Task | None:
    """The task whose LightningModule is called ``class_name`` (None for another class)."""
    return next((task for task in TASKS.values() if task.class_name == class_name), None)


def import_class(path: str) -> type:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


register(Task(
    model="onlstm_tasks.tasks.ner.NERTagger", name="NER", article="an",
    summary="named entity recognition: embedder -> encoder -> CRF, scored by entity F1",
    predictor="onlstm_tasks.api.predictors.Tagger",
    card="named-entity recognition (CRF tagger)", pipeline_tag="token-classification"))
register(Task(
    model="onlstm_tasks.tasks.absa.AspectSentimentClassifier", name="aspect-sentiment", article="an",
    summary="aspect-level sentiment: embedder -> aspect head (TD, TC, attention, pooling, tree-aware)",
    predictor="onlstm_tasks.api.predictors.AspectClassifier",
    card="aspect-level sentiment classification", pipeline_tag="text-classification"))
register(Task(
    model="onlstm_tasks.tasks.language_model.LanguageModel", name="language-model", article="a",
    summary="word-level language model (pretraining; its ON-LSTM distances induce trees)",
    predictor="onlstm_tasks.api.predictors.LanguageModelPredictor",
    card="word-level language modelling (trees induced from ON-LSTM distances)", pipeline_tag="text-generation"))
