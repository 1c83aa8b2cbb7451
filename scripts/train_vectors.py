"""Train word vectors on a text corpus with gensim and write them in the text format the embedder reads.

The corpus is plain UTF-8 text, one tokenised sentence per line, tokens separated by spaces (for example
``../shared/data/unlabelled_en/train.txt``, 5.3M tokens). Every token is normalised exactly as the data modules
normalise words before looking them up (``onlstm_tasks.data.core.features.WordNormalizer``: digits -> ``0`` by
default, ``--lowercase`` to lowercase), so the words of the vectors file are the words the embedder looks up.
Keep the two settings equal to the data module's ``lowercase`` / ``normalize_digits``.

Output: the word2vec text format (a ``count dim`` header line, then ``word v1 ... vD`` per line; ``--no-header``
gives the GloVe layout without the header; both are read by ``onlstm_tasks.embedders.pretrained``), most frequent
word first, values written with 9 significant digits (float32 round-trips exactly). A ``.gz`` output name is
gzip-compressed.

Usage::

    pip install -e ".[vectors]"          # gensim
    python scripts/train_vectors.py ../shared/data/unlabelled_en/train.txt vectors/unlabelled_en.w2v.100d.txt \\
        --model word2vec --sg --dim 100 --window 5 --min-count 3 --epochs 5 --workers 2 --seed 13
    python scripts/train_vectors.py corpus.txt vectors.ft.txt --model fasttext --dim 100 --max-words 200000

then, in a config: ``model.init_args.embedder.init_args.pretrained: vectors/unlabelled_en.w2v.100d.txt``
with ``word_dim`` equal to ``--dim``, and the same file as ``data.init_args.vectors`` so words that training never
saw keep their vectors (``configs/ner/ontonotes_*_crf_vectors.yaml``).

With ``--workers 1`` the same corpus, options and seed give the same file; with more workers gensim's threads
make the result vary slightly from run to run (a known property of gensim's training, not of this script).
``--model fasttext`` trains subword (character n-gram) vectors, but the text format keeps only the vectors of
the corpus vocabulary: words outside it get nothing from the n-grams once written.
"""

from __future__ import annotations

import argparse
import gzip
import logging
import os
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

from onlstm_tasks.data.core.features import WordNormalizer

log = logging.getLogger("train_vectors")

MISSING_GENSIM = "train_vectors.py needs gensim: pip install 'gensim>=4.3' (or: pip install -e '.[vectors]')"


class Corpus:
    """Re-iterable sentences of a one-sentence-per-line file (gensim reads it once per epoch plus once for the
    vocabulary). Lines are split at ``\\n`` only (a trailing ``\\r`` is dropped) and decoded strictly as UTF-8;
    tokens are split at spaces, empty tokens skipped, and each token normalised."""

    def __init__(self, path: str | Path, normalizer: WordNormalizer) -> None:
        self.path = Path(path)
        self.normalizer = normalizer

    def __iter__(self) -> Iterator[list[str]]:
        norm = self.normalizer
        with open(self.path, "rb") as f:
            for lineno, raw in enumerate(f, start=1):
                try:
                    line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
                except UnicodeDecodeError as err:
                    raise ValueError(f"{self.path}:{lineno}: expected UTF-8 text ({err})") from None
                words = [norm(w) for w in line.rstrip("\r\n").split(" ") if w]
                if words:
                    yield words


def stable_hash(text: str) -> int:
    """A hash that does not change between processes (Python's ``hash`` of a string does), for gensim's
    ``hashfxn`` so that ``--seed`` alone fixes the initial vectors."""
    return zlib.crc32(text.encode("utf-8"))


def train(corpus: Corpus, args: argparse.Namespace):
    """The trained gensim model's ``KeyedVectors``."""
    try:
        from gensim.models import FastText, Word2Vec
    except ImportError:
        raise SystemExit(MISSING_GENSIM) from None
    common = dict(vector_size=args.dim, window=args.window, min_count=args.min_count, sg=1 if args.sg else 0,
                  negative=args.negative, sample=args.sample, epochs=args.epochs, workers=args.workers,
                  seed=args.seed, hashfxn=stable_hash, sorted_vocab=1)
    if args.model == "word2vec":
        model = Word2Vec(sentences=corpus, **common)
    else:
        model = FastText(sentences=corpus, min_n=args.min_n, max_n=args.max_n, **common)
    return model.wv


