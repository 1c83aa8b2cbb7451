"""The aspect-sentiment room: the data module (:mod:`.module`: :class:`AspectSentimentDataModule`, the
``class_path`` configs name) and its readers (``readers/``: every input format -> one ``Example`` per aspect)."""

from .module import AspectBatch, AspectSentimentDataModule

__all__ = ["AspectBatch", "AspectSentimentDataModule"]
