"""Vocabulary coverage of a NER corpus' dev and test words, with the training vocabulary alone and with the words of
a vectors file added (``data.vectors``), as the data module itself looks words up (normalisation, lowercase
fallback). Prints a Markdown table.

    python scripts/vocab_coverage.py --data ../shared/data/conll2012_ontonotesv5 \\
        --vectors /work/vectors/unlabelled_en.w2v.100d.txt [--max-words 100000] [--format ontonotes]

Per split and vocabulary: the share of tokens (and of distinct normalised words) that get a row of their own
(not ``<unk>``), and the share whose row starts from a vector of the file (the embedder's ``pretrained`` lookup:
exact word, then lowercased).
"""

from __future__ import annotations

import argparse
import logging

import torch

from onlstm_tasks.data.ner.module import NERDataModule
from onlstm_tasks.data.core.vector_file import iter_vector_lines
from onlstm_tasks.embedders.pretrained import copy_pretrained_rows


def file_dim(path: str) -> int:
    _, _, values = next(iter_vector_lines(path, None))
    return len(values)


def coverage(data: NERDataModule, split: str, with_vector: set[int]) -> dict[str, float]:
    tokens = known_tokens = vector_tokens = 0
    seen: dict[str, tuple[bool, bool]] = {}
    for word_ids, _, words, *_ in data._encode(split):
        for i, w in zip(word_ids, words):
            tokens += 1
            known_tokens += i != 1
            vector_tokens += i in with_vector
            seen.setdefault(data.normalizer(w), (i != 1, i in with_vector))
    types = len(seen)
    return {"tokens": tokens, "known": known_tokens / tokens, "vector": vector_tokens / tokens, "types": types,
            "known_types": sum(k for k, _ in seen.values()) / types,
            "vector_types": sum(v for _, v in seen.values()) / types}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--vectors", required=True)
    ap.add_argument("--max-words", type=int, default=100_000)
    ap.add_argument("--format", default="ontonotes")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    dim = file_dim(args.vectors)
    print("| vocabulary | split | tokens | tokens with a row | tokens with a vector | word types | types with a row "
          "| types with a vector |\n|---|---|---:|---:|---:|---:|---:|---:|")
    for name, extra in (("training words", {}),
                        (f"training words + vectors file (vectors_max_words={args.max_words:,})",
                         {"vectors": args.vectors, "vectors_max_words": args.max_words})):
        data = NERDataModule(path=args.data, revision=None, format=args.format, **extra)
        vocab = data.word_vocab
        with_vector = set(copy_pretrained_rows(torch.zeros(len(vocab), dim), vocab, args.vectors))
        for split in ("validation", "test"):
            c = coverage(data, split, with_vector)
            print(f"| {name} ({len(vocab):,} rows) | {split} | {c['tokens']:,} | {100 * c['known']:.1f}% | "
                  f"{100 * c['vector']:.1f}% | {c['types']:,} | {100 * c['known_types']:.1f}% | "
                  f"{100 * c['vector_types']:.1f}% |")


if __name__ == "__main__":
    main()
