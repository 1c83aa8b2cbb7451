"""A training step never waits on the host: no tensor value reaches Python in ``training_step`` and its backward
(:func:`helpers.host_reads.count_host_reads` (``tests/helpers``), a dispatch-mode count of ``_local_scalar_dense`` and the other
value-reading operations plus ``tolist``/``numpy``). On a GPU each such read would stall the device; on the CPU the
count stands in for that. Inside the ON-LSTM operator the CPU loop plans its runs from the lengths (no wait on a
CPU, counted apart); the ``triton`` back end, the one a GPU runs, reads nothing there either."""

from __future__ import annotations

import functools

import pytest
import torch

from onlstm_tasks.data.ner.module import NERDataModule
from onlstm_tasks.embedders.word_char import WordCharEmbedder
from onlstm_tasks.encoders import ONLSTM
from helpers.host_reads import count_host_reads
from onlstm_tasks.sample_data import sample_path
from onlstm_tasks.tasks.ner import NERTagger


pytestmark = pytest.mark.filterwarnings("ignore:You are trying to")


@pytest.fixture(scope="module")
def data() -> NERDataModule:
    dm = NERDataModule(path=str(sample_path("ner")), data_dir=None, revision=None, format="columns",
                       reader_options={"scheme": "iob2"}, batch_size=8)
    dm.setup("fit")
    return dm


def tagger(data, backend: str) -> NERTagger:
    torch.manual_seed(0)
    embedder = functools.partial(WordCharEmbedder, word_dim=8, char_dim=4, char_features=8, unk_replace=0.5)
    encoder = functools.partial(ONLSTM, hidden_size=16, chunk_size=8, bidirectional=True, dropconnect=0.2,
                                backend=backend)
    return NERTagger(data.word_vocab, data.char_vocab, data.labels, embedder=embedder, encoder=encoder).train()


def step_reads(model, batch):
    model.training_step(batch, 0)  # warm-up: lazy initialisations may read once
    with count_host_reads() as reads:
        model.training_step(batch, 0).backward()
    return reads


def test_an_ner_training_step_reads_nothing_on_the_host(data):
    batch = next(iter(data.train_dataloader()))
    reads = step_reads(tagger(data, "auto"), batch)
    assert reads.total == 0, reads.where


@pytest.mark.triton
def test_with_the_triton_back_end_nothing_is_read_inside_the_operator_either(data):
    pytest.importorskip("triton", reason="Triton is not installed (pip install triton)")
    batch = min(data.train_dataloader(), key=lambda b: b.tokens.mask.numel())  # the interpreter is slow
    reads = step_reads(tagger(data, "triton"), batch)
    assert (reads.total, reads.inside_ops) == (0, 0), reads.where


def test_the_counter_sees_the_reads_it_is_meant_to_see():
    x = torch.arange(6.0)
    with count_host_reads() as reads:
        x.sum().item()
        bool(x[0])
        x.tolist()
        x[x > 2]
        x.nonzero()
    assert reads.total == 5
