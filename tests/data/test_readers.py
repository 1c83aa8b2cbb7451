"""NER readers (onlstm_tasks.data.ner.readers): hand-written fixtures, bad inputs, and the shared data kit."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import datasets
import pytest
from datasets import ClassLabel, Dataset, Features, Value
from helpers.paths import FIXTURES as FIXTURE_ROOT
from helpers.shared_data import SHARED_DATA, requires_shared_data

from onlstm_tasks.data.core.examples import DataFormatError
from onlstm_tasks.data.ner.readers import (
    DATASET_FORMATS,
    FILE_FORMATS,
    READERS,
    load_ner_splits,
    normalise_split,
    read_columns,
    read_conll2012,
    read_conllx,
    read_ontonotes_rows,
    read_token_rows,
)
from onlstm_tasks.data.core.tags import entity_spans

FIXTURES = FIXTURE_ROOT / "ner"


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def assert_refused(read, tmp_path: Path, name: str, content: str | bytes, line: int, expected: str) -> None:
    """``read`` refuses the file ``name`` holding ``content``: the message starts with 'file:line: ' and says what
    was expected."""
    path = write(tmp_path, name, content)
    with pytest.raises(DataFormatError) as err:
        read(path)
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert expected in message, message


# ----------------------------------------------------------------------------------------------- columns


def test_columns_iob1_with_docstart_lines():
    examples, stats = read_columns(FIXTURES / "columns" / "eng.train", pos_column=1)
    assert [e.words for e in examples] == [
        ("Maria", "Okafor", "visited", "Lisbon", "."),
        ("Two", "owls", "met", "Kestrel", "Labs", "Beta", "Corp", "."),  # mid-sentence -DOCSTART- dropped
    ]
    assert examples[0].tags == ("B-PER", "I-PER", "O", "B-LOC", "O")
    assert examples[1].tags == ("O", "O", "O", "B-ORG", "I-ORG", "B-ORG", "I-ORG", "O")
    assert examples[1].pos[:3] == ("CD", "NNS", "VBD")
    assert [e.line for e in examples] == [3, 10]
    assert examples[0].source == str(FIXTURES / "columns" / "eng.train")
    assert stats == {"sentences": 2, "tokens": 13, "docstart_lines": 3, "repaired_tags": 0}


def test_columns_iob2_repairs_orphans_and_logs_the_count(caplog):
    with caplog.at_level(logging.INFO, logger="onlstm_tasks.data.ner.readers.columns"):
        examples, stats = read_columns(FIXTURES / "columns_iob2" / "sample.bio", scheme="iob2")
    assert examples[0].tags == ("O", "B-ORG", "I-ORG", "O", "O", "B-LOC", "I-LOC", "O")
    assert examples[1].tags == ("B-PER", "O", "B-PER")
    assert stats["repaired_tags"] == 2
    assert "orphan I- tags repaired to B-: 2" in caplog.text


def test_columns_iobes_crlf_and_non_breaking_space(tmp_path):
    path = write(tmp_path, "x.txt", "New\u00a0Amsterdam S-LOC\r\nis O\r\nbig O\r\n\r\nOla B-PER\r\nNordmann E-PER\r\n")
    examples, _ = read_columns(path, scheme="iobes")
    assert examples[0].words == ("New\u00a0Amsterdam", "is", "big")  # only spaces/tabs separate columns
    assert examples[0].tags == ("B-LOC", "O", "O")
    assert examples[1].tags == ("B-PER", "I-PER")


@pytest.mark.parametrize(
    ("content", "line", "expected"),
    [
        ("A NN O\nB NN O\n\nC O\n", 4, "expected 3 columns as on line 1, found 2"),
        ("A O\nB X-PER\n", 2, "invalid tag 'X-PER'"),
        ("A O\n\n\nB B-\n", 4, "invalid tag 'B-'"),
        ("A\nB\n", 1, "expected at least 2 columns"),
        (b"", 1, "empty file"),
        ("\n \n\n", 1, "empty file"),
        (b"A O\nB\xff O\n", 2, "expected UTF-8 text, found byte 0xff at column 2"),
        ("-DOCSTART- -X- O\n\n", 1, "found only -DOCSTART- lines"),
    ],
)
def test_columns_bad_input(tmp_path, content, line, expected):
    assert_refused(read_columns, tmp_path, "bad.conll", content, line, expected)


# --------------------------------------------------------------------------------------------- conll2012


def test_conll2012_directory(caplog):
    with caplog.at_level(logging.INFO, logger="onlstm_tasks.data.ner.readers.conll2012"):
        examples, stats = read_conll2012(FIXTURES / "conll2012")
    by_id = {e.sentence_id: e for e in examples}
    assert list(by_id) == [  # sorted file order: development/ before train/; pt/ excluded
        "bc/toy/00/toy_0003/0/0", "nw/toy/00/toy_0001/0/0", "nw/toy/00/toy_0001/0/1", "nw/toy/00/toy_0001/1/0",
    ]
    first = by_id["nw/toy/00/toy_0001/0/0"]
    assert first.words == ("Clara", "Mendes", "left", "Porto", "(", "twice", ")", ".")
    assert first.tags == ("B-PERSON", "I-PERSON", "O", "B-GPE", "O", "B-CARDINAL", "O", "O")
    assert first.pos[4] == "-LRB-"
    assert first.parse_tree == (
        "(TOP(S(NP (NNP Clara)  (NNP Mendes) )(VP (VBD left) (NP (NNP Porto) )"
        "(PRN (-LRB- -LRB-) (ADVP (RB twice) ) (-RRB- -RRB-) )) (. .) ))"
    )
    assert first.line == 2 and first.source.endswith("toy_0001.gold_conll")
    assert by_id["nw/toy/00/toy_0001/0/1"].tags == ("O", "O", "O", "B-PERSON", "I-PERSON", "O")
    assert by_id["nw/toy/00/toy_0001/1/0"].meta == {"document_id": "nw/toy/00/toy_0001", "part_id": 1,
                                                     "speaker": "Reporter_1"}
    assert by_id["bc/toy/00/toy_0003/0/0"].tags == ("O", "B-PERSON", "O", "O")
    assert "Automatic" not in {w for e in examples for w in e.words}  # the auto_conll twin is not read
    assert stats["skipped_auto_files"] == 1 and stats["files"] == 3
    assert stats["excluded_documents"] == 1 and stats["excluded_sentences"] == 2
    assert stats["documents"] == 3 and stats["sentences"] == 4
    assert "pt/ documents excluded (no NER): 1; sentences in them: 2" in caplog.text


def test_conll2012_include_pt():
    examples, stats = read_conll2012(FIXTURES / "conll2012" / "train" / "pt", include_pt=True)
    assert [e.words for e in examples] == [("Blessed", "are", "the", "meek", "."), ("Amen", ".")]
    assert all(t == "O" for e in examples for t in e.tags)
    assert stats["excluded_sentences"] == 0


ROW = "nw/t/00/t_0001 0 {i} {word} NN {parse} - - - - {ne} -"


def conll(*rows: str, header: str = "#begin document (nw/t/00/t_0001); part 000", end: bool = True) -> str:
    lines = [header, *rows] + (["", "#end document"] if end else [])
    return "\n".join(lines) + "\n"


def row(i: int, word: str, parse: str = "*", ne: str = "*") -> str:
    return ROW.format(i=i, word=word, parse=parse, ne=ne)


@pytest.mark.parametrize(
    ("content", "line", "expected"),
    [
        (conll(row(0, "Hi", "(TOP*)"), "nw/t/00/t_0001 0 1 there NN * - - -"), 3, "expected at least 11 columns"),
        (conll(row(0, "Hi", "(TOP*"), row(1, "you", "*)") + " (ARG0*)"), 3, "expected 12 columns like line 2"),
        (conll(row(0, "Ann", "(TOP*", "(PERSON*"), row(1, "Lee", "*)", "*")), 3,
         "unbalanced named-entity brackets: (PERSON opened on line 2 is not closed"),
        (conll(row(0, "Ann", "(TOP*", "*)"), row(1, "Lee", "*)")), 2, "'*)' closes no open entity"),
        (conll(row(0, "Ann", "(TOP*", "(PERSON*"), row(1, "Lee", "*)", "(GPE*)")), 3,
         "opens an entity while (PERSON from line 2 is still open"),
        (conll(row(0, "Ann", "(TOP*)", "PERSON")), 2, "expected a named-entity cell"),
        (conll(row(0, "Ann", "(TOP*)", "()")), 2, "expected a named-entity cell"),
        (conll(row(0, "Ann", "(TOP*)"), row(1, "Lee", "*)"), row(2, "!", "(S*)")), 3,
         "unbalanced parse brackets: ')' closes more constituents than are open"),
        (conll(row(0, "Ann", "(TOP(S*"), row(1, "Lee", "*)")), 3,
         "1 constituent(s) of the sentence starting on line 2"),
        (conll(row(0, "Ann", "(TOP*)").replace(" 0 0 ", " 0 zero ")), 2, "expected integer part and word number"),
        (conll(row(0, "Ann", "TOP")), 2, "expected a parse bit"),
        (conll(row(0, "Ann", "(TOP*)"), header=""), 2, "expected '#begin document (ID); part N' before token rows"),
        (conll(row(0, "Ann", "(TOP*)"), header="#begin document nw/t part 0"), 1, "expected '#begin document (ID)"),
        (conll(row(0, "Ann", "(TOP*)"), end=False), 1, "document is never closed"),
        (conll(row(0, "Ann", "(TOP*)")) + conll(row(0, "Bo", "(TOP*)"), end=False).replace("#begin", "\n#begin"), 6,
         "document is never closed"),
        ("#end document\n", 1, "'#end document' without an open '#begin document'"),
        (conll(row(0, "Ann", "(TOP*)"), end=False) + conll(row(0, "Bo", "(TOP*)")), 3,
         "expected '#end document' before a new document (document opened on line 1)"),
        (conll(row(0, "Ann", "(TOP*)")).encode() + b"\n" + conll(row(0, "B\xe9", "(TOP*)")).encode("latin-1"), 7,
         "expected UTF-8 text"),
        ("", 1, "empty file"),
    ],
)
def test_conll2012_bad_input(tmp_path, content, line, expected):
    assert_refused(read_conll2012, tmp_path, "bad.gold_conll", content, line, expected)


def test_conll2012_counts_word_number_gaps_and_other_comments(tmp_path):
    path = write(tmp_path, "x_conll", "#meta: converted\n" + conll(row(0, "A", "(TOP*"), row(3, "B", "*)")))
    examples, stats = read_conll2012(path, source="sample")
    assert examples[0].words == ("A", "B") and examples[0].source == "sample" and examples[0].line == 3
    assert stats["word_number_gaps"] == 1 and stats["comment_lines"] == 1


def test_conll2012_xx_tokens_have_no_parse_tree(tmp_path):
    path = write(tmp_path, "x_conll", conll(row(0, "A", "(TOP*").replace(" NN ", " XX "), row(1, "B", "*)")))
    assert read_conll2012(path)[0][0].parse_tree is None


def test_conll2012_empty_directory(tmp_path):
    write(tmp_path, "notes.txt", "nothing here")
    with pytest.raises(DataFormatError, match=re.escape(f"{tmp_path}: expected *_conll files")):
        read_conll2012(tmp_path)


# ------------------------------------------------------------------------------------------------ conllx


def test_conllx_reads_trees_and_skips_multiword_tokens_and_empty_nodes(caplog):
    with caplog.at_level(logging.INFO, logger="onlstm_tasks.data.ner.readers.conllx"):
        examples, stats = read_conllx(FIXTURES / "conllx" / "toy-ner-dev.conllx")
    first, second = examples
    assert first.words == ("Lena", "'s", "cat", "sleeps", "in", "Bergen", ".")
    assert first.heads == (3, 1, 4, 0, 6, 4, 4)
    assert first.deprels[3] == "root" and first.pos[0] == "PROPN"
    assert first.tags == ("B-PER", "O", "O", "O", "O", "B-LOC", "O")
    assert (first.sentence_id, first.text, first.line) == ("toy-0001", "Lena's cat sleeps in Bergen.", 4)
    assert second.words == ("Tomas", "bought", "and", "Ida", "sold", ".")  # empty node 4.1 dropped
    assert second.heads == (2, 0, 5, 5, 2, 2)
    assert second.tags[3] == "B-PER"  # orphan I-PER after O repaired
    assert stats["multiword_tokens"] == 1 and stats["empty_nodes"] == 1 and stats["repaired_tags"] == 1
    assert "multiword-token lines skipped: 1; empty-node lines skipped: 1" in caplog.text


def test_conllx_xpos():
    examples, _ = read_conllx(FIXTURES / "conllx" / "toy-ner-test.conllx", pos="xpos")
    assert examples[0].pos == ("UH", "NNP")


def conllx_row(i: int | str, word: str, head: str, tag: str = "O") -> str:
    return "\t".join([str(i), word, word.lower(), "X", "X", "_", head, "dep", "_", "_", tag])


@pytest.mark.parametrize(
    ("content", "line", "expected"),
    [
        ("# sent_id = a\n" + conllx_row(1, "Hi", "0")[:-2] + "\n", 2, "expected 11 tab-separated columns"),
        (conllx_row(1, "Hi", "0") + "\n" + conllx_row(2, "you", "one") + "\n", 2, "expected an integer HEAD"),
        (conllx_row(1, "Hi", "0") + "\n" + conllx_row(2, "you", "3") + "\n", 2, "expected HEAD in 0..2"),
        (conllx_row(1, "Hi", "0") + "\n" + conllx_row(3, "you", "1") + "\n", 2, "expected token ID 2"),
        (conllx_row(1, "Hi", "0", "I-") + "\n", 1, "invalid tag 'I-'"),
        ("\n" + conllx_row("1-2", "Hi", "_") + "\n", 2, "found only multiword-token/empty-node lines"),
        ("# just a comment\n", 1, "found only comments"),
        ((conllx_row(1, "Hi", "0") + "\n\n" + conllx_row(1, "Jos\xe9", "0") + "\n").encode("latin-1"), 3,
         "expected UTF-8 text"),
        ("", 1, "empty file"),
    ],
)
def test_conllx_bad_input(tmp_path, content, line, expected):
    assert_refused(read_conllx, tmp_path, "bad.conllx", content, line, expected)


# ------------------------------------------------------------------------------------------ dataset rows


def ontonotes_dataset() -> Dataset:
    """Two invented documents in the hub schema of ontonotes/conll2012_ontonotesv5 (ClassLabel ids)."""
    ne = ClassLabel(names=["O", "B-PERSON", "I-PERSON", "B-GPE", "I-GPE"])
    pos = ClassLabel(names=["XX", "NNP", "VBD", "."])
    triple = getattr(datasets, "List", datasets.Sequence)(Value("int32"), length=3)
    features = Features({
        "document_id": Value("string"),
        "sentences": [{
            "part_id": Value("int32"), "words": [Value("string")], "pos_tags": [pos],
            "parse_tree": Value("string"), "predicate_lemmas": [Value("string")],
            "predicate_framenet_ids": [Value("string")], "word_senses": [Value("float32")],
            "speaker": Value("string"), "named_entities": [ne],
            "srl_frames": [{"verb": Value("string"), "frames": [Value("string")]}], "coref_spans": [triple],
        }],
    })

    def sentence(words, pos_ids, ne_ids, tree, part=0):
        n = len(words)
        return {"part_id": part, "words": words, "pos_tags": pos_ids, "parse_tree": tree,
                "predicate_lemmas": [None] * n, "predicate_framenet_ids": [None] * n, "word_senses": [None] * n,
                "speaker": "Anchor", "named_entities": ne_ids, "srl_frames": [], "coref_spans": []}

    rows = [
        {"document_id": "bn/toy/00/toy_0001", "sentences": [
            sentence(["Ivo", "Kral", "won", "."], [1, 1, 2, 3], [1, 2, 0, 0],
                     "(TOP(S(NP (NNP Ivo)  (NNP Kral) )(VP (VBD won) ) (. .) ))"),
            sentence(["Riga", "."], [1, 3], [4, 0], "(TOP(FRAG(NP (NNP Riga) ) (. .) ))", part=1),  # orphan I-GPE
        ]},
        {"document_id": "pt/toy/00/toy_0002", "sentences": [
            sentence(["Amen", "."], [1, 3], [0, 0], "(TOP(INTJ (NNP Amen)  (. .) ))")]},
    ]
    return Dataset.from_list(rows, features=features)


def test_ontonotes_rows(caplog):
    with caplog.at_level(logging.INFO, logger="onlstm_tasks.data.ner.readers.ontonotes"):
        examples, stats = read_ontonotes_rows(ontonotes_dataset(), "toy:train")
    assert [e.sentence_id for e in examples] == ["bn/toy/00/toy_0001/0/0", "bn/toy/00/toy_0001/1/1"]
    first = examples[0]
    assert first.tags == ("B-PERSON", "I-PERSON", "O", "O")
    assert first.pos == ("NNP", "NNP", "VBD", ".")
    assert first.parse_tree.startswith("(TOP(S(NP (NNP Ivo)")
    assert (first.source, first.line, first.meta["speaker"]) == ("toy:train", 0, "Anchor")
    assert examples[1].tags == ("B-GPE", "O")
    assert stats == {"documents": 1, "sentences": 2, "excluded_documents": 1, "excluded_sentences": 1,
                     "repaired_tags": 1}
    assert "pt/ documents excluded (no NER): 1" in caplog.text


def test_ontonotes_rows_include_pt():
    examples, stats = read_ontonotes_rows(ontonotes_dataset(), "toy", include_pt=True)
    assert examples[-1].words == ("Amen", ".") and examples[-1].line == 1
    assert stats["excluded_documents"] == 0


def tokens_dataset(tags, feature=None) -> Dataset:
    features = Features({"id": Value("string"), "tokens": [Value("string")], "ner_tags": [feature or Value("int64")]})
    return Dataset.from_dict({"id": ["s1", "s2"], "tokens": [["Ada", "wrote"], ["Hi", "Bo"]], "ner_tags": tags},
                             features=features)


def test_token_rows_class_labels():
    dataset = tokens_dataset([[1, 0], [0, 2]], ClassLabel(names=["O", "B-PER", "I-PER"]))
    examples, stats = read_token_rows(dataset, "toy:test")
    assert [e.tags for e in examples] == [("B-PER", "O"), ("O", "B-PER")]  # orphan I-PER repaired
    assert [(e.sentence_id, e.line, e.source) for e in examples] == [("s1", 0, "toy:test"), ("s2", 1, "toy:test")]
    assert stats["repaired_tags"] == 1


def test_token_rows_strings_and_label_names():
    strings = Dataset.from_dict({"words": [["Ada"]], "labels": [["I-PER"]]})
    examples, _ = read_token_rows(strings, tokens_column="words", tags_column="labels", scheme="iob1")
    assert examples[0].tags == ("B-PER",) and examples[0].sentence_id is None
    examples, _ = read_token_rows(tokens_dataset([[1, 0], [0, 0]]), label_names=["O", "B-PER"])
    assert examples[0].tags == ("B-PER", "O")


@pytest.mark.parametrize(
    ("kwargs", "tags", "expected"),
    [
        ({}, [[1, 0], [0, 0]], "toy: ner_tags holds integer ids (int64) but the dataset has no ClassLabel"),
        ({"label_names": ["O"]}, [[0, 0], [0, 1]], "toy:1: ner_tags: expected label ids in [0, 1)"),
        ({"label_names": ["O"]}, [[0, 0], [0]], "toy:1: expected one tag per token"),
        ({"tags_column": "tags"}, [[0, 0], [0, 0]], "toy: expected a column 'tags'"),
    ],
)
def test_token_rows_errors(kwargs, tags, expected):
    with pytest.raises(DataFormatError) as err:
        read_token_rows(tokens_dataset(tags), "toy", **kwargs)
    assert str(err.value).startswith(expected), str(err.value)


# --------------------------------------------------------------------------------------- load_ner_splits


def test_registry():
    assert set(READERS) == {"ontonotes", "conll2012", "columns", "conllx", "tokens"}
    assert set(DATASET_FORMATS) | set(FILE_FORMATS) == set(READERS)
    examples, _ = READERS["columns"](FIXTURES / "columns" / "eng.testb", source="named")
    assert examples[0].source == "named"
    assert [normalise_split(s) for s in ("dev", "Development", "valid", "testa", "testb", "extra")] == [
        "validation", "validation", "validation", "validation", "test", "extra"]


def test_load_columns_splits_by_file_name():
    splits = load_ner_splits(FIXTURES / "columns")  # eng.train / eng.testa / eng.testb
    assert list(splits) == ["train", "validation", "test"]
    assert [len(v) for v in splits.values()] == [2, 1, 1]
    assert splits["validation"][0].tags[3] == "B-LOC"  # IOB1 by default


def test_load_conll2012_splits_by_folder_and_reader_options():
    splits = load_ner_splits(FIXTURES / "conll2012")
    assert {k: len(v) for k, v in splits.items()} == {"train": 3, "validation": 1}
    with_pt = load_ner_splits(FIXTURES / "conll2012", format="conll2012", include_pt=True)
    assert len(with_pt["train"]) == 5


def test_load_conllx_prefers_conllx_over_conllu(caplog):
    with caplog.at_level(logging.INFO, logger="onlstm_tasks.data.ner.readers.formats"):
        splits = load_ner_splits(FIXTURES / "conllx")
    assert {k: len(v) for k, v in splits.items()} == {"validation": 2, "test": 1}
    assert "toy-ud-dev.conllu" in caplog.text  # ignored, and said so


def test_folder_entries_not_named_after_a_split_are_logged_by_name(tmp_path, caplog):
    write(tmp_path, "train.txt", "Ada B-PER\n")
    write(tmp_path, "LICENSE.txt", "CC BY-SA 4.0\n")
    write(tmp_path, "train-and-test.txt", "Ada B-PER\n")  # two split tokens: no split
    (tmp_path / "notes").mkdir()
    (tmp_path / ".cache").mkdir()
    with caplog.at_level(logging.INFO, logger="onlstm_tasks.data.core.data_files"):
        splits = load_ner_splits(tmp_path, format="columns")
    assert list(splits) == ["train"]
    messages = [r.getMessage() for r in caplog.records if r.name == "onlstm_tasks.data.core.data_files"]
    assert messages == [f"{tmp_path}: ignored 3 not named after a split (train, validation/dev, test): LICENSE.txt, "
                        f"notes, train-and-test.txt; 1 hidden; pass data_files={{split: path}} to use them"]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="onlstm_tasks.data.core.data_files"):
        load_ner_splits(FIXTURES / "columns")  # every entry is a split: nothing to report
    assert not [r for r in caplog.records if r.name == "onlstm_tasks.data.core.data_files"]


def test_load_with_data_files():
    splits = load_ner_splits(FIXTURES, data_files={"dev": "conllx/*dev.conllx", "test": ["conllx/toy-ner-test.conllx"]})
    assert {k: len(v) for k, v in splits.items()} == {"validation": 2, "test": 1}
    splits = load_ner_splits(FIXTURES / "columns_iob2" / "sample.bio", scheme="iob2")
    assert list(splits) == ["train"] and len(splits["train"]) == 2
    with pytest.raises(ValueError, match="different formats"):
        load_ner_splits(FIXTURES, data_files={"test": ["conllx/toy-ner-test.conllx", "columns/eng.testb"]})


def test_load_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown format"):
        load_ner_splits(FIXTURES / "columns", format="csv")
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_ner_splits(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="matches no file"):
        load_ner_splits(FIXTURES, data_files={"train": "columns/*.nothing"})
    write(tmp_path, "notes.txt", "A O\n")
    with pytest.raises(FileNotFoundError, match=r"no file or folder named after a split .*\(found: notes\.txt\)"):
        load_ner_splits(tmp_path)


def test_load_local_parquet_datasets(tmp_path):
    onto, tokens = tmp_path / "onto", tmp_path / "tok"
    for split in ("train", "validation"):
        (onto / split).mkdir(parents=True)
        ontonotes_dataset().to_parquet(onto / split / "0000.parquet")
    (tokens / "data").mkdir(parents=True)
    tokens_dataset([[1, 0], [0, 0]]).to_parquet(tokens / "data" / "dev.parquet")
    splits = load_ner_splits(onto)  # columns say ontonotes; same call as for the hub
    assert {k: len(v) for k, v in splits.items()} == {"train": 2, "validation": 2}
    assert splits["train"][0].source == f"{onto}:train"
    splits = load_ner_splits(tokens, data_files={"dev": "data/dev.parquet"}, label_names=["O", "B-PER"])
    assert [e.tags for e in splits["validation"]] == [("B-PER", "O"), ("O", "O")]


# ------------------------------------------------------------------------------------- shared data kit


def _token_blocks(path: Path) -> list[list[list[str]]]:
    """Independent oracle: sentences of a CoNLL-2012 file as lists of split rows."""
    sentences, current = [], []
    for line in path.read_text(encoding="utf-8").splitlines() + [""]:
        if line.strip() and not line.startswith("#"):
            current.append(line.split())
        elif current:
            sentences.append(current)
            current = []
    return sentences


@requires_shared_data
def test_shared_ontonotes_kit():
    path = SHARED_DATA / "conll2012_ontonotesv5"
    splits = load_ner_splits(path, data_dir="english_v12")
    assert {k: len(v) for k, v in splits.items()} == {"train": 3000, "validation": 500, "test": 500}
    loaded = datasets.load_dataset(str(path), data_dir="english_v12")
    _, stats = read_ontonotes_rows(loaded["validation"], "kit:validation")
    assert stats["documents"] == 20 and stats["excluded_documents"] == 0 and stats["repaired_tags"] == 0
    for example in splits["train"]:
        # the hub (like our raw reader) drops the tree of a sentence with an "XX" (unparsed) token
        assert (example.parse_tree is None) == ("XX" in example.pos)
        if example.parse_tree is not None:
            assert example.parse_tree.count("(") == example.parse_tree.count(")")
        entity_spans(example.tags)  # valid IOB2 throughout
    assert sum(e.parse_tree is None for e in splits["train"]) == 23
    assert sum(1 for e in splits["train"] for t in e.tags if t.startswith("B-")) > 100


@requires_shared_data
def test_shared_conll2012_raw_samples():
    path = SHARED_DATA / "conll2012_raw_samples"
    examples, stats = read_conll2012(path)
    blocks = {f.name: _token_blocks(f) for f in sorted(path.glob("*_conll"))}
    pt = sum(len(b) for b in blocks.values() if b[0][0][0].startswith("pt/"))
    assert pt > 0 and stats["excluded_sentences"] == pt and stats["excluded_documents"] == 1
    assert len(examples) == stats["sentences"] == sum(len(b) for b in blocks.values()) - pt
    assert all(not e.sentence_id.startswith("pt/") for e in examples)
    first = examples[0]  # coref.gold_conll, first sentence
    assert first.words[1:5] == ("the", "summer", "of", "2005")
    assert first.tags[1:5] == ("B-DATE", "I-DATE", "I-DATE", "I-DATE")
    assert first.words[23:25] == ("Hong", "Kong") and first.tags[23:26] == ("B-GPE", "I-GPE", "O")
    third = examples[2]
    assert third.tags[3:6] == ("B-ORDINAL", "B-ORG", "O")  # two adjacent single-token entities
    by_word = {w: t for e in examples for w, t in zip(e.words, e.tags)}
    assert (by_word["Mali"], by_word["Denise"], by_word["Dillon"]) == ("B-GPE", "B-PERSON", "I-PERSON")
    assert by_word["Headline"] == "B-WORK_OF_ART" and by_word["News"] == "I-WORK_OF_ART"
    assert stats["word_number_gaps"] == 1  # one sample sentence skips word numbers; kept, counted


@requires_shared_data
def test_shared_uner_conllx():
    splits = load_ner_splits(SHARED_DATA / "uner_en_ewt")  # picks the .conllx files over .conllu/.iob2
    assert {k: len(v) for k, v in splits.items()} == {"validation": 2001, "test": 2077}
    for examples in splits.values():
        assert all(e.heads.count(0) == 1 for e in examples)  # one root per UD sentence
        assert all(e.sentence_id for e in examples)
        assert {t[2:] for e in examples for t in e.tags if t != "O"} == {"PER", "LOC", "ORG"}
