"""Bad data is refused (or counted and logged) at the data module's ``setup``, before any training step, with a
:class:`DataFormatError` naming the file and the line (or row and sentence): issue 22, items 3, 4 and 13, the
checks of every split at setup and the format sniffing.

Each case writes a small file in ``tmp_path`` and calls ``dm.setup("fit")`` (what the Trainer does before the first
step), so an error raised there is one raised before training.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from helpers.ontonotes_rows import hub_dataset, sentence

from onlstm_tasks.data.absa.module import AspectSentimentDataModule
from onlstm_tasks.data.core.gold_trees import model_reads_gold_trees
from onlstm_tasks.data.ner.module import NERDataModule
from onlstm_tasks.errors import DataFormatError
from onlstm_tasks.trees.source import TreeSource

GOOD = ["Ivo B-PER", "won O", "in B-LOC", "Rome I-LOC"]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def columns(tmp_path: Path, train: list[list[str]], test: list[list[str]] | None = None, **options) -> NERDataModule:
    """A columns data module with train, validation (``GOOD``) and optional test files."""
    files = {}
    for split, sentences in (("train", train), ("validation", [GOOD]), ("test", test)):
        if sentences is not None:
            text = "\n\n".join("\n".join(s) for s in sentences) + "\n"
            files[split] = str(write(tmp_path / f"{split}.txt", text))
    return NERDataModule(path=str(tmp_path), data_dir=None, revision=None, data_files=files, format="columns",
                         reader_options={"scheme": "iob2"}, **options)


# ---- item 3: labels of every split are checked at setup("fit") -------------------------------------------------
def test_an_unseen_label_in_the_test_split_fails_at_fit_setup(tmp_path):
    dm = columns(tmp_path, [GOOD] * 4, [GOOD, GOOD, ["Zork B-ALIEN", "landed O"]])
    with pytest.raises(DataFormatError, match=re.escape(f"{tmp_path / 'test.txt'}:11: label 'B-ALIEN' in the test "
                                                        "split never occurs in training")):
        dm.setup("fit")


def test_fit_setup_without_a_test_split_checks_train_and_validation_only(tmp_path):
    dm = columns(tmp_path, [GOOD] * 4)
    dm.setup("fit")
    assert set(dm._encoded) == {"train", "validation"}


# ---- item 3: trees and heads only when the model reads them, at setup ------------------------------------------
CYCLE = ("1\tIvo\t_\tPROPN\t_\t_\t2\tnsubj\t_\t_\tB-PER\n"
         "2\twon\t_\tVERB\t_\t_\t1\troot\t_\t_\tO\n")  # 1 -> 2 -> 1: a head cycle, no root
TREE = ("1\tIvo\t_\tPROPN\t_\t_\t2\tnsubj\t_\t_\tB-PER\n"
        "2\twon\t_\tVERB\t_\t_\t0\troot\t_\t_\tO\n")


def conllx(tmp_path: Path, **options) -> NERDataModule:
    train = write(tmp_path / "train.conllx", "\n".join([TREE] * 4))
    test = write(tmp_path / "test.conllx", "\n".join([TREE, CYCLE]))
    return NERDataModule(path=str(tmp_path), data_dir=None, revision=None, format="conllx", validation_ratio=0.3,
                         data_files={"train": str(train), "test": str(test)}, **options)


class GoldReader(torch.nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.encoder = torch.nn.Module()
        self.encoder.tree_source = TreeSource(kind)


@pytest.mark.parametrize("max_length", [128, 1])  # 1: sentences cut into pieces, each cut from the whole tree
def test_a_head_cycle_in_the_test_split_fails_at_fit_setup_when_the_model_reads_gold_trees(tmp_path, max_length):
    dm = conllx(tmp_path, max_length=max_length)
    dm.trainer = SimpleNamespace(lightning_module=GoldReader("gold"))  # what the Trainer attaches before setup
    with pytest.raises(DataFormatError, match=re.escape(f"{tmp_path / 'test.conllx'}:4: heads are not a tree")):
        dm.setup("fit")


@pytest.mark.parametrize("max_length", [128, 1])
@pytest.mark.parametrize("reader", [GoldReader("none"), GoldReader("induced"), torch.nn.Linear(2, 2)])
def test_models_that_read_no_gold_tree_never_see_the_trees(tmp_path, reader, max_length):
    dm = conllx(tmp_path, max_length=max_length)
    dm.trainer = SimpleNamespace(lightning_module=reader)
    dm.setup("fit")
    assert next(iter(dm.train_dataloader())).heads is None
    assert not model_reads_gold_trees(reader)


def test_gold_trees_setting_overrides_the_model(tmp_path):
    with pytest.raises(DataFormatError, match="heads are not a tree"):
        conllx(tmp_path, gold_trees=True).setup("fit")
    conllx(tmp_path, gold_trees=False).setup("fit")


# ---- item 4: empty sentences (OntoNotes hub schema) ------------------------------------------------------------
def ontonotes_with_empty_sentence(tmp_path: Path, **options) -> NERDataModule:
    for split in ("train", "validation"):
        (tmp_path / split).mkdir()
        hub_dataset(sentence(words=(), pos=(), ne=(), tree=None)).to_parquet(tmp_path / split / "0000.parquet")
    return NERDataModule(path=str(tmp_path), data_dir=None, revision=None, **options)


def test_an_empty_sentence_is_refused_at_setup_with_empty_sentences_error(tmp_path):
    dm = ontonotes_with_empty_sentence(tmp_path, empty_sentences="error")
    with pytest.raises(DataFormatError, match=re.escape(f"{tmp_path}:train:1 (sentence nw/bad/00/bad_0002/1/1): "
                                                        "empty sentence (no token) in the train split")):
        dm.setup("fit")


def test_an_empty_sentence_is_skipped_counted_and_named_by_default(tmp_path, caplog):
    dm = ontonotes_with_empty_sentence(tmp_path)
    with caplog.at_level(logging.WARNING, logger="onlstm_tasks"):
        dm.setup("fit")
    assert f"train: 1 empty sentence(s) (no token) skipped, the first at {tmp_path}:train:1 (sentence " \
           "nw/bad/00/bad_0002/1/1)" in caplog.text
    assert all(len(ex) for split in ("train", "validation") for ex in dm.examples(split))
    assert all(batch.tokens.mask.any(1).all() for batch in dm.train_dataloader())


# ---- item 13: tag sanity ---------------------------------------------------------------------------------------
def test_an_empty_string_token_is_an_error_naming_the_row(tmp_path):
    (tmp_path / "train").mkdir()
    hub_dataset(sentence(words=("Ivo", "", "."))).to_parquet(tmp_path / "train" / "0000.parquet")
    dm = NERDataModule(path=str(tmp_path), data_dir=None, revision=None)
    with pytest.raises(DataFormatError, match=re.escape(f"{tmp_path}:train:1 (sentence nw/bad/00/bad_0002/1/1): "
                                                        "token 2 of the sentence is '', an empty token")):
        dm.setup("fit")


def test_a_type_cut_mid_tag_is_a_warning_naming_file_and_line(tmp_path, caplog):
    misc = ["Ivo B-PER", "likes O", "Lego B-MISC", "in B-LOC", "Rome I-LOC"]
    dm = columns(tmp_path, [misc] * 4 + [["Ivo B-PER", "likes O", "Le I-MI"]])
    with caplog.at_level(logging.WARNING, logger="onlstm_tasks"):
        dm.setup("fit")
    lines = [r.getMessage() for r in caplog.records if "prefix of" in r.getMessage()]
    # line 27 holds the tag (the sentence starts on line 25)
    assert lines == [f"{tmp_path / 'train.txt'}:27: entity type 'MI' (token 3 of the sentence) occurs once in "
                     "training and is a prefix of 'MISC': a file cut mid-tag? (fix the tag if so)"]


def test_an_aspect_term_inside_a_token_is_widened_with_a_warning_naming_file_and_sentence(tmp_path, caplog):
    xml = write(tmp_path / "train.xml", """<?xml version="1.0"?>
