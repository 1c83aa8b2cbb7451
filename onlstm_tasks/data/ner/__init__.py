"""The NER room: the data module (:mod:`.module`: :class:`NERDataModule`, the ``class_path`` configs name) and its
readers (``readers/``: every input format -> ``Example``s with IOB2 tags, behind the one split loader)."""

from .module import NERBatch, NERDataModule

__all__ = ["NERBatch", "NERDataModule"]
