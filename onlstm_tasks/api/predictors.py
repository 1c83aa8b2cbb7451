"""Predictor objects over a loaded task model: raw text in, the records of ``onlstm-tasks predict`` out.

Inputs are read by the data modules' own prediction readers (tokenised as in training), batched by the data
modules' loaders, run through the model's ``predict_step`` under ``torch.inference_mode()``, and turned into
records by :func:`~onlstm_tasks.callbacks.records.prediction_records`: the code path of ``onlstm-tasks predict``,
so both give identical records for identical inputs and batch size.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.fabric.utilities.apply_func import move_data_to_device
from tqdm.auto import tqdm

from onlstm_tasks.callbacks.records import prediction_records
from onlstm_tasks.data.absa.module import AspectSentimentDataModule, add_aspect_row
from onlstm_tasks.data.absa.readers.aspects import AspectCollector
from onlstm_tasks.data.core.common import word_options
from onlstm_tasks.data.core.examples import Example
from onlstm_tasks.data.lm.module import LanguageModelDataModule
from onlstm_tasks.data.ner.module import NERDataModule, prediction_example
from onlstm_tasks.data.core.vocab import Vocabulary

log = logging.getLogger(__name__)

Record = dict[str, Any]  # one prediction, as a line of ``onlstm-tasks predict``'s JSONL output
PROGRESS_FROM = 1000  # inputs from which a progress bar is shown by default
SOURCE = "<python>"  # the ``source`` of examples made from Python values (errors name it and the input's number)


class Predictor:
    """The shared part: the model (eval mode), its vocabularies and the training data module's word options.

    Args:
        model: a task model (``NERTagger``, ``AspectSentimentClassifier``, ``LanguageModel``).
        data: the training data module's hyper-parameters (``{"class_path": ..., "init_args": {...}}`` as
            ``config.json`` keeps them, or the init arguments alone); None: the default word normalisation, with a
            warning.
    """

    data_module: type = NERDataModule

    def __init__(self, model: pl.LightningModule, data: dict[str, Any] | None = None) -> None:
        self.model = model.eval()
        data = (data or {}).get("init_args", data) if data else None
        options = word_options(data)
        if options is None:
            log.warning("%s: no data-module settings saved with the model: words are looked up with the default "
                        "normalisation (lowercase=False, normalize_digits=True)", type(model).__name__)
            self.word_options: dict[str, Any] = {}
        else:
            normalizer, max_word_length = options
            self.word_options = {"lowercase": normalizer.lowercase, "normalize_digits": normalizer.normalize_digits,
                                 "max_word_length": max_word_length}

    def _vocabularies(self) -> Any:
        h = self.model.hparams
        return Vocabulary(h.word_vocab[2:]), Vocabulary(h.char_vocab[2:]), list(h.labels)

    def _datamodule(self, batch_size: int):
        return self.data_module(path=None, eval_batch_size=batch_size, **self.word_options)

    def predict_examples(self, examples: Sequence[Example], batch_size: int = 64,
                         progress: bool | None = None) -> list[Record]:
        """The records of already-read examples, in input order (``progress``: a tqdm bar; None shows one from
        :data:`PROGRESS_FROM` inputs)."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        datamodule = self._datamodule(batch_size)
        datamodule.set_predict_inputs(examples, self._vocabularies())
        loader = datamodule.predict_dataloader()
        show = len(examples) >= PROGRESS_FROM if progress is None else progress
        device = self.model.device
        outputs = []
        with torch.inference_mode():
            for batch_idx, batch in enumerate(tqdm(loader, desc="predict", unit="batch", disable=not show)):
                outputs.append(self.model.predict_step(move_data_to_device(batch, device), batch_idx))
        return prediction_records(outputs, datamodule.examples("predict"), getattr(self.model, "empty_record", None))

    def to(self, device: str | torch.device) -> Predictor:
        self.model.to(device)
        return self

    def save_pretrained(self, folder: str | Path, **kwargs: Any) -> None:
        """Writes the model as a folder that :func:`~onlstm_tasks.api.load` reads back (config.json, vocabularies
        and labels as JSON, model.safetensors, README.md model card): what ``onlstm-tasks export`` writes.
        ``kwargs`` go to the model's ``save_pretrained`` (``model_card_kwargs``, ``push_to_hub``, ...)."""
        self.model.save_pretrained(folder, **kwargs)

    def push_to_hub(self, repo_id: str, **kwargs: Any) -> Any:
        """Uploads that folder to the Hugging Face Hub repo ``repo_id`` (``private``, ``token``, ``revision``, ...
        as the model's ``push_to_hub`` takes them); returns the commit's URL."""
        return self.model.push_to_hub(repo_id, **kwargs)


