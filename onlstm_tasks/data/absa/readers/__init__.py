"""Aspect-sentiment readers: every input format -> one ``Example`` per aspect term.

Each ``read_*`` function takes ``(data, source=None, keep_conflict=False, ...)`` and returns
``(examples, stats)``; an Example has ``words`` (from ``data.tokenize``), ``label`` (positive, negative,
neutral or conflict), ``aspect`` (token span [start, end)), ``text``, ``offsets`` and ``sentence_id``.
``load_absa_splits`` is the single entry point mirroring ``datasets.load_dataset``.
"""

from onlstm_tasks.data.absa.readers.aspects import POLARITIES, nth_occurrence, token_span
from onlstm_tasks.data.absa.readers.semeval_xml import read_semeval_xml
from onlstm_tasks.data.absa.readers.seg import read_seg
from onlstm_tasks.data.absa.readers.setfit import read_setfit_rows
from onlstm_tasks.data.absa.readers.formats import (
    DATASET_FORMATS,
    FILE_FORMATS,
    READERS,
    file_format,
    load_absa_splits,
)

__all__ = [
    "DATASET_FORMATS",
    "FILE_FORMATS",
    "POLARITIES",
    "READERS",
    "file_format",
    "load_absa_splits",
    "nth_occurrence",
    "read_semeval_xml",
    "read_seg",
    "read_setfit_rows",
    "token_span",
]
