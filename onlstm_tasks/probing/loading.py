"""Building an :class:`~onlstm_tasks.probing.probe.EncoderProbe` from a checkpoint file.

The task model is loaded by :mod:`onlstm_tasks.tasks.loading` (whatever its class); the word normalisation comes
from the data module's hyper-parameters saved with it.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from onlstm_tasks.data.core.common import word_options
from onlstm_tasks.probing.probe import EncoderProbe
from onlstm_tasks.tasks.loading import _load_model, read_checkpoint

log = logging.getLogger(__name__)

__all__ = ["load_probe"]


def load_probe(path: str | Path, map_location: str | torch.device = "cpu", trust: bool = False) -> EncoderProbe:
    """An :class:`EncoderProbe` over a checkpoint's model, with the word normalisation of the data module it was
    trained with (``datamodule_hyper_parameters``; the defaults, with a warning, when the checkpoint has none)."""
    checkpoint = read_checkpoint(path, trust)
    model = _load_model(path, checkpoint, map_location, trust)
    options = word_options(checkpoint.get("datamodule_hyper_parameters"))
    if options is None:
        log.warning("%s has no data-module hyper-parameters: words are looked up with the default normalisation "
                    "(lowercase=False, normalize_digits=True)", path)
        return EncoderProbe(model, name=str(path))
    normalizer, max_word_length = options
    return EncoderProbe(model, normalizer, max_word_length, name=str(path))
