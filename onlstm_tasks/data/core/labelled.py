"""``LabelledDataModule``: the options the labelled sentence tasks (NER, aspect sentiment) share, declared once.

A task's data module declares only its own arguments (its source's defaults, its reading options) and passes the
rest on with ``**options``: jsonargparse follows them here, so the CLI, its ``--help`` and the config checks see
every argument, and Lightning saves both levels as hyper-parameters.
"""

from __future__ import annotations

from typing import Any

from .base import TaskDataModule
from .features import WordNormalizer, lowercase_fallback_for


class LabelledDataModule(TaskDataModule):
    """Labelled sentences read with ``datasets.load_dataset``'s arguments, encoded as words and characters.

    Args:
        name: the dataset's configuration name (``datasets.load_dataset``'s ``name``).
        data_files: raw files: a map split -> file, directory or glob (``datasets.load_dataset``'s ``data_files``).
        format: the reader (``auto``: by the dataset's columns or the files' extensions).
        reader_options: extra reader arguments.
        batch_size: sentences per training batch (at most: ``max_tokens`` may cap it).
        eval_batch_size: sentences per validation, test and predict batch.
        min_freq: training words seen fewer times than this read as ``<unk>``.
        lowercase: words are lowercased before the vocabulary lookup (characters always see the raw word).
        normalize_digits: every digit of a word reads as ``0`` in the vocabulary lookup.
        max_word_length: characters of a word beyond this are left out of its character features (the word and
            its word id are kept).
        validation_ratio: when the source has no validation split, this fraction of the training sentences is
            held out, so checkpoints are never selected on test.
        seed: the seed of that hold-out (and of the batch order).
        vocab_from: a checkpoint whose vocabularies and labels to use instead of the training split's (the CLI
            fills it in for validate/test/predict with ``--ckpt_path``).
        predict_file: the inputs of ``predict``.
        num_workers: data-loading processes (None: none; batches are built in the training process).
        max_tokens: a cap on the tokens of a training batch (None: ``batch_size`` sentences).
        pad_to_multiple_of: batches are padded to a length, and words to a character width, that is a multiple of
            this (1: the longest sentence and word of the batch). 8 on a GPU: fewer distinct shapes per epoch, so
            fewer first-use costs (kernel selection, allocator growth).
        vectors: a word vectors file (GloVe/word2vec text, e.g. from ``scripts/train_vectors.py``): its first
            ``vectors_max_words`` words (most frequent first; all with ``None``), normalised as the data's words,
            join the training words in the vocabulary, so dev/test/predict-time words that training never saw keep
            their vectors (give the model's embedder the same file as ``pretrained``). Saved in the checkpoint's
            vocabulary: predicting needs no file.
        vectors_max_words: how many of the vectors file's words (its first, most frequent) join the vocabulary;
            ``None``: all.
        lowercase_fallback: a word missing from the vocabulary is looked up lowercased before it becomes
            ``<unk>``; ``None``: on exactly with ``vectors``.
    """

    def __init__(
        self,
        name: str | None = None,
        data_files: dict[str, Any] | str | None = None,
        format: str = "auto",
        reader_options: dict[str, Any] | None = None,
        batch_size: int = 32,
        eval_batch_size: int = 64,
        min_freq: int = 1,
        lowercase: bool = False,
        normalize_digits: bool = True,
        max_word_length: int = 30,
        validation_ratio: float = 0.1,
        vocab_from: str | None = None,
        predict_file: str | None = None,
        num_workers: int | None = None,
        max_tokens: int | None = None,
        pad_to_multiple_of: int = 1,
        seed: int = 0,
        vectors: str | None = None,
        vectors_max_words: int | None = 100_000,
        lowercase_fallback: bool | None = None,
    ) -> None:
        super().__init__()
        if pad_to_multiple_of < 1:
            raise ValueError(f"pad_to_multiple_of must be at least 1, got {pad_to_multiple_of}")
        self.save_hyperparameters()  # with the subclass's own arguments (Lightning collects every level)
        self.normalizer = WordNormalizer(lowercase, normalize_digits,
                                         lowercase_fallback_for(lowercase_fallback, vectors))

    def source_options(self) -> dict[str, Any]:
        """``datasets.load_dataset``'s arguments besides ``path``, and the reader's, for the task's split loader."""
        h = self.hparams
        return {"name": h.name, "data_dir": h.data_dir, "data_files": h.data_files, "revision": h.revision,
                "format": h.format, **(h.reader_options or {})}
