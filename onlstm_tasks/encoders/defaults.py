"""The encoder every model builds when its config names none: an ON-LSTM, with each caller's own settings.

:func:`default_encoder` is the one definition; the settings below are each caller's defaults, unchanged from when
every caller wrote its own (a model built without an ``encoder`` rebuilds them when its checkpoint is loaded, so
they must never change).
"""

from __future__ import annotations

from typing import Any

from onlstm_tasks.encoders.base import EncoderFactory, SequenceEncoder
from onlstm_tasks.encoders.onlstm import ONLSTM

INPUT_SIZE = None
"""In a ``hidden_size`` list: a layer as wide as the encoder's input (the language model's last layer)."""

TAGGER = {"hidden_size": 256, "chunk_size": 8, "bidirectional": True}
"""NER (:class:`~onlstm_tasks.tasks.ner.NERTagger`), each stage of a
:class:`~onlstm_tasks.encoders.DependencyGuidedEncoder` and the inner encoder of an induced-tree
:class:`~onlstm_tasks.encoders.ChildSumTreeLSTM`: a bidirectional ON-LSTM, hidden 256, chunk size 8."""

ASPECT_HEAD = {"hidden_size": 300, "chunk_size": 10}
"""Every aspect head (:mod:`onlstm_tasks.modules.aspect_heads`): a unidirectional ON-LSTM, hidden 300, chunk 10."""

LANGUAGE_MODEL = {"hidden_size": [1150, 1150, INPUT_SIZE], "chunk_size": 10, "num_layers": 3, "dropout": 0.3,
                  "dropconnect": 0.45}
"""The language model's stack (Shen et al., 2019): 3 layers, 1150 units, the last as wide as the words, dropout
0.3 between layers, DropConnect 0.45."""


def default_encoder(**settings: Any) -> EncoderFactory:
    """The factory ``input_size -> ONLSTM(input_size, **settings)``; an :data:`INPUT_SIZE` (None) entry of a
    ``hidden_size`` list becomes the input size. Callers pass their settings, e.g.
    ``default_encoder(**TAGGER)``."""

    def build(input_size: int) -> SequenceEncoder:
        options = dict(settings)
        hidden = options.get("hidden_size")
        if isinstance(hidden, list):
            options["hidden_size"] = [input_size if h is INPUT_SIZE else h for h in hidden]
        return ONLSTM(input_size, **options)

    return build
