"""The language model's room: the data module (:mod:`.module`: :class:`LanguageModelDataModule`, the ``class_path``
configs name, and its stream of windows) and the text rows it reads (:mod:`.text`: plain text, or any NER format's
words)."""

from .module import LanguageModelDataModule, LMBatch

__all__ = ["LMBatch", "LanguageModelDataModule"]
