"""``TaskDataModule``: the data-module skeleton every task shares (NER, aspect sentiment, language model).

Splits are read once (the one split loader behind each task's ``_read_splits``), a validation split is carved
from train when the source has none, vocabularies come from the training split only (or from the checkpoint
``vocab_from``: the CLI sets it for validate/test/predict with ``--ckpt_path``), each split is encoded once,
and the loaders batch sentences of similar length (:class:`~onlstm_tasks.data.core.sampler.BucketBatchSampler`).
A task's data module says only what differs: how its splits are read and cut, its vocabularies, its items and
batches, and its prediction file.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader

from .common import data_from_checkpoint, prediction_word_options
from .examples import DataFormatError
from .features import extend_with_vectors
from .gold_trees import model_reads_gold_trees
from .resumable_loader import ResumableDataLoader
from .sampler import BucketBatchSampler
from .vocab import Vocabulary

T = TypeVar("T")

# the splits each stage encodes at setup (all but predict without a stage); fit also encodes a test split when the
# data has one, so its labels (and trees) are checked before the first training step, not after the whole fit
STAGE_SPLITS = {"fit": ("train", "validation"), "validate": ("validation",), "test": ("test",),
                "predict": ("predict",)}


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


def bucket_loader(
    lengths: Sequence[int], batch_size: int, shuffle: bool, seed: int, collate: Callable[[list[int]], object],
    num_workers: int = 0, pin_memory: bool = False, max_tokens: int | None = None,
) -> DataLoader:
    """A DataLoader over example indices, batched by :class:`BucketBatchSampler` (similar lengths together, at most
    ``batch_size`` rows and, with ``max_tokens``, at most that many padded tokens); the training loader
    (``shuffle``) resumes mid-epoch (:class:`ResumableDataLoader`). Its own seeded generator keeps the loader from
    drawing on the global RNG, so a resumed run's dropout draws match an uninterrupted run's. ``pin_memory``: batches
    in page-locked memory (for a GPU: the move to the device then does not block the host)."""
    sampler = BucketBatchSampler(lengths, batch_size, shuffle=shuffle, seed=seed, max_tokens=max_tokens)
    # the batch sampler yields index lists; the dataset is just the index itself
    loader = ResumableDataLoader if shuffle else DataLoader
    return loader(range(len(lengths)), batch_sampler=sampler, collate_fn=collate, num_workers=num_workers,
                  pin_memory=pin_memory, persistent_workers=num_workers > 0,
                  generator=torch.Generator().manual_seed(seed))


def adopt_checkpoint_data(datamodule, path: str, model: str) -> tuple[Vocabulary, Vocabulary, list[str]]:
    """A data module's vocabularies and labels from the checkpoint ``path``; the checkpoint's word options
    (:func:`~onlstm_tasks.data.core.common.prediction_word_options`) replace the data module's ``normalizer``,
    ``max_word_length``, ``lowercase`` and ``normalize_digits``, so words are looked up as they were normalised
    in training."""
    saved = data_from_checkpoint(path, model)
    hparams = datamodule.hparams
    normalizer, hparams.max_word_length = prediction_word_options(
        path, saved.word_options, (datamodule.normalizer, hparams.max_word_length))
    datamodule.normalizer = normalizer
    hparams.lowercase, hparams.normalize_digits = normalizer.lowercase, normalizer.normalize_digits
    if "lowercase_fallback" in hparams:
        hparams.lowercase_fallback = normalizer.lowercase_fallback
    return saved.words, saved.chars, saved.labels


class TaskDataModule(pl.LightningDataModule):
    """The shared skeleton. A subclass's ``__init__`` calls ``super().__init__()``, then
    ``self.save_hyperparameters()`` (its own arguments are the saved hyper-parameters: ``path``, ``data_files``,
    ..., ``batch_size``, ``eval_batch_size``, ``validation_ratio``, ``vocab_from``, ``predict_file``,
    ``num_workers``, ``seed``) and sets ``normalizer``; it implements:

    - ``_read_splits()``: every split of the source (the one split loader with its formats);
    - ``_build_vocabularies(train)`` / ``_vocabularies_from_checkpoint(path)``: its vocabularies;
    - ``_encode_split(split)``: the encoded items of a split, ``_item_length(item)`` and ``_collate(split)``;
    - ``_read_predict_file(path)``: the examples of ``predict_file``;

    and may override ``_prepare_split`` (e.g. cut long sentences) and ``_carve_validation`` (e.g. by sentence).
    """

    predict_file_format = "one sentence per line"  # what ``predict_file`` holds, for the error without one
    vocabularies_need = "vocabularies need one"  # for the error without a training split

    def __init__(self) -> None:
        super().__init__()
        self._splits: dict[str, list] | None = None
        self._vocab: Any = None
        self._encoded: dict[str, list] = {}
        self._packed: dict[str, object] = {}  # split -> its tokens as flat tensors (data/core/packed.py), built once
        self._predict_examples: list | None = None
        self._model_to_run: Any = None  # the model a Trainer will run, named by check_inputs before it is attached

    @property
    def _log(self) -> logging.Logger:
        return logging.getLogger(type(self).__module__)  # the task's module logs what its data module does

    # ---- data facts, linked to the model by the CLI -----------------------------------------------------
    @property
    def word_vocab(self) -> list[str]:
        return self._vocabularies()[0].itos

    @property
    def char_vocab(self) -> list[str]:
        return self._vocabularies()[1].itos

    # ---- loading ------------------------------------------------------------------------------------------
    def splits(self) -> dict[str, list]:
        if self._splits is None:
            if self.hparams.path is None:
                self._splits = {}
                return self._splits
            raw = self._read_splits()
            if "validation" not in raw and "train" in raw:
                raw["train"], raw["validation"] = self._carve_validation(raw["train"])
            self._splits = {split: self._prepare_split(split, items) for split, items in raw.items()}
        return self._splits

    def _read_splits(self) -> dict[str, list]:
        raise NotImplementedError

    def _prepare_split(self, split: str, items: list) -> list:
        return items

    def _carve_validation(self, train: list) -> tuple[list, list]:
        h = self.hparams
        rest, validation, n_val = carve_validation(train, h.validation_ratio, h.seed)
        self._log.info("no validation split: %d of %d training sentences held out (seed %d)", n_val, len(train),
                       h.seed)
        return rest, validation

    def _split(self, split: str) -> list:
        items = self.splits().get(split)
        if items is None:
            raise ValueError(f"the data has no {split!r} split (found {sorted(self.splits())})")
        return items

    def examples(self, split: str) -> list:
        if split == "predict":
            if self._predict_examples is not None:  # read already, or given by set_predict_inputs
                return self._predict_examples
            if not self.hparams.predict_file:
                raise ValueError(f"predict needs data.predict_file ({self.predict_file_format})")
            self._predict_examples = self._read_predict_file(self.hparams.predict_file)
            return self._predict_examples
        return self._split(split)

    def _read_predict_file(self, path: str) -> list:
        raise NotImplementedError

    def set_predict_inputs(self, examples: Sequence, vocabularies: Any) -> None:
        """Predict ``examples`` (already read, e.g. by the Python API from strings) with ``vocabularies`` (a
        model's, in the form ``_vocabularies`` returns) instead of ``predict_file`` and the training split."""
        if not examples:
            raise ValueError("nothing to predict: no input")
        self._vocab = vocabularies
        self._predict_examples = list(examples)
        self._encoded.pop("predict", None)
        self._packed.pop("predict", None)

    def _vocabularies(self) -> Any:
        if self._vocab is None:
            if self.hparams.vocab_from:
                self._vocab = self._vocabularies_from_checkpoint(self.hparams.vocab_from)
            else:
                train = self.splits().get("train")
                if not train:
                    raise ValueError(f"no training split found: {self.vocabularies_need} (or set vocab_from to a "
                                     "checkpoint)")
                self._vocab = self._build_vocabularies(train)
        return self._vocab

    def _build_vocabularies(self, train: list) -> Any:
        raise NotImplementedError

    def _with_vectors(self, words: Vocabulary) -> Vocabulary:
        """The training word vocabulary extended with the words of ``vectors`` (when set), logged with counts."""
        path = self.hparams.get("vectors")
        if not path:
            return words
        extended, n = extend_with_vectors(words, path, self.normalizer, self.hparams.vectors_max_words)
        self._log.info("vectors %s: %d words read (vectors_max_words=%s): %d added to the %d training words, %d "
                       "already training words, %d merged by normalisation", path, n["read"],
                       self.hparams.vectors_max_words, n["added"], len(words) - 2, n["known"], n["merged"])
        return extended

    def _singleton_table(self, split: str) -> torch.Tensor | None:
        """For training batches: a bool per word index, True for words counted once in training (None for other
        splits, and for vocabularies without counts, e.g. from a checkpoint)."""
        words = self._vocabularies()[0]
        if split != "train" or not words.counts:
            return None
        return torch.tensor(words.singletons(), dtype=torch.bool)

    def _vocabularies_from_checkpoint(self, path: str) -> Any:
        raise NotImplementedError

    @staticmethod
    def _unknown_label(example, label: str, split: str, labels: list[str], token: int | None = None
                       ) -> DataFormatError:
        """The error of a label that the vocabularies (from training) do not hold, at the line of its token
        (``token``, where the format has a line per token) or else of its example."""
        lines = example.token_lines
        line = lines[token] if token is not None and lines else example.line
        return DataFormatError(example.source, line, f"label {label!r} in the {split} split never occurs in "
                               f"training (known: {labels})")

    # ---- encoding and loaders -----------------------------------------------------------------------------
    def _encode(self, split: str) -> list:
        if split not in self._encoded:
            self._encoded[split] = self._encode_split(split)
        return self._encoded[split]

    def _encode_split(self, split: str) -> list:
        raise NotImplementedError

    def _packed_split(self, split: str, build: Callable[[list], object]):
        """``build(encoded items)`` of ``split`` (its tokens as flat tensors), made once and kept."""
        if split not in self._packed:
            self._packed[split] = build(self._encode(split))
        return self._packed[split]

    def setup(self, stage: str | None = None) -> None:
        """Reads every split once and encodes (so checks) those the stage uses: with ``fit`` the test split too
        when there is one (``--test_after_fit``, or a later ``test`` of the same data), so an unseen label, an empty
        token or a bad tree in it is reported before the first training step."""
        splits = STAGE_SPLITS.get(stage, ("train", "validation", "test"))
        if stage == "fit" and "test" in self.splits():
            splits = (*splits, "test")
        for split in splits:
            self._encode(split)

    def check_inputs(self, stage: str, model: Any) -> None:
        """Reads and encodes (so checks) what ``stage`` uses, as ``setup(stage)`` does once a Trainer runs
        ``model``; the CLI calls it before it builds the Trainer, so a data error leaves no run folder behind and
        ends in its one line. ``setup`` then finds the work done."""
        self._model_to_run = model
        self.setup(stage)

    def _reads_gold_trees(self, setting: bool | None) -> bool | None:
        """Whether batches need gold trees: ``setting`` when given, else whether the model the Trainer attached
        reads them (:func:`~onlstm_tasks.data.core.gold_trees.model_reads_gold_trees`), or the model named by
        :meth:`check_inputs`; None without either (then the data decides: trees when it has them)."""
        if setting is not None:
            return setting
        trainer = self.trainer
        model = getattr(trainer, "lightning_module", None) if trainer is not None else self._model_to_run
        return None if model is None else model_reads_gold_trees(model)

    def _item_length(self, item) -> int:
        return len(item[0])

    def _collate(self, split: str) -> Callable[[list[int]], object]:
        raise NotImplementedError

    def _loader(self, split: str, train: bool) -> DataLoader:
        items = self._encode(split)
        size = self.hparams.batch_size if train else self.hparams.eval_batch_size
        on_gpu = self._on_gpu()
        # unset: none, on every device. A batch is a few gathers of the split's packed tensors, which costs the
        # training process several times less than receiving it from a loader process (pickled tensors through
        # shared memory): scripts/benchmark_training.py --loader-only prints both
        workers = self.hparams.num_workers or 0
        return bucket_loader([self._item_length(item) for item in items], size, train, self.hparams.seed,
                             self._collate(split), workers, pin_memory=on_gpu,
                             max_tokens=self.hparams.get("max_tokens") if train else None)

    def _on_gpu(self) -> bool:
        """Whether the trainer (if any) runs on a CUDA device."""
        strategy = getattr(self.trainer, "strategy", None) if self.trainer is not None else None
        return strategy is not None and strategy.root_device.type == "cuda"

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", train=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("validation", train=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", train=False)

    def predict_dataloader(self) -> DataLoader:
        return self._loader("predict", train=False)
