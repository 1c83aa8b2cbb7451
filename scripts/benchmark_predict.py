"""Throughput and peak memory of the Python API's NER tagger (``tagger(...)``, issue 20): an ON-LSTM-CRF and an
LSTM-CRF of the sizes of ``configs/ner/ontonotes_{onlstm,lstm}_crf.yaml`` (untrained weights: speed only) tag the
same sentences at batch sizes 1, 32 and 256, with ``torch.inference_mode()``; the data module's evaluation loader
sorts the sentences by length (length buckets, little padding).

    python scripts/benchmark_predict.py [--sentences 1024] [--data ../shared/data/conll2012_ontonotesv5]

Each (model, batch size) runs in a fresh process so its peak memory is its own: ``peak MB`` is the process's maximum
resident set size (Python, torch and the model included: compare the rows, not the absolute values) or, on a GPU,
``torch.cuda.max_memory_allocated``. Prints sentences/s per row and the ON-LSTM/LSTM ratios per batch size.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import sys
import time
from pathlib import Path

EMBEDDER = {"class_path": "onlstm_tasks.embedders.word_char.WordCharEmbedder",
            "init_args": {"word_dim": 100, "char_encoder": "cnn", "char_dim": 30, "char_features": 50, "dropout": 0.5}}
ENCODERS = {  # configs/ner/ontonotes_onlstm_crf.yaml and ontonotes_lstm_crf.yaml
    "ONLSTM-CRF": {"class_path": "onlstm_tasks.encoders.ONLSTM",
                   "init_args": {"hidden_size": 256, "chunk_size": 8, "bidirectional": True, "dropconnect": 0.2}},
    "LSTM-CRF": {"class_path": "onlstm_tasks.encoders.LSTM",
                 "init_args": {"hidden_size": 256, "bidirectional": True, "dropconnect": 0.2}},
}
BATCH_SIZES = (1, 32, 256)


def read_validation(data: str, count: int) -> tuple[list[list[str]], list[str]]:
    """The first ``count`` validation sentences and the IOB2 tag set of the whole validation split."""
    from onlstm_tasks.data.ner.module import scheme_labels
    from onlstm_tasks.data.ner.readers import load_ner_splits

    examples = load_ner_splits(data, data_dir="english_v12", format="ontonotes")["validation"]
    types = {tag[2:] for ex in examples for tag in ex.tags if tag != "O"}
    return [list(ex.words) for ex in examples[:count]], scheme_labels(types, "iob2")


def run(name: str, batch_size: int, sentences: list[list[str]], labels: list[str], device: str, queue) -> None:
    import torch

    from onlstm_tasks.api import Tagger
    from onlstm_tasks.data.core.examples import Example
    from onlstm_tasks.data.core.features import WordNormalizer, build_vocabularies
    from onlstm_tasks.tasks.hub import build_task_model
    from onlstm_tasks.tasks.ner import NERTagger

    torch.manual_seed(0)
    words, chars = build_vocabularies([Example(words=tuple(s)) for s in sentences], WordNormalizer())
    model = build_task_model(NERTagger, {"embedder": EMBEDDER, "encoder": ENCODERS[name]},
                             {"word_vocab": words.itos, "char_vocab": chars.itos, "labels": labels})
    tagger = Tagger(model.to(device), {"lowercase": False, "normalize_digits": True, "max_word_length": 30})
    tagger(sentences[:batch_size], batch_size=batch_size, pretokenized=True, progress=False)  # warm-up
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    records = tagger(sentences, batch_size=batch_size, pretokenized=True, progress=False)
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = (torch.cuda.max_memory_allocated() / 2**20 if device == "cuda"
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    queue.put({"model": name, "batch_size": batch_size, "sentences": len(records),
               "sentences_per_s": len(records) / seconds, "peak_mb": peak})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data" /
                                              "conll2012_ontonotesv5"))
    parser.add_argument("--sentences", type=int, default=1024)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch threads in each run (0: torch's default)")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    if not Path(args.data).exists():
        sys.exit(f"{args.data}: no such folder (the hub parquet layout of conll2012_ontonotesv5); pass --data")
    sentences, labels = read_validation(args.data, args.sentences)
    tokens = sum(map(len, sentences))
    print(f"{len(sentences)} validation sentences ({tokens} tokens, mean length {tokens / len(sentences):.1f}), "
          f"{len(labels)} tags, device {args.device}")
    context = multiprocessing.get_context("spawn")
    rows = []
    for batch_size in BATCH_SIZES:
        for name in ENCODERS:
            queue = context.Queue()
            process = context.Process(target=_child, args=(args.threads, name, batch_size, sentences, labels,
                                                          args.device, queue))
            process.start()
            row = queue.get()
            process.join()
            rows.append(row)
            print(f"{name:>11}  batch {batch_size:>3}: {row['sentences_per_s']:8.1f} sentences/s   "
                  f"peak {row['peak_mb']:7.1f} MB", flush=True)
    print("\nON-LSTM-CRF / LSTM-CRF throughput:")
    for batch_size in BATCH_SIZES:
        on, lstm = (next(r for r in rows if r["model"] == m and r["batch_size"] == batch_size) for m in ENCODERS)
        print(f"  batch {batch_size:>3}: {on['sentences_per_s'] / lstm['sentences_per_s']:.2f}x   "
              f"(peak memory {on['peak_mb'] / lstm['peak_mb']:.2f}x)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


def _child(threads: int, *args) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)
    run(*args)


if __name__ == "__main__":
    main()
