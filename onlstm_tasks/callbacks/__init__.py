"""Lightning callbacks shared by the tasks."""

from onlstm_tasks.callbacks.checkpoint import ResumableCheckpoint
from onlstm_tasks.callbacks.jsonl_writer import JsonlPredictionWriter
from onlstm_tasks.callbacks.resources import EpochResources

__all__ = ["EpochResources", "JsonlPredictionWriter", "ResumableCheckpoint"]
