"""configs/ner/conll2003_*.yaml: the pair differs only in the encoder, and their data block reads a local copy with
the hub layout of eriktks/conll2003 (parquet conversion: ``conll2003/{split}/0000.parquet``, ``ner_tags`` as
ClassLabel ids) into IOB2 examples named by the ClassLabel."""

from __future__ import annotations

from pathlib import Path

import yaml

from helpers.paths import REPO
from onlstm_tasks.data.ner.module import NERDataModule

CONFIGS = REPO / "configs" / "ner"
NAMES = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


def _load(name: str) -> dict:
    return yaml.safe_load((CONFIGS / name).read_text())


def test_conll2003_pair_differs_only_in_the_encoder():
    onlstm, lstm = _load("conll2003_onlstm_crf.yaml"), _load("conll2003_lstm_crf.yaml")
    assert onlstm["model"]["init_args"].pop("encoder") != lstm["model"]["init_args"].pop("encoder")
    assert onlstm == lstm


def _hub_layout_copy(root: Path) -> None:
    import datasets

    features = datasets.Features({
        "id": datasets.Value("string"),
        "tokens": datasets.Sequence(datasets.Value("string")),
        "ner_tags": datasets.Sequence(datasets.ClassLabel(names=NAMES)),
    })
    rows = {
        "train": [(["EU", "rejects", "German", "call", "."], [3, 0, 7, 0, 0]),
                  (["Peter", "Blackburn", "in", "New", "York"], [1, 2, 0, 5, 6])],
        "validation": [(["CRICKET", "-", "LEICESTERSHIRE", "WIN"], [0, 0, 3, 0])],
        "test": [(["Japan", "beat", "Syria", "."], [5, 0, 5, 0])],
    }
    for split, examples in rows.items():
        data = {"id": [str(i) for i in range(len(examples))], "tokens": [t for t, _ in examples],
                "ner_tags": [g for _, g in examples]}
        folder = root / "conll2003" / split
        folder.mkdir(parents=True)
        datasets.Dataset.from_dict(data, features=features).to_parquet(str(folder / "0000.parquet"))


def test_conll2003_data_block_reads_the_hub_layout(tmp_path: Path):
    _hub_layout_copy(tmp_path)
    init = _load("conll2003_onlstm_crf.yaml")["data"]["init_args"]
    assert (init["path"], init["data_dir"], init["format"]) == ("eriktks/conll2003", "conll2003", "tokens")
    dm = NERDataModule(**{**init, "path": str(tmp_path), "revision": None})  # offline: the local copy
    dm.setup("fit")
    assert set(dm.labels) == set(NAMES)
    splits = dm.splits()
    assert splits["train"][0].tags == ("B-ORG", "O", "B-MISC", "O", "O")
    assert splits["train"][1].tags == ("B-PER", "I-PER", "O", "B-LOC", "I-LOC")
    assert splits["test"][0].words == ("Japan", "beat", "Syria", ".")