def write_vectors(wv, path: str | Path, max_words: int | None = None, header: bool = True) -> int:
    """Writes ``wv`` most frequent word first (ties: gensim's order) as text; returns the number of words."""
    words = list(wv.index_to_key)
    # gensim keeps index_to_key sorted by descending count (sorted_vocab=1); sort again, stably, to be sure
    words.sort(key=lambda w: -wv.get_vecattr(w, "count"))
    if max_words is not None:
        words = words[:max_words]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(tmp, "wt", encoding="utf-8", newline="\n") as f:
        if header:
            f.write(f"{len(words)} {wv.vector_size}\n")
        for w in words:
            f.write(w + " " + " ".join("%.9g" % v for v in wv[w].tolist()) + "\n")
    os.replace(tmp, path)
    return len(words)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("corpus", help="text file: one tokenised sentence per line, tokens split by spaces")
    p.add_argument("output", help="vectors file to write (text; .gz to compress)")
    p.add_argument("--model", choices=("word2vec", "fasttext"), default="word2vec",
                   help="word2vec, or fasttext (subword n-grams during training)")
    arch = p.add_mutually_exclusive_group()
    arch.add_argument("--sg", dest="sg", action="store_true", default=True, help="skip-gram (default)")
    arch.add_argument("--cbow", dest="sg", action="store_false", help="CBOW instead of skip-gram")
    p.add_argument("--dim", type=int, default=100, help="vector size (the embedder's word_dim); default 100")
    p.add_argument("--window", type=int, default=5, help="context window; default 5")
    p.add_argument("--min-count", type=int, default=3, help="ignore words rarer than this; default 3")
    p.add_argument("--epochs", type=int, default=5, help="passes over the corpus; default 5")
    p.add_argument("--negative", type=int, default=5, help="negative samples; default 5")
    p.add_argument("--sample", type=float, default=1e-3, help="down-sampling of frequent words; default 1e-3")
    p.add_argument("--min-n", type=int, default=3, help="fasttext: shortest character n-gram; default 3")
    p.add_argument("--max-n", type=int, default=6, help="fasttext: longest character n-gram; default 6")
    p.add_argument("--workers", type=int, default=2, help="training threads; default 2 (1 = reproducible)")
    p.add_argument("--seed", type=int, default=13, help="random seed; default 13")
    p.add_argument("--lowercase", action="store_true",
                   help="lowercase words (as the data module's lowercase: true); default: keep case")
    p.add_argument("--no-normalize-digits", dest="normalize_digits", action="store_false",
                   help="keep digits (the data module's normalize_digits: false); default: every digit -> 0")
    p.add_argument("--max-words", type=int, default=None,
                   help="write at most this many words, the most frequent (training still uses all of them)")
    p.add_argument("--no-header", dest="header", action="store_false",
                   help="GloVe layout: no 'count dim' header line")
    p.add_argument("--verbose", action="store_true", help="show gensim's progress lines")
    args = p.parse_args(argv)
    for name in ("dim", "window", "min_count", "epochs", "workers"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.max_words is not None and args.max_words < 1:
        p.error("--max-words must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("gensim").setLevel(logging.INFO if args.verbose else logging.WARNING)
    try:
        import gensim  # noqa: F401
    except ImportError:
        sys.stderr.write(MISSING_GENSIM + "\n")
        return 2
    if not Path(args.corpus).is_file():
        sys.stderr.write(f"{args.corpus}: corpus file not found\n")
        return 2
    corpus = Corpus(args.corpus, WordNormalizer(lowercase=args.lowercase, normalize_digits=args.normalize_digits))
    start = time.perf_counter()
    wv = train(corpus, args)
    trained = time.perf_counter() - start
    n = write_vectors(wv, args.output, args.max_words, args.header)
    log.info("%s (%s, dim %d): %d words with count >= %d, %d written to %s; trained in %.1f s, total %.1f s",
             args.model, "skip-gram" if args.sg else "CBOW", args.dim, len(wv.index_to_key), args.min_count, n,
             args.output, trained, time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
