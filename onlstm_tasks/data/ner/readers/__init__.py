"""NER readers: every input format -> ``list[Example]`` with IOB2 tags.

Each ``read_*`` function takes ``(data, source=None, **options)`` and returns ``(examples, stats)``, where
``stats`` counts what was read and what was skipped or repaired by design (also logged at INFO).
``load_ner_splits`` is the single entry point mirroring ``datasets.load_dataset``.
"""

from onlstm_tasks.data.ner.readers.columns import read_columns
from onlstm_tasks.data.ner.readers.conll2012 import read_conll2012
from onlstm_tasks.data.ner.readers.conllx import read_conllx
from onlstm_tasks.data.ner.readers.ontonotes import read_ontonotes_rows
from onlstm_tasks.data.ner.readers.formats import (
    DATASET_FORMATS,
    FILE_FORMATS,
    READERS,
    file_format,
    load_ner_splits,
    normalise_split,
)
from onlstm_tasks.data.ner.readers.tokens import read_token_rows

__all__ = [
    "DATASET_FORMATS",
    "FILE_FORMATS",
    "READERS",
    "file_format",
    "load_ner_splits",
    "normalise_split",
    "read_columns",
    "read_conll2012",
    "read_conllx",
    "read_ontonotes_rows",
    "read_token_rows",
]
