"""``AspectSentimentDataModule``: any supported aspect-sentiment source -> vocabularies -> padded aspect batches."""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Iterable
from typing import Any

import torch

from onlstm_tasks.errors import DataFormatError
from onlstm_tasks.trees.gold import (
    ParsedSentence,
    ProjectionCounts,
    parsed_by_text,
    read_depparsed_json,
)

from .readers import POLARITIES, load_absa_splits, nth_occurrence
from .readers.aspects import AspectCollector
from ..core.base import adopt_checkpoint_data, carve_validation
from ..core.batching import IGNORE, DeviceBatch, TokenBatch
from ..core.examples import Example
from ..core.features import TokenEncoder, build_vocabularies
from ..core.packed import PackedTokens, gold_heads_values, padded_heads
from ..core.gold_trees import example_heads_from_parsed
from ..core.labelled import LabelledDataModule
from ..core.reading import read_lines
from ..core.vocab import Vocabulary

log = logging.getLogger(__name__)

UNKNOWN_LABEL = IGNORE  # label id of prediction inputs (the ``ignore_index`` of ``cross_entropy``)


@dataclass
class AspectBatch(DeviceBatch):
    tokens: TokenBatch
    aspect_mask: torch.Tensor  # [B, T] bool, True on the aspect term's tokens (always inside tokens.mask)
    labels: torch.Tensor  # [B] long class ids (indices into the data module's ``labels``); -100 when unknown
    index: list[int]  # positions of the batch's examples in their split
    heads: torch.Tensor | None = None  # [B, T] long gold heads (0-based, root and padding -> themselves) when the
    #                                    data module has ``parses``; None otherwise


def read_aspect_prediction_file(path: str) -> list[Example]:
    """JSON lines ``{"text": ..., "aspect": ...}``, the aspect located by an optional ``"ordinal"``
    (0-based occurrence in the text, default 0) or by ``"from"``/``"to"`` character offsets (checked
    against the aspect). Texts are tokenised as in training; ``line`` is the 1-based line number. Blank lines
    (JSON lines allows them) are skipped and counted in the log: each record repeats its ``text`` and ``term``."""
    lines = read_lines(path, 'JSON lines {"text": ..., "aspect": ...}')
    collector = AspectCollector(path, keep_conflict=True)
    blank = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            blank += 1
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataFormatError(path, number, f"expected a JSON object, found invalid JSON ({err.msg})") from None
        add_aspect_row(collector, row, path, number)
    if not collector.examples:
        raise DataFormatError(path, None, 'expected at least one line {"text": ..., "aspect": ...}')
    if blank:
        log.info("%s: %d blank line(s) skipped", path, blank)
    return collector.examples


def add_aspect_row(collector: AspectCollector, row: dict, path: str, number: int) -> None:
    """One prediction input ``{"text": ..., "aspect": ...}`` (optional ``"ordinal"`` or ``"from"``/``"to"``)
    checked, located and tokenised as in training into ``collector`` (the file reader and the Python API)."""
    if not isinstance(row, dict):
        raise DataFormatError(path, number, f"expected a JSON object, found {type(row).__name__}")
    text, term = row.get("text"), row.get("aspect")
    for key, value in (("text", text), ("aspect", term)):
        if not isinstance(value, str) or not value.strip():
            raise DataFormatError(path, number, f'expected a non-empty string "{key}", found {value!r}')
    collector.stats["sentences"] += 1
    start = _locate(row, text, term, path, number)
    collector.add(text, start, start + len(term), None, number, str(number))


def _locate(row: dict, text: str, term: str, path: str, number: int) -> int:
    """Start character of the aspect in the text, from ``from``/``to`` or ``ordinal``."""
    if "from" in row or "to" in row:
        if "ordinal" in row:
            raise DataFormatError(path, number, 'expected either "ordinal" or "from"/"to", found both')
        start, end = row.get("from"), row.get("to")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)):
            raise DataFormatError(path, number, f'expected integer "from" and "to", found {start!r} and {end!r}')
        if text[start:end] != term or not 0 <= start < end <= len(text):
            raise DataFormatError(path, number, f"offsets from={start} to={end} give {text[start:end]!r} but the "
                                  f"aspect is {term!r}")
        return start
    ordinal = row.get("ordinal", 0)
    if not isinstance(ordinal, int) or isinstance(ordinal, bool) or ordinal < 0:
        raise DataFormatError(path, number, f'expected "ordinal" to be a 0-based occurrence number, found {ordinal!r}')
    start = nth_occurrence(text, term, ordinal)
    if start is None:
        raise DataFormatError(path, number, f"expected occurrence {ordinal} (0-based) of the aspect {term!r} in the "
                              f"text, but it occurs {text.count(term)} time(s)")
    return start


