"""One task registry (``onlstm_tasks.tasks.registry``): a task declared there alone is found by the CLI's help, the
API's ``load`` (its predictor) and the model card."""

from __future__ import annotations

import pytest
from huggingface_hub import ModelCardData

from onlstm_tasks.tasks.registry import TASKS, Task, import_class, task_named

TOY = Task(model=f"{__name__}.ToyModel", name="toy", article="a", summary="a toy task for the registry test",
           predictor=f"{__name__}.ToyPredictor", card="toy classification of toy sentences",
           pipeline_tag="text-classification")


class ToyModel:
    pretrained_info = {"data": {"class_path": "toy.Data"}}


class ToyPredictor:
    def __init__(self, model, data) -> None:
        self.model, self.data = model, data


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setitem(TASKS, TOY.model, TOY)
    return TOY


def test_a_task_declared_once_is_in_the_cli_help(toy, capsys):
    from onlstm_tasks.cli import main

    main(["--help"])
    out = capsys.readouterr().out
    assert toy.model in out and toy.summary in out


def test_a_task_declared_once_gets_its_predictor_from_load(toy):
    from onlstm_tasks.api.loading import predictor_for

    model = ToyModel()
    predictor = predictor_for(model)
    assert isinstance(predictor, ToyPredictor) and predictor.model is model
    assert predictor.data == {"class_path": "toy.Data"}


def test_a_task_declared_once_writes_its_card(toy):
    from onlstm_tasks.tasks.model_card import model_card

    card = model_card({"class_path": toy.model, "init_args": {}}, ModelCardData())
    assert toy.card in str(card) and "pipeline_tag: text-classification" in str(card)


def test_every_registered_task_imports_and_names_its_classes():
    for task in TASKS.values():
        assert import_class(task.model).__name__ == task.class_name
        assert callable(import_class(task.predictor))
        assert task_named(task.class_name) is task and task.article in ("a", "an")
