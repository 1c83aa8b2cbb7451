"""The ``README.md`` model card of a ``save_pretrained`` folder: task, data, metrics of the run (when known), the
command to reproduce it and the licence field (``huggingface_hub.ModelCard`` with its YAML metadata)."""

from __future__ import annotations

from typing import Any

import yaml
from huggingface_hub import ModelCard, ModelCardData

from onlstm_tasks.tasks.registry import task_named


TEMPLATE = """---
{{ card_data }}
---

# {{ title }}

An onlstm-tasks model: **{{ task }}**.

```python
from onlstm_tasks import load
model = load("{{ repo_or_folder }}")
```

## Model

`{{ class_path }}`; its resolved init arguments (and the data module's word options) are in `config.json`, the
vocabularies and labels in `word_vocab.json`, `char_vocab.json`, `labels.json`, the weights (no pickle) in
`model.safetensors`.

## Data

{{ data }}

## Metrics of the run

{{ metrics }}

## Reproduce

{{ reproduce }}
"""


def _data_text(data: dict[str, Any] | None) -> str:
    if not data:
        return "Not recorded (the model was saved without its data module's settings)."
    args = {k: v for k, v in (data.get("init_args") or {}).items() if v is not None}
    source = ", ".join(f"{k}={args[k]!r}" for k in ("path", "name", "data_dir", "format") if k in args)
    return f"`{data.get('class_path', '?')}` ({source or 'no source recorded'})."


def _metrics_text(run: dict[str, Any]) -> str:
    metrics = run.get("metrics") or {}
    if not metrics:
        return "Not recorded (no checkpoint callback score in the source checkpoint)."
    rows = "\n".join(f"| {name} | {value:.4f} |" for name, value in metrics.items())
    where = f" (epoch {run['epoch']}, step {run['global_step']})" if "epoch" in run else ""
    return f"Best checkpoint score{where}:\n\n| metric | value |\n|---|---|\n{rows}"


def _reproduce_text(config: dict[str, Any]) -> str:
    run = config.get("run") or {}
    if run.get("training_config"):
        return ("The run's configuration is in `training_config.yaml`:\n\n"
                "```bash\nonlstm-tasks fit --config training_config.yaml\n```")
    if config.get("data"):
        model = {"class_path": config["class_path"], "init_args": config.get("init_args") or {}}
        data = {"class_path": config["data"].get("class_path"),
                "init_args": {k: v for k, v in (config["data"].get("init_args") or {}).items()
                              if k not in ("vocab_from", "predict_file")}}
        text = yaml.safe_dump({"model": model, "data": data}, sort_keys=False)
        return ("The model and data sections of the run (trainer settings were not recorded):\n\n"
                f"```yaml\n{text}```\n\n```bash\nonlstm-tasks fit --config config.yaml  # the YAML above\n```")
    return "Not recorded: the model was saved from Python without its training configuration."


def model_card(config: dict[str, Any], card_data: ModelCardData, **kwargs: Any) -> ModelCard:
    """The card of a folder whose ``config.json`` is ``config``; ``card_data`` carries the licence, library and
    tags set on the mixin (a ``license`` keyword overrides it)."""
    name = config["class_path"].rsplit(".", 1)[-1]
    registered = task_named(name)  # the task's card line and Hub pipeline tag (onlstm_tasks.tasks.registry)
    task, pipeline = (registered.card, registered.pipeline_tag) if registered else (name, None)
    data = ModelCardData(**{**card_data.to_dict(), "pipeline_tag": pipeline,
                            **({"license": kwargs["license"]} if kwargs.get("license") else {})})
    run = config.get("run") or {}
    return ModelCard.from_template(
        data, template_str=TEMPLATE, title=kwargs.get("title") or f"{name} (onlstm-tasks)", task=task,
        class_path=config["class_path"], repo_or_folder=kwargs.get("repo_id") or "path/to/this/folder",
        data=_data_text(config.get("data")), metrics=_metrics_text(run), reproduce=_reproduce_text(config),
    )
