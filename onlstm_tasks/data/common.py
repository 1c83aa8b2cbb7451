"""Building blocks shared by the task data modules (NER, aspect sentiment): carving a validation split,
vocabularies and word options from a checkpoint, and length-bucketed loaders."""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch.utils.data import DataLoader

from .features import WordNormalizer
from .sampler import BucketBatchSampler
from .vocab import Vocabulary

T = TypeVar("T")
WordOptions = tuple[WordNormalizer, int]  # (word normalisation, max_word_length)

log = logging.getLogger(__name__)


def carve_validation(
    examples: Sequence[T], ratio: float, seed: int, group: Callable[[T], Hashable] | None = None
) -> tuple[list[T], list[T], int]:
    """Holds out ``max(1, int(ratio * n))`` of ``n`` units chosen by a seeded permutation (the same every run).

    A unit is one example, or with ``group`` all examples sharing a key (e.g. the aspects of one sentence,
    which must not straddle train and validation). Both parts keep the input order. Returns
    ``(train, validation, number of units held out)``.
    """
    keys = [group(ex) for ex in examples] if group is not None else list(range(len(examples)))
    units = list(dict.fromkeys(keys))  # distinct keys, first-seen order
    order = torch.randperm(len(units), generator=torch.Generator().manual_seed(seed)).tolist()
    n_held = max(1, int(len(units) * ratio))
    held = {units[i] for i in order[:n_held]}
    train = [ex for ex, key in zip(examples, keys) if key not in held]
    validation = [ex for ex, key in zip(examples, keys) if key in held]
    return train, validation, n_held


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
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
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
    """The word normalisation (``lowercase``, ``normalize_digits``) and ``max_word_length`` in a data module's
    hyper-parameters (a checkpoint's ``datamodule_hyper_parameters``), or None without them (a checkpoint saved
    without a data module); the defaults then are ``WordNormalizer()`` and 30."""
    if not datamodule_hparams:
        return None
    defaults = WordNormalizer()
    normalizer = WordNormalizer(
        lowercase=bool(datamodule_hparams.get("lowercase", defaults.lowercase)),
        normalize_digits=bool(datamodule_hparams.get("normalize_digits", defaults.normalize_digits)),
    )
    return normalizer, int(datamodule_hparams.get("max_word_length", 30))


def word_options_from_checkpoint(path: str, weights_only: bool = True) -> WordOptions | None:
    """:func:`word_options` of the data module a checkpoint file was trained with."""
    checkpoint = torch.load(path, map_location="cpu", weights_only=weights_only)
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
            f"max_word_length={max_word_length}")


def bucket_loader(
    lengths: Sequence[int], batch_size: int, shuffle: bool, seed: int, collate: Callable[[list[int]], object],
    num_workers: int = 0,
) -> DataLoader:
    """A DataLoader over example indices, batched by :class:`BucketBatchSampler` (similar lengths together)."""
    sampler = BucketBatchSampler(lengths, batch_size, shuffle=shuffle, seed=seed)
    # the batch sampler yields index lists; the dataset is just the index itself
    return DataLoader(range(len(lengths)), batch_sampler=sampler, collate_fn=collate, num_workers=num_workers)


def adopt_checkpoint_data(datamodule, path: str, model: str) -> tuple[Vocabulary, Vocabulary, list[str]]:
    """A data module's vocabularies and labels from the checkpoint ``path``; the checkpoint's word options
    (:func:`prediction_word_options`) replace the data module's ``normalizer``, ``max_word_length``,
    ``lowercase`` and ``normalize_digits``, so words are looked up as they were normalised in training."""
    saved = data_from_checkpoint(path, model)
    hparams = datamodule.hparams
    normalizer, hparams.max_word_length = prediction_word_options(
        path, saved.word_options, (datamodule.normalizer, hparams.max_word_length))
    datamodule.normalizer = normalizer
    hparams.lowercase, hparams.normalize_digits = normalizer.lowercase, normalizer.normalize_digits
    return saved.words, saved.chars, saved.labels
