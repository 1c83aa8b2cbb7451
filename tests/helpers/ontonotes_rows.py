"""Toy rows in the Hugging Face OntoNotes schema (``ontonotes/conll2012_ontonotesv5``): one good document, then a
document whose second sentence is bad, for the reader's error tests."""

from __future__ import annotations

import datasets
import pyarrow as pa
from datasets import ClassLabel, Dataset, DatasetInfo, Features, Value

NE_NAMES = ["O", "B-PERSON", "I-PERSON", "B-GPE", "I-GPE"]
POS_NAMES = ["XX", "NNP", "VBD", "."]
GOOD_TREE = "(TOP(S(NP (NNP Ivo) )(VP (VBD won) ) (. .) ))"
BAD_DOCUMENT = "nw/bad/00/bad_0002"
BAD_WHERE = f"toy:train:1 (sentence {BAD_DOCUMENT}/1/1)"  # row 1, part 1, second sentence of the document


def hub_features(named_entities=None) -> Features:
    """The hub's features; ``named_entities`` replaces the NE element feature (default: a ClassLabel)."""
    triple = getattr(datasets, "List", datasets.Sequence)(Value("int32"), length=3)
    return Features({
        "document_id": Value("string"),
        "sentences": [{
            "part_id": Value("int32"), "words": [Value("string")], "pos_tags": [ClassLabel(names=POS_NAMES)],
            "parse_tree": Value("string"), "predicate_lemmas": [Value("string")],
            "predicate_framenet_ids": [Value("string")], "word_senses": [Value("float32")],
            "speaker": Value("string"), "named_entities": [named_entities or ClassLabel(names=NE_NAMES)],
            "srl_frames": [{"verb": Value("string"), "frames": [Value("string")]}], "coref_spans": [triple],
        }],
    })


def sentence(words=("Ivo", "won", "."), pos=(1, 2, 3), ne=(1, 0, 0), tree=GOOD_TREE, part=0) -> dict:
    n = len(words)
    return {"part_id": part, "words": list(words), "pos_tags": list(pos), "parse_tree": tree,
            "predicate_lemmas": [None] * n, "predicate_framenet_ids": [None] * n, "word_senses": [None] * n,
            "speaker": None, "named_entities": list(ne), "srl_frames": [], "coref_spans": []}


def hub_dataset(bad: dict, features: Features | None = None, good: dict | None = None) -> Dataset:
    """A good document, then a document whose second sentence (part 1) is ``bad``; values are not validated."""
    features = features or hub_features()
    good = good or sentence()
    rows = [{"document_id": "bn/ok/00/ok_0001", "sentences": [good]},
            {"document_id": BAD_DOCUMENT, "sentences": [good, {**bad, "part_id": 1}]}]
    return Dataset(pa.Table.from_pylist(rows, schema=features.arrow_schema), info=DatasetInfo(features=features))