class Tagger(Predictor):
    """Named entities: ``tagger("Barack Obama visited Paris.")`` -> one record (``tokens``, IOB2 ``tags``,
    ``entities`` with ``type``, token span ``start``/``end``, ``tokens``, ``char_start``/``char_end`` and ``text``;
    ON-LSTM encoders add the induced ``tree`` and ``heads``); a list of texts -> a list of records.
    ``pretokenized=True``: the input is one token list (or a list of token lists)."""

    data_module = NERDataModule

    def __call__(self, inputs: str | Sequence[str] | Sequence[Sequence[str]], batch_size: int = 64,
                 pretokenized: bool = False, progress: bool | None = None) -> Record | list[Record]:
        single = isinstance(inputs, str) or (pretokenized and inputs and isinstance(inputs[0], str))
        items = [inputs] if single else list(inputs)
        examples = [prediction_example(self._line(item, pretokenized, n), pretokenized, SOURCE, n)
                    for n, item in enumerate(items, start=1)]
        records = self.predict_examples(examples, batch_size, progress)
        return records[0] if single else records

    @staticmethod
    def _line(item, pretokenized: bool, number: int) -> str:
        if not pretokenized:
            if not isinstance(item, str):
                raise TypeError(f"input {number}: expected a string (pretokenized=True for token lists), got "
                                f"{type(item).__name__}")
            return item
        if isinstance(item, str) or not all(isinstance(w, str) and w and not any(c.isspace() for c in w)
                                            for w in item):
            raise ValueError(f"input {number}: expected a list of non-empty tokens without spaces, got {item!r}")
        return " ".join(item)


class AspectClassifier(Predictor):
    """Aspect sentiment: ``clf("The battery life is great.", aspect="battery life")`` -> one record (``polarity``,
    ``probabilities`` per class, the aspect's tokens ``aspect``/``span``, ``term``, ``char_span``); ``ordinal``
    picks a later occurrence of the term (0-based), ``char_span=(from, to)`` gives it by characters. Many:
    ``clf.predict([{"text": ..., "aspect": ...}, ...], batch_size=64)`` (the keys of the predict file)."""

    data_module = AspectSentimentDataModule

    def __call__(self, text: str, aspect: str, ordinal: int | None = None,
                 char_span: tuple[int, int] | None = None) -> Record:
        row: dict[str, Any] = {"text": text, "aspect": aspect}
        if ordinal is not None:
            row["ordinal"] = ordinal
        if char_span is not None:
            row["from"], row["to"] = char_span
        return self.predict([row])[0]

    def predict(self, rows: Sequence[dict[str, Any]], batch_size: int = 64,
                progress: bool | None = None) -> list[Record]:
        collector = AspectCollector(SOURCE, keep_conflict=True)
        for number, row in enumerate(rows, start=1):
            add_aspect_row(collector, row, SOURCE, number)
        return self.predict_examples(collector.examples, batch_size, progress)


class LanguageModelPredictor(Predictor):
    """A language model: ``lm.trees(["The cat sat on the mat ."])`` -> per sentence its ``tokens``, the induced
    ``tree`` (bracketed), ``heads`` (1-based, 0 = root) and the syntactic ``distances`` they are read from, and
    ``nll_*``/``ppl_*`` per direction. Words are
    split at whitespace, as the language-model data is read in training; token lists are taken as they are."""

    data_module = LanguageModelDataModule

    def _vocabularies(self) -> Vocabulary:
        return Vocabulary(self.model.hparams.word_vocab[2:])

    def _datamodule(self, batch_size: int):
        options = {k: v for k, v in self.word_options.items() if k != "max_word_length"}  # words only
        return self.data_module(path=None, eval_batch_size=batch_size, **options)

    def trees(self, sentences: Sequence[str] | Sequence[Sequence[str]], batch_size: int = 64,
              progress: bool | None = None) -> list[Record]:
        if isinstance(sentences, str):
            raise TypeError("trees takes a list of sentences (strings or token lists)")
        examples = []
        for number, sentence in enumerate(sentences, start=1):
            words = sentence.split() if isinstance(sentence, str) else list(sentence)
            text = sentence if isinstance(sentence, str) else " ".join(words)
            examples.append(Example(words=tuple(words), text=text, source=SOURCE, line=number))
        return self.predict_examples(examples, batch_size, progress)

    __call__ = trees
