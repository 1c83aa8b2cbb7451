"""``LanguageModelDataModule``: sentences -> a word vocabulary -> sentence batches or contiguous BPTT windows.

Two ways to cut the text (``mode``):

* ``sentence``: each sentence is one example, read from a zero state, framed by the boundary token ``<eos>``
  (``<eos> w1 .. wn <eos>``). The forward LM predicts ``w1 .. wn <eos>`` from the positions before them; the
  backward LM (bidirectional models) predicts ``<eos> w1 .. wn`` from the positions after them. This is how
  the tree evaluation reads sentences, and the only mode for bidirectional models.
* ``stream``: the split's sentences, each followed by ``<eos>``, form one token stream, laid out as
  ``batch_size`` parallel rows (per process) and cut into windows of ``bptt`` steps, in order: row ``i`` of a
  window continues row ``i`` of the previous one, so the model carries its recurrent state across windows
  (truncated back-propagation through time, as in AWD-LSTM). The stream's tail that does not fill a row is
  left out and counted in the log.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch.utils.data import DataLoader

from onlstm_tasks.errors import DataFormatError

from ..core.base import TaskDataModule
from ..core.batching import IGNORE, DeviceBatch, TokenBatch
from ..core.checkpoint_file import read_checkpoint_file
from ..core.common import word_options
from ..core.examples import Example
from ..core.features import WordNormalizer
from .text import TEXT_FORMAT, Sentences, load_lm_sentences
from ..core.reading import read_lines
from ..core.sampler import process_world
from ..core.vocab import DEFAULT_CHAR_VOCAB, EOS, PAD, UNK, Vocabulary

log = logging.getLogger(__name__)


@dataclass
class LMBatch(DeviceBatch):
    tokens: TokenBatch  # inputs (no character ids: [B, T, 1] zeros)
    forward_targets: torch.Tensor  # [B, T] long: the word each position's forward state predicts, IGNORE if none
    backward_targets: torch.Tensor | None  # [B, T] long for the backward LM (sentence mode), else None
    index: list[int]  # sentence mode: positions of the sentences in their split; stream mode: [window number]
    carry: bool = False  # stream windows: row i continues row i of the previous batch of the same loader


def build_lm_vocabulary(sentences: Sentences, normalizer: WordNormalizer, min_freq: int = 1,
                        max_size: int | None = None) -> Vocabulary:
    """``<pad>``, ``<unk>``, ``<eos>``, then training words by frequency (ties alphabetical: ids in order of
    decreasing frequency, as the adaptive softmax needs), at least ``min_freq`` occurrences, at most ``max_size``
    entries in all (the most frequent words kept). Logs how many word types and training tokens the cap turns into
    ``<unk>``."""
    counts = Counter(normalizer(w) for words in sentences for w in words)
    counts.pop(EOS, None)
    counts.pop(PAD, None)
    literal_unk = counts.pop(UNK, 0)  # text that already reads <unk> (WikiText's unknown words)
    words = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
    if max_size is not None:
        if max_size < 4:
            raise ValueError(f"max_vocab_size must leave room for a word beside <pad>, <unk>, <eos>; got {max_size}")
        words = words[: max_size - 3]
    total = sum(counts.values()) + literal_unk
    unknown = total - sum(counts[w] for w in words)
    log.info("vocabulary: %d of %d training word types kept (min_freq=%d, max_vocab_size=%s); the other %d types, "
             "%d of %d training tokens (%.2f%%, with %d written <unk> in the text), read as <unk>", len(words),
             len(counts), min_freq, max_size, len(counts) - len(words), unknown, total, 100.0 * unknown / max(total, 1),
             literal_unk)
    return Vocabulary([EOS, *words])


class LanguageModelDataModule(TaskDataModule):
    """Language-model data from a text column (hub or local text files) or from the words of an NER source.

    Args:
        path: a hub dataset id or a local folder (``datasets.load_dataset``'s ``path``; default WikiText-103 raw
            from the hub, ``Salesforce/wikitext``). Local text files: ``path: text`` with ``data_files``.
        name: the dataset's configuration name (default ``wikitext-103-raw-v1``).
        data_dir: a folder inside the dataset (``datasets.load_dataset``'s ``data_dir``).
        data_files: raw files: a map split -> file (``{train: a.txt, validation: b.txt, test: c.txt}``).
        revision: the hub revision (branch, tag or commit) to read; ``null`` for a local folder.
        format: ``text`` (rows of ``text_column`` split at whitespace) or an NER format (``ontonotes``,
            ``conll2012``, ``columns``, ``conllx``, ``tokens``, ``auto``): the words of its sentences.
        reader_options: extra NER-reader arguments (NER formats only).
        mode: ``sentence`` or ``stream`` (see the module docstring).
        bptt: the window length (tokens) in stream mode.
        max_length: sentence mode: longer sentences are cut into pieces of at most this many words (counted).
        min_freq: training words seen fewer times than this read as ``<unk>`` (the kept and ``<unk>``-mapped
            word types and training tokens, and the ``<unk>`` rate of every split, are logged).
        max_vocab_size: at most this many vocabulary entries (the most frequent training words, with ``<pad>``,
            ``<unk>``, ``<eos>``).
        lowercase: words are lowercased before the vocabulary lookup.
        normalize_digits: every digit of a word reads as ``0`` in the vocabulary lookup.
        validation_ratio: the fraction of training sentences carved out as validation when the source has none.
        seed: the seed of that carving, of ``train_sentences``' draw and of the batch order.
        train_sentences: train on a random subset of this many training sentences (drawn with ``seed``, kept in
            corpus order; the vocabulary comes from the subset; the count is logged). Many epochs over a small
            subset can induce better trees than one pass over the whole corpus in the same time.
        vocab_from: a checkpoint whose vocabulary and word options to use (the CLI sets it for
            validate/test/predict with ``--ckpt_path``).
        predict_file: text to score with ``predict``, one sentence per line, words separated by whitespace
            (blank lines skipped and counted); each sentence is read in sentence mode whatever ``mode`` is.
        text_column: the dataset column that holds the text (``text`` format).
        batch_size: training sentences (sentence mode) or parallel rows of the stream (stream mode) per batch.
        eval_batch_size: the same for validation, test and predict.
        num_workers: data-loading processes (None: none; batches are built in the training process).
    """

    vocabularies_need = "the vocabulary needs one"

    def __init__(
        self,
        path: str = "Salesforce/wikitext",
        name: str | None = "wikitext-103-raw-v1",
        data_dir: str | None = None,
        data_files: dict[str, Any] | str | None = None,
        revision: str | None = None,
        format: str = TEXT_FORMAT,
        text_column: str = "text",
        reader_options: dict[str, Any] | None = None,
        mode: Literal["sentence", "stream"] = "sentence",
        bptt: int = 70,
        batch_size: int = 32,
        eval_batch_size: int = 64,
        max_length: int = 128,
        min_freq: int = 1,
        max_vocab_size: int | None = None,
        lowercase: bool = False,
        normalize_digits: bool = True,
        validation_ratio: float = 0.1,
        train_sentences: int | None = None,
        vocab_from: str | None = None,
        predict_file: str | None = None,
        num_workers: int | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if bptt < 1 or max_length < 1 or batch_size < 1 or eval_batch_size < 1:
            raise ValueError("bptt, max_length, batch_size and eval_batch_size must be positive")
        if train_sentences is not None and train_sentences < 1:
            raise ValueError(f"train_sentences must be positive (or null for all), got {train_sentences}")
        self.save_hyperparameters()
        self.normalizer = WordNormalizer(lowercase, normalize_digits)
        self._words: dict[str, list[list[str]]] = {}  # the framed sentences' words as given (sentence batches)

    def __str__(self) -> str:
        # LightningDataModule's own __str__ builds every dataloader to describe them, and jsonargparse formats the
        # data module into a debug message when a CLI link finds no attribute (``labels``: the NER and sentiment
        # models take it, a language model does not): that built the training loader, reading the whole dataset
        # (minutes of timeouts when the default hub dataset is unreachable) on every ``predict``
        h = self.hparams
        return f"{type(self).__name__}(path={h.path!r}, format={h.format!r}, mode={h.mode!r})"

    # ---- data facts, linked to the model by the CLI -----------------------------------------------------
    @property
    def word_vocab(self) -> list[str]:
        return self.vocabulary().itos

    @property
    def char_vocab(self) -> list[str]:
        return list(DEFAULT_CHAR_VOCAB)

    # ---- loading ------------------------------------------------------------------------------------------
    def _read_splits(self) -> dict[str, Sentences]:
        h = self.hparams
        return load_lm_sentences(h.path, h.format, name=h.name, data_dir=h.data_dir, data_files=h.data_files,
                                 revision=h.revision, text_column=h.text_column, reader_options=h.reader_options)

    def _prepare_split(self, split: str, items: Sentences) -> Sentences:
        n = self.hparams.train_sentences
        if split != "train" or n is None:
            return items
        if n >= len(items):
            log.info("train_sentences=%d: the training split has only %d sentences; all are used", n, len(items))
            return items
        generator = torch.Generator().manual_seed(self.hparams.seed)
        chosen = sorted(torch.randperm(len(items), generator=generator)[:n].tolist())
        log.info("train_sentences=%d: a random subset of %d of the %d training sentences (seed %d)", n, n,
                 len(items), self.hparams.seed)
        return [items[i] for i in chosen]

    def examples(self, split: str) -> list[Example]:
        """The lines of ``predict_file`` (``split="predict"``, the only split kept as examples: the prediction
        writer reads their text), one sentence each; a blank line is an example without words (its record says
        ``"empty": true``), so output record N is input line N."""
        if split != "predict":
            raise ValueError(f"only the predict split is kept as examples, not {split!r}")
        return super().examples(split)

    def _read_predict_file(self, path: str) -> list[Example]:
        lines = read_lines(path, "one sentence per line")
        examples = [Example(words=tuple(line.split()), text=line, source=path, line=number)
                    for number, line in enumerate(lines, start=1)]
        if not any(len(ex) for ex in examples):
            raise DataFormatError(path, None, "expected at least one non-blank line")
        return examples

    def vocabulary(self) -> Vocabulary:
        return self._vocabularies()

    def _build_vocabularies(self, train: Sentences) -> Vocabulary:
        vocab = build_lm_vocabulary(train, self.normalizer, self.hparams.min_freq, self.hparams.max_vocab_size)
        log.info("vocabulary from %d training sentences: %d words (with <pad>, <unk>, <eos>)", len(train), len(vocab))
        return vocab

    def _vocabularies_from_checkpoint(self, path: str) -> Vocabulary:
        checkpoint = read_checkpoint_file(path)
        words = (checkpoint.get("hyper_parameters") or {}).get("word_vocab")
        if not words:
            raise ValueError(f"{path}: checkpoint hyper-parameters lack word_vocab; not a LanguageModel checkpoint?")
        options = word_options(checkpoint.get("datamodule_hyper_parameters"))
        if options is not None:
            self.normalizer, _ = options
            self.hparams.lowercase = self.normalizer.lowercase
            self.hparams.normalize_digits = self.normalizer.normalize_digits
        return Vocabulary(words[2:])

    # ---- encoding -----------------------------------------------------------------------------------------
    def _encode_split(self, split: str) -> list[list[int]]:
        """Word ids of every sentence (sentence mode: framed by <eos> and cut at max_length words)."""
        vocab, normalize = self.vocabulary(), self.normalizer
        if split == "predict":
            sentences = [list(ex.words) for ex in self.examples("predict")]
        else:
            sentences = self._split(split)
        if not sentences:
            raise ValueError(f"the {split!r} split has no sentences")
        ids = [[vocab.index(normalize(w)) for w in words] for words in sentences]
        tokens = sum(len(s) for s in ids)
        unknown = sum(i == 1 for s in ids for i in s)
        log.info("%s: %d sentences, %d words, %d <unk> (%.2f%%)", split, len(ids), tokens, unknown,
                 100.0 * unknown / max(tokens, 1))
        if split == "train" and unknown == 0 and not self.hparams.vocab_from:
            log.warning("train: no word reads as <unk> (min_freq=%d keeps every training word), so the model "
                        "never learns to predict <unk> and each <unk> of another split costs a great deal of "
                        "perplexity; min_freq: 2 turns the words seen once into <unk>", self.hparams.min_freq)
        eos = vocab.index(EOS)
        if self.hparams.mode == "stream" and split != "predict":
            return [[*s, eos] for s in ids]
        if split == "predict":  # each line whole, framed; a blank line an empty item (never batched)
            self._words[split] = [[EOS, *s, EOS] if s else [] for s in sentences]
            return [[eos, *s, eos] if s else [] for s in ids]
        # framed sentences (pieces of at most max_length words)
        limit = self.hparams.max_length
        long = sum(len(s) > limit for s in ids)
        if long:
            log.info("%s: %d sentence(s) longer than max_length=%d words were cut into pieces", split, long, limit)
        cuts = [(n, i) for n, s in enumerate(ids) for i in range(0, len(s), limit)]
        self._words[split] = [[EOS, *sentences[n][i:i + limit], EOS] for n, i in cuts]  # as given
        return [[eos, *ids[n][i:i + limit], eos] for n, i in cuts]

    # ---- loaders ------------------------------------------------------------------------------------------
    def _loader(self, split: str, train: bool) -> DataLoader:
        if self.hparams.mode == "stream" and split != "predict":
            size = self.hparams.batch_size if train else self.hparams.eval_batch_size
            windows = stream_windows(self._encode(split), size, self.hparams.bptt, *process_world(), where=split)
            return DataLoader(windows, batch_size=None, collate_fn=self._window_batch, shuffle=False)
        return super()._loader(split, train)

    def _item_length(self, item: list[int]) -> int:
        return len(item)

    def _collate(self, split: str):
        items, words = self._encode(split), self._words[split]

        def collate(indices: list[int]) -> LMBatch:
            rows = [items[i] for i in indices]
            steps = max(len(r) for r in rows)
            ids = torch.zeros(len(rows), steps, dtype=torch.long)
            for b, r in enumerate(rows):
                ids[b, : len(r)] = torch.tensor(r)
            mask = ids != 0
            lengths = mask.sum(1, keepdim=True)
            t = torch.arange(steps)[None, :]
            forward = torch.full_like(ids, IGNORE)
            forward[:, :-1] = ids[:, 1:]
            forward[t >= lengths - 1] = IGNORE
            backward = torch.full_like(ids, IGNORE)
            backward[:, 1:] = ids[:, :-1]
            backward[(t == 0) | (t >= lengths)] = IGNORE
            return LMBatch(_tokens(ids, mask, [words[i] for i in indices]), forward, backward, list(indices))

        return collate

    def _window_batch(self, window: tuple[int, torch.Tensor, torch.Tensor]) -> LMBatch:
        number, inputs, targets = window
        itos = self.vocabulary().itos  # the stream keeps no raw words: the vocabulary's spelling
        words = [[itos[i] for i in row] for row in inputs.tolist()]
        return LMBatch(_tokens(inputs, torch.ones_like(inputs, dtype=torch.bool), words), targets, None, [number],
                       carry=True)


def _tokens(ids: torch.Tensor, mask: torch.Tensor, words: list[list[str]]) -> TokenBatch:
    return TokenBatch(word_ids=ids, char_ids=torch.zeros(*ids.shape, 1, dtype=torch.long), mask=mask, words=words)



def stream_windows(sentences: list[list[int]], rows: int, bptt: int, world: int = 1, rank: int = 0,
                   where: str = "stream") -> list[tuple[int, torch.Tensor, torch.Tensor]]:
    """This process's ``(number, inputs [rows, T], targets [rows, T])`` windows of the concatenated stream.

    The stream is laid out as ``rows * world`` parallel rows of equal length (process ``rank`` takes rows
    ``rank * rows .. (rank + 1) * rows - 1``), then cut into windows of ``bptt`` steps (the last may be shorter);
    targets are the inputs shifted by one token. Every process gets the same number of windows.
    """
    stream = torch.tensor([i for s in sentences for i in s], dtype=torch.long)
    total_rows = rows * world
    length = stream.numel() // total_rows
    if length < 2:
        raise ValueError(f"{where}: {stream.numel()} tokens cannot fill {total_rows} stream rows of at least 2 "
                         f"tokens; lower the batch size")
    dropped = stream.numel() - length * total_rows
    if dropped:
        log.info("%s: %d token(s) at the end of the stream fill no whole row of %d and are left out", where, dropped,
                 length)
    grid = stream[: length * total_rows].view(total_rows, length)[rank * rows:(rank + 1) * rows]
    windows = []
    for number, start in enumerate(range(0, length - 1, bptt)):
        end = min(start + bptt, length - 1)
        windows.append((number, grid[:, start:end], grid[:, start + 1:end + 1]))
    return windows
