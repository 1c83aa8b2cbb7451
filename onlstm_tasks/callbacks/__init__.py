"""Lightning callbacks shared by the tasks."""

from onlstm_tasks.callbacks.jsonl_writer import JsonlPredictionWriter

__all__ = ["JsonlPredictionWriter"]