def sentence_key(example: Example) -> tuple[str, str | int]:
    """Which sentence an aspect belongs to (its aspects stay together when a validation split is carved)."""
    return example.source, example.sentence_id if example.sentence_id is not None else example.line



def distinct_sentences(examples: list[Example]) -> Iterable[Example]:
    """The first aspect example of every distinct sentence (keyed by ``sentence_id``, else by text, else by words).

    Aspect examples repeat their sentence once per aspect: counted per example, a word of a sentence with two
    aspects would count twice, so word frequencies (``min_freq``) and singletons (``unk_replace``) would depend on
    how many aspects a sentence has. Vocabularies count each training sentence once.
    """
    first: dict = {}
    for ex in examples:
        key = ex.sentence_id if ex.sentence_id is not None else (ex.text if ex.text else ex.words)
        first.setdefault(key, ex)
    return first.values()

class AspectSentimentDataModule(LabelledDataModule):
    """Aspect sentiment data from the hub, a local dataset folder, SemEval XML or ``.seg`` files; one example
    per aspect term. Arguments mirror ``datasets.load_dataset`` and :class:`~onlstm_tasks.data.ner.NERDataModule`.

    Args:
        path: a hub dataset id or a local folder (``datasets.load_dataset``'s ``path``).
        data_dir: a folder inside the dataset (``datasets.load_dataset``'s ``data_dir``).
        revision: the hub revision (branch, tag or commit) to read; ``null`` for a local folder.
        format: reader: ``auto``, ``setfit`` (the ``tomaarsen/setfit-absa-semeval-*`` schema), ``semeval_xml``
            or ``seg``.
        reader_options: extra reader arguments (e.g. ``{text_column: sentence}`` for ``setfit``).
        keep_conflict: keep the ``conflict`` class (dropped by default, as is usual for SemEval-2014; counted
            and logged by the readers).
        validation_ratio: when the source has no validation split, this fraction of the training sentences (all
            aspects of a sentence together) is held out, so checkpoints are never selected on test.
        seed: the seed of that hold-out (and of the batch order).
        predict_file: JSON lines ``{"text": ..., "aspect": ...}`` (optional ``"ordinal"``, 0-based: 0 is the
            aspect's first occurrence in the text; or ``"from"``/``"to"`` character offsets).
        parses: gold dependency trees for the batches (``AspectBatch.heads``): a SemEval ``*_depparsed.json`` parser
            output file, or a directory of them. Sentences are matched by text and each tree is projected onto the
            example's own words (:func:`~onlstm_tasks.data.core.gold_trees.example_heads_from_parsed`). A train, validation
            or test sentence without a parse is an error; prediction inputs without one get no heads. A text parsed
            more than once keeps its first parse; that and the repairs of the projection are counted and logged
            per split.
        options: the arguments every labelled task shares (:class:`~onlstm_tasks.data.core.labelled.LabelledDataModule`:
            ``batch_size``, ``min_freq``, ``vocab_from``, ``vectors``, ...).
    """

    predict_file_format = 'JSON lines {"text": ..., "aspect": ...}'

    def __init__(
        self,
        path: str | None = "tomaarsen/setfit-absa-semeval-restaurants",
        data_dir: str | None = None,
        revision: str | None = None,
        keep_conflict: bool = False,
        parses: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self._parses: dict[str, ParsedSentence] | None = None
        self._duplicates: Counter[str] = Counter()  # text -> later parses of it ignored (the first one is kept)

    # ---- data facts, linked to the model by the CLI (word_vocab, char_vocab: TaskDataModule) -------------
    @property
    def labels(self) -> list[str]:
        """The class names, sorted (e.g. ``["negative", "neutral", "positive"]``)."""
        return self._vocabularies()[2]

    # ---- loading ------------------------------------------------------------------------------------------
    def _read_splits(self) -> dict[str, list[Example]]:
        return load_absa_splits(self.hparams.path, **{**self.source_options(), "keep_conflict": self.hparams.keep_conflict})

    def _carve_validation(self, train: list[Example]) -> tuple[list[Example], list[Example]]:
        h = self.hparams
        rest, validation, n_held = carve_validation(train, h.validation_ratio, h.seed, group=sentence_key)
        log.info("no validation split: %d of %d training sentences (%d of %d aspects) held out (seed %d)", n_held,
                 len({sentence_key(ex) for ex in train}), len(validation), len(train), h.seed)
        return rest, validation

    def _read_predict_file(self, path: str) -> list[Example]:
        return read_aspect_prediction_file(path)

    def _vocabularies_from_checkpoint(self, path: str) -> tuple[Vocabulary, Vocabulary, list[str]]:
        vocab = adopt_checkpoint_data(self, path, "an aspect-sentiment")
        if not vocab[2] or not set(vocab[2]) <= set(POLARITIES):
            raise ValueError(f"{path}: the checkpoint's labels {vocab[2][:6]} are not polarities "
                             f"{list(POLARITIES)}; not an aspect-sentiment checkpoint?")
        return vocab

    def _build_vocabularies(self, train: list[Example]) -> tuple[Vocabulary, Vocabulary, list[str]]:
        sentences = list(distinct_sentences(train))
        words, chars = build_vocabularies(sentences, self.normalizer, self.hparams.min_freq)
        words = self._with_vectors(words)
        labels = sorted({ex.label for ex in train})
        log.info("vocabularies from %d training aspects in %d distinct sentences (each counted once): %d words, "
                 "%d characters, labels %s", len(train), len(sentences), len(words), len(chars), labels)
        return words, chars, labels

    def parses(self) -> dict[str, ParsedSentence] | None:
        """The parsed sentences of ``parses`` keyed by stripped text (None without ``parses``)."""
        if self._parses is None and self.hparams.parses:
            path = Path(self.hparams.parses)
            files = [path]
            if path.is_dir():
                files = sorted(path.glob("*_depparsed.json")) or sorted(path.glob("*.json"))
            if not files or not files[0].exists():
                raise FileNotFoundError(f"data.parses: no *_depparsed.json file at {path}")
            self._duplicates = Counter()
            self._parses = parsed_by_text([s for file in files for s in read_depparsed_json(file)], self._duplicates)
            log.info("gold trees of %d sentences from %s (%d texts parsed more than once: first parse kept)",
                     len(self._parses), ", ".join(str(f) for f in files), len(self._duplicates))
        return self._parses

    def _gold_heads(self, split: str, examples: list[Example]) -> list[list[int] | None]:
        """One tree (list form) per example from ``parses``, or Nones (no ``parses``, or prediction inputs of
        which some have no parse)."""
        if self._reads_gold_trees(None) is False:  # the model reads no gold tree: batches need none
            return [None] * len(examples)
        index = self.parses()
        if index is None:
            return [None] * len(examples)
        found = [index.get(ex.text.strip()) if ex.text is not None else None for ex in examples]
        missing = [ex for ex, parsed in zip(examples, found) if parsed is None]
        if missing and split == "predict":
            log.info("predict: %d of %d inputs have no parse in %s, so batches carry no gold heads", len(missing),
                     len(examples), self.hparams.parses)
            return [None] * len(examples)
        if missing:
            ex = missing[0]
            raise DataFormatError(ex.source, ex.line, f"no parse of this sentence in data.parses "
                                  f"({self.hparams.parses}): {ex.text!r} ({len(missing)} of {len(examples)} "
                                  f"{split} examples have none)")
        trees: dict[tuple, list[int]] = {}  # the aspects of one sentence share its tree
        counts = ProjectionCounts()
        out = []
        for ex, parsed in zip(examples, found):
            key = (ex.text, ex.words)
            if key not in trees:
                trees[key] = example_heads_from_parsed(ex, parsed, counts)
                counts.duplicate_texts += ex.text.strip() in self._duplicates
            out.append(trees[key])
        log.info("gold trees for split %s: %s", split, counts.summary())
        return out

    # ---- encoding and batches -----------------------------------------------------------------------------
    def _encode_split(self, split: str) -> list[tuple]:
        words, chars, labels = self._vocabularies()
        encoder = TokenEncoder(words, chars, self.normalizer, self.hparams.max_word_length)
        label_index = {label: i for i, label in enumerate(labels)}
        items = []
        examples = self.examples(split)
        for ex, heads in zip(examples, self._gold_heads(split, examples)):
            word_ids, char_ids = encoder.encode(ex.words)
            label_id = UNKNOWN_LABEL
            if split != "predict":
                if ex.label not in label_index:
                    raise self._unknown_label(ex, ex.label, split, labels)
                label_id = label_index[ex.label]
            items.append((word_ids, char_ids, ex.words, ex.aspect, label_id, heads))
        encoder.log_truncation(split)
        return items

    def _collate(self, split: str):
        items = self._encode(split)
        packed = self._packed_split(split, lambda items: PackedTokens(
            [(w, c, words) for w, c, words, *_ in items],
            {"aspect": [[int(start <= t < end) for t in range(len(w))] for w, _, _, (start, end), *_ in items],
             **gold_heads_values(items)}))
        labels = torch.tensor([label for *_, label, _ in items], dtype=torch.long)
        has_tree = [heads is not None for *_, heads in items]
        singletons = self._singleton_table(split)

        def collate(indices: list[int]) -> AspectBatch:
            tokens, values = packed.batch(indices, singletons, self.hparams.pad_to_multiple_of)
            heads = padded_heads(values["heads"], tokens.mask) if all(has_tree[i] for i in indices) else None
            return AspectBatch(tokens=tokens, aspect_mask=values["aspect"].bool(),
                               labels=labels[torch.as_tensor(indices, dtype=torch.long)], index=list(indices),
                               heads=heads)

        return collate