<sentences>
  <sentence id="s1"><text>The screens are bright.</text>
    <aspectTerms><aspectTerm term="screen" polarity="positive" from="4" to="10"/></aspectTerms></sentence>
  <sentence id="s2"><text>The keys are good.</text>
    <aspectTerms><aspectTerm term="keys" polarity="positive" from="4" to="8"/></aspectTerms></sentence>
</sentences>
""")
    dm = AspectSentimentDataModule(path=str(tmp_path), data_files={"train": str(xml)}, format="semeval_xml",
                                   validation_ratio=0.5)
    with caplog.at_level(logging.WARNING, logger="onlstm_tasks"):
        dm.setup("fit")
    assert f"{xml}:4: sentence s1: aspect term 'screen' begins or ends inside a token: its span is widened to " \
           "the token(s) ['screens']" in caplog.text


# ---- format sniffing -------------------------------------------------------------------------------------------
def test_an_xml_file_given_to_columns_says_it_looks_like_xml(tmp_path):
    xml = write(tmp_path / "train.txt", '<?xml version="1.0"?>\n<sentences>\n  <sentence id="1">\n</sentences>\n')
    dm = NERDataModule(path=str(tmp_path), data_dir=None, revision=None, data_files={"train": str(xml)},
                       format="columns")
    with pytest.raises(DataFormatError, match=re.escape(f"{xml}:2: expected 2 columns as on line 1, found 1 (this "
                                                        "file looks like XML, which no format of this task reads: "
                                                        "format: semeval_xml reads SemEval XML")):
        dm.setup("fit")


def test_a_conllx_file_given_to_columns_names_format_conllx(tmp_path):
    path = write(tmp_path / "train.txt", "# sent_id = 1\n" + TREE)
    dm = NERDataModule(path=str(tmp_path), data_dir=None, revision=None, data_files={"train": str(path)},
                       format="columns")
    with pytest.raises(DataFormatError, match=re.escape("(this file looks like CoNLL-X/U rows (numbered tokens, 10+ "
                                                        "tab-separated columns), not columns: use format: conllx)")):
        dm.setup("fit")


def test_a_parquet_file_given_to_semeval_xml_names_the_dataset_formats(tmp_path):
    path = tmp_path / "train.xml"
    hub_dataset(sentence()).to_parquet(path)
    dm = AspectSentimentDataModule(path=str(tmp_path), data_files={"train": str(path)}, format="semeval_xml")
    with pytest.raises(DataFormatError, match=re.escape(f"{path}:1: expected well-formed XML") + ".*" +
                       re.escape("(this file looks like a parquet dataset file, not semeval_xml: use format: setfit)")):
        dm.setup("fit")
