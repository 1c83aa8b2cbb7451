"""``NERDataModule``: any supported NER source -> vocabularies -> length-bucketed padded batches."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any, Literal

import torch

from onlstm_tasks.errors import DataFormatError
from onlstm_tasks.trees.heads import slice_heads

from ..core.base import adopt_checkpoint_data
from ..core.batching import DeviceBatch, TokenBatch
from ..core.checks import check_tokens, drop_empty_sentences, warn_cut_types
from ..core.examples import Example
from ..core.features import TokenEncoder, build_vocabularies
from ..core.packed import PackedTokens, gold_heads_values, padded_heads
from ..core.gold_trees import example_heads, has_gold_tree
from ..core.labelled import LabelledDataModule
from .readers import load_ner_splits
from ..core.reading import read_lines, split_fields
from ..core.tags import convert_scheme, split_tag
from ..core.tokenize import tokenize
from ..core.vocab import Vocabulary

log = logging.getLogger(__name__)


@dataclass
class NERBatch(DeviceBatch):
    tokens: TokenBatch
    tags: torch.Tensor  # [B, T] long tag ids, 0 at padding (use tokens.mask)
    index: list[int]  # positions of the batch's examples in their split
    heads: torch.Tensor | None = None  # [B, T] long gold heads, 0-based, root and padding -> themselves; None when
    #                                    no sentence of the split has a gold tree (CoNLL-X/U heads or a parse tree)


def scheme_labels(types: set[str], scheme: str) -> list[str]:
    """Every tag of ``scheme`` for the given entity types, ``O`` first, then by type."""
    prefixes = {"iob2": "BI", "iobes": "BIES"}[scheme]
    return ["O"] + [f"{p}-{t}" for t in sorted(types) for p in prefixes]


def split_long(example: Example, max_length: int, heads: bool = True) -> list[Example]:
    """Cuts a sentence into pieces of at most ``max_length`` tokens, preferably outside entities.

    A piece that starts inside an entity gets ``B-`` on its first token. Gold heads (the heads column, else the
    heads of the parse tree: :func:`gold_heads`) are cut to the piece (a token whose head lies outside it attaches
    to its nearest ancestor inside, or becomes a root: :func:`~onlstm_tasks.trees.heads.slice_heads`): now with
    ``heads``, else only when :func:`gold_heads` asks for a piece's tree (so data read for a model that reads no
    tree never checks it). Dependency labels, parse trees and offsets refer to the whole sentence, so pieces drop
    them; each piece keeps where it was cut from (``meta["cut_from"]``: the sentence, start, end).
    """
    tree = gold_heads(example) if heads else None
    pieces, start, n = [], 0, len(example)
    while start < n:
        end = min(start + max_length, n)
        if end < n and example.tags is not None:
            cut = end
            while cut > start + 1 and example.tags[cut].startswith("I-"):
                cut -= 1
            end = end if example.tags[cut].startswith("I-") else cut  # inside an entity only if unavoidable
        tags = None
        if example.tags is not None:
            tags = list(example.tags[start:end])
            if tags[0].startswith("I-"):
                tags[0] = "B-" + tags[0][2:]
        pieces.append(dataclasses.replace(
            example, words=example.words[start:end], tags=None if tags is None else tuple(tags),
            pos=None if example.pos is None else example.pos[start:end], deprels=None,
            heads=None if tree is None else tuple(slice_heads(tree, start, end)),
            parse_tree=None, offsets=None, sentence_id=f"{example.sentence_id or example.line}[{start}:{end}]",
            meta={**example.meta, "cut_from": (example, start, end)},
            token_lines=None if example.token_lines is None else example.token_lines[start:end],
        ))
        start = end
    return pieces


def gold_heads(example: Example) -> list[int] | None:
    """An example's gold tree: its heads column, else the heads of its parse tree (Collins head rules), else for
    a piece of a long sentence (:func:`split_long`) the whole sentence's tree cut to the piece; None with none
    (:func:`~onlstm_tasks.data.core.gold_trees.example_heads`: checked to be a forest, since sentence pieces may have
    several roots; a parse tree that does not fit the words is an error naming the sentence)."""
    cut = example.meta.get("cut_from") if example.heads is None else None
    if cut is not None:
        whole, start, end = cut
        tree = gold_heads(whole)
        return None if tree is None else slice_heads(tree, start, end)
    return example_heads(example) if has_gold_tree(example) else None


def split_trees(examples: list[Example]) -> tuple[list[list[int]] | None, int]:
    """Gold heads for every example of a split (:func:`gold_heads`), or None when none has a tree. When only some
    have one, each word of the others is its own root (no arcs, as with no tree); their number is returned."""
    trees = [gold_heads(ex) for ex in examples]
    missing = sum(t is None for t in trees)
    if missing == len(trees):
        return None, 0
    return [[0] * len(ex) if t is None else t for ex, t in zip(examples, trees)], missing


def prediction_example(line: str, pretokenized: bool, source: str = "", number: int = 0) -> Example:
    """One input sentence: raw text (tokenised as in training, with character offsets) or, ``pretokenized``,
    tokens separated by spaces/tabs (their offsets in the line). An empty line gives an example without words: it
    is not run through the model, and its record says ``"empty": true`` (one record per input line)."""
    if pretokenized:
        words, offsets, pos = (split_fields(line) if line.strip(" \t") else []), [], 0
        for w in words:
            start = line.index(w, pos)
            offsets.append((start, start + len(w)))
            pos = start + len(w)
    else:
        words, offsets = tokenize(line)
    return Example(words=tuple(words), text=line, offsets=tuple(offsets), source=source, line=number)


def read_prediction_file(path: str, pretokenized: bool) -> list[Example]:
    """One sentence per line: raw text (tokenised here, with character offsets) or space-separated tokens. Every
    line is an example, an empty one too (its record says ``"empty": true``), so output record N is input line N."""
    # as the column readers: UTF-8 with an optional BOM, only \n ends a line, tokens split at spaces/tabs only
    lines = read_lines(path, "one sentence per line")
    examples = [prediction_example(line, pretokenized, path, number) for number, line in enumerate(lines, start=1)]
    if not any(len(ex) for ex in examples):
        raise DataFormatError(path, None, "expected at least one non-empty line (one sentence per line)")
    return examples


class NERDataModule(LabelledDataModule):
    """NER data from the hub, a local dataset folder, or raw files; arguments mirror ``datasets.load_dataset``.

    Args:
        path: a hub dataset id or a local folder (``datasets.load_dataset``'s ``path``).
        data_dir: a folder inside the dataset (``datasets.load_dataset``'s ``data_dir``).
        revision: the hub revision (branch, tag or commit) to read; ``null`` for a local folder.
        format: reader: ``auto``, ``ontonotes``, ``conll2012``, ``columns``, ``conllx`` or ``tokens``.
        reader_options: extra reader arguments (e.g. ``{include_pt: true}``, ``{tokens_column: words}``).
        tag_scheme: ``iob2`` or ``iobes`` for training (metrics are always reported in IOB2).
        max_length: the longest sentence (in tokens) a batch holds.
        long_sentences: a longer sentence is ``split`` into pieces (default) or refused (``reject``) with an
            error naming it; never truncated.
        empty_sentences: sentences without a token are ``skip``-ped (default; counted in a warning naming the
            first) or refused (``error``, naming the file and sentence). A token that is the empty string is
            always an error.
        gold_trees: whether batches carry gold trees (heads columns or parse trees, checked at setup). Default
            (None): when the model reads them (a ``tree_source`` of kind ``gold``); without a Trainer, whenever
            the data has them. Models that read no gold tree never see (nor fail on) the data's trees.
        predict_file: text file to tag, one sentence per line.
        pretokenized: the predict file's lines are space-separated tokens (else raw text, tokenised as in
            training).
        options: the arguments every labelled task shares (:class:`~onlstm_tasks.data.core.labelled.LabelledDataModule`:
            ``batch_size``, ``min_freq``, ``vocab_from``, ``vectors``, ...).
    """

    def __init__(
        self,
        path: str = "ontonotes/conll2012_ontonotesv5",
        data_dir: str | None = "english_v12",
        revision: str | None = "refs/convert/parquet",
        tag_scheme: Literal["iob2", "iobes"] = "iob2",
        max_length: int = 128,
        long_sentences: Literal["split", "reject"] = "split",
        empty_sentences: Literal["skip", "error"] = "skip",
        gold_trees: bool | None = None,
        pretokenized: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(**options)

    # ---- data facts, linked to the model by the CLI (word_vocab, char_vocab: TaskDataModule) -------------
    @property
    def labels(self) -> list[str]:
        return self._vocabularies()[2]

    @property
    def tag_scheme(self) -> str:
        return self.hparams.tag_scheme

    # ---- loading ------------------------------------------------------------------------------------------
    def _read_splits(self) -> dict[str, list[Example]]:
        return load_ner_splits(self.hparams.path, **self.source_options())

    def _prepare_split(self, split: str, examples: list[Example]) -> list[Example]:
        examples = drop_empty_sentences(split, examples, self.hparams.empty_sentences, log)
        check_tokens(examples)
        limit, out, long = self.hparams.max_length, [], 0
        for ex in examples:
            if len(ex) <= limit:
                out.append(ex)
                continue
            long += 1
            if self.hparams.long_sentences == "reject":
                raise DataFormatError(ex.source, ex.line, f"sentence of {len(ex)} tokens exceeds max_length="
                                      f"{limit} (long_sentences='reject')")
            out.extend(split_long(ex, limit, heads=False))  # their trees are cut when asked for
        if long:
            log.info("%s: %d sentences longer than max_length=%d were split into pieces", split, long, limit)
        return out

    def _read_predict_file(self, path: str) -> list[Example]:
        return read_prediction_file(path, self.hparams.pretokenized)

    def _vocabularies_from_checkpoint(self, path: str) -> tuple[Vocabulary, Vocabulary, list[str]]:
        vocab = adopt_checkpoint_data(self, path, "an NERTagger")
        # gold tags must be encoded in the scheme the checkpoint's labels were trained in
        scheme = "iobes" if any(label[:2] in ("E-", "S-") for label in vocab[2]) else "iob2"
        if scheme != self.hparams.tag_scheme:
            log.info("tag_scheme=%s from the labels of %s (not %s)", scheme, path, self.hparams.tag_scheme)
            self.hparams.tag_scheme = scheme
        return vocab

    def _build_vocabularies(self, train: list[Example]) -> tuple[Vocabulary, Vocabulary, list[str]]:
        words, chars = build_vocabularies(train, self.normalizer, self.hparams.min_freq)
        words = self._with_vectors(words)
        types = {split_tag(t)[1] for ex in train for t in ex.tags if t != "O"}
        warn_cut_types(train, log)
        labels = scheme_labels(types, self.hparams.tag_scheme)
        log.info("vocabularies from %d training sentences: %d words, %d characters, %d tags", len(train),
                 len(words), len(chars), len(labels))
        return words, chars, labels

    # ---- encoding and batches -----------------------------------------------------------------------------
    def _encode_split(self, split: str) -> list[tuple]:
        words, chars, labels = self._vocabularies()
        encoder = TokenEncoder(words, chars, self.normalizer, self.hparams.max_word_length)
        label_index = {label: i for i, label in enumerate(labels)}
        examples = self.examples(split)
        trees, missing = (None, 0) if self._reads_gold_trees(self.hparams.gold_trees) is False else \
            split_trees(examples)
        if missing:
            log.info("%s: %d of %d sentences have no gold tree (no heads column, no parse tree): with "
                     "tree_source 'gold' each of their words is its own root (no arcs)", split, missing,
                     len(examples))
        items = []
        for i, ex in enumerate(examples):
            word_ids, char_ids = encoder.encode(ex.words)
            tag_ids = [0] * len(ex)
            if ex.tags is not None and split != "predict":
                tags = convert_scheme(ex.tags, self.hparams.tag_scheme)
                unknown = [k for k, t in enumerate(tags) if t not in label_index]
                if unknown:
                    raise self._unknown_label(ex, tags[unknown[0]], split, labels, token=unknown[0])
                tag_ids = [label_index[t] for t in tags]
            items.append((word_ids, char_ids, ex.words, tag_ids, None if trees is None else trees[i]))
        encoder.log_truncation(split)
        return items

    def _collate(self, split: str):
        items = self._encode(split)
        packed = self._packed_split(split, lambda items: PackedTokens(
            [(w, c, words) for w, c, words, _, _ in items],
            {"tags": [tags for *_, tags, _ in items],
             **gold_heads_values(items)}))
        has_tree = [heads is not None for *_, heads in items]
        singletons = self._singleton_table(split)

        def collate(indices: list[int]) -> NERBatch:
            tokens, values = packed.batch(indices, singletons, self.hparams.pad_to_multiple_of)
            heads = padded_heads(values["heads"], tokens.mask) if all(has_tree[i] for i in indices) else None
            return NERBatch(tokens=tokens, tags=values["tags"], index=list(indices), heads=heads)

        return collate
