"""What a checkpoint says about its training data (vocabularies, labels, word options), for the data modules
(:mod:`~onlstm_tasks.data.core.base`) and for loading task models; no Lightning."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .checkpoint_file import read_checkpoint_file
from .features import WordNormalizer, lowercase_fallback_for
from .vocab import Vocabulary

WordOptions = tuple[WordNormalizer, int]  # (word normalisation, max_word_length)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckpointData:
    """What a checkpoint says about the data its model was trained on: the vocabularies and labels (from the
    model's hyper-parameters) and the word options (from the data module's; None when it was saved without one)."""

    words: Vocabulary
    chars: Vocabulary
    labels: list[str]
    word_options: WordOptions | None


def data_from_checkpoint(path: str, model: str) -> CheckpointData:
    """The :class:`CheckpointData` of a checkpoint file (read once).

    ``model`` names the expected kind of model (with its article, e.g. "an NERTagger") in the error raised
    when the vocabularies or labels are missing.
    """
    checkpoint = read_checkpoint_file(path)
    hparams = checkpoint.get("hyper_parameters", {})
    missing = [k for k in ("word_vocab", "char_vocab", "labels") if k not in hparams]
    if missing:
        raise ValueError(f"{path}: checkpoint hyper-parameters lack {missing}; not {model} checkpoint?")
    # the stored lists already start with the special tokens
    return CheckpointData(Vocabulary(hparams["word_vocab"][2:]), Vocabulary(hparams["char_vocab"][2:]),
                          list(hparams["labels"]), word_options(checkpoint.get("datamodule_hyper_parameters")))


def vocabularies_from_checkpoint(path: str, model: str) -> tuple[Vocabulary, Vocabulary, list[str]]:
    """The word and character vocabularies and the labels saved in a checkpoint's hyper-parameters."""
    data = data_from_checkpoint(path, model)
    return data.words, data.chars, data.labels


def word_options(datamodule_hparams: Mapping[str, Any] | None) -> WordOptions | None:
    """The word normalisation (``lowercase``, ``normalize_digits``, ``lowercase_fallback``) and ``max_word_length``
    in a data module's
    hyper-parameters (a checkpoint's ``datamodule_hyper_parameters``), or None without them (a checkpoint saved
    without a data module); the defaults then are ``WordNormalizer()`` and 30."""
    if not datamodule_hparams:
        return None
    defaults = WordNormalizer()
    normalizer = WordNormalizer(
        lowercase=bool(datamodule_hparams.get("lowercase", defaults.lowercase)),
        normalize_digits=bool(datamodule_hparams.get("normalize_digits", defaults.normalize_digits)),
        lowercase_fallback=lowercase_fallback_for(datamodule_hparams.get("lowercase_fallback"),
                                                  datamodule_hparams.get("vectors")),
    )
    return normalizer, int(datamodule_hparams.get("max_word_length", 30))


def word_options_from_checkpoint(path: str, weights_only: bool = True) -> WordOptions | None:
    """:func:`word_options` of the data module a checkpoint file was trained with."""
    checkpoint = read_checkpoint_file(path, weights_only=weights_only)
    return word_options(checkpoint.get("datamodule_hyper_parameters"))


def prediction_word_options(path: str, saved: WordOptions | None, configured: WordOptions) -> WordOptions:
    """The word options to encode data with when the vocabularies come from the checkpoint ``path``.

    The checkpoint's (``saved``, from :class:`CheckpointData`) win over the data config's (``configured``): the
    vocabulary holds words as normalised in training, so any other normalisation turns known words into
    ``<unk>``. A difference is logged; a checkpoint without data-module hyper-parameters keeps ``configured``,
    with a warning that it must match training.
    """
    if saved is None:
        log.warning("%s has no data-module hyper-parameters: words are looked up with the data config's %s; "
                    "they must be those the model was trained with", path, describe_word_options(configured))
        return configured
    if saved != configured:
        log.info("%s: words are looked up with the training data module's %s (the data config says %s)", path,
                 describe_word_options(saved), describe_word_options(configured))
    return saved


def describe_word_options(options: WordOptions) -> str:
    normalizer, max_word_length = options
    return (f"lowercase={normalizer.lowercase}, normalize_digits={normalizer.normalize_digits}, "
            f"max_word_length={max_word_length}, lowercase_fallback={normalizer.lowercase_fallback}")
