"""Lightning callbacks shared by the tasks: the resumable checkpoint, the validation of the step that ends a run,
the JSON-lines prediction writer and per-epoch resource logging.

A sibling of :mod:`onlstm_tasks.tasks` in the layer order (DESIGN.md): it may import every layer below (modules,
embedders, metrics, data, ...), never tasks, cli or probing.
"""

from onlstm_tasks.callbacks.checkpoint import ResumableCheckpoint
from onlstm_tasks.callbacks.final_validation import ValidateLastStep
from onlstm_tasks.callbacks.jsonl_writer import JsonlPredictionWriter
from onlstm_tasks.callbacks.resources import EpochResources

__all__ = ["EpochResources", "JsonlPredictionWriter", "ResumableCheckpoint", "ValidateLastStep"]
