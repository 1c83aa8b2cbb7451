"""AspectSentimentClassifier on the bundled ABSA sample: the shared model invariants for every head and encoder."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F
from helpers.model_invariants import (
    assert_batched_equals_single,
    assert_checkpoint_round_trip,
    assert_gradients_reach_every_parameter,
)

from onlstm_tasks.data.absa.module import AspectSentimentDataModule
from onlstm_tasks.embedders.word_char import WordCharEmbedder
from onlstm_tasks.encoders import GRU, LSTM, ONLSTM
from onlstm_tasks.modules import aspect_heads
from onlstm_tasks.sample_data import sample_path
from onlstm_tasks.tasks.absa import AspectSentimentClassifier

torch.set_num_threads(1)
EMBEDDER = functools.partial(WordCharEmbedder, word_dim=12, char_encoder="cnn", char_dim=6, char_features=6,
                             dropout=0.0)
ENCODERS = {
    "onlstm": functools.partial(ONLSTM, hidden_size=8, chunk_size=2),
    "lstm": functools.partial(LSTM, hidden_size=8),
    "gru-bi": functools.partial(GRU, hidden_size=8, bidirectional=True),
}
HEADS = ["TargetDependentHead", "TargetConnectionHead", "AspectAttentionHead", "AspectPoolingHead"]


@pytest.fixture(scope="module")
def dm() -> AspectSentimentDataModule:
    data = AspectSentimentDataModule(path=str(sample_path("absa")), eval_batch_size=8)
    data.setup("fit")
    return data


def build(dm, head: str, encoder: str, seed: int = 0) -> AspectSentimentClassifier:
    torch.manual_seed(seed)
    head_factory = functools.partial(getattr(aspect_heads, head), encoder=ENCODERS[encoder])
    return AspectSentimentClassifier(dm.word_vocab, dm.char_vocab, dm.labels, embedder=EMBEDDER,
                                     head=head_factory, dropout=0.0)


def varied(dm, count: int = 5) -> list[int]:
    """Validation indices of pairwise different lengths (so a batch of them is padded)."""
    seen, out = set(), []
    for i, ex in enumerate(dm.examples("validation")):
        if len(ex) not in seen:
            seen.add(len(ex))
            out.append(i)
        if len(out) == count:
            break
    return out


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("encoder", sorted(ENCODERS))
def test_gradients_and_padding_invariance(dm, head, encoder):
    if head in ("TargetDependentHead", "TargetConnectionHead") and encoder.endswith("-bi"):
        with pytest.raises(ValueError, match="unidirectional encoder"):
            build(dm, head, encoder)
        return
    model = build(dm, head, encoder)
    batch = dm.val_dataloader().collate_fn(varied(dm))
    assert_gradients_reach_every_parameter(model, F.cross_entropy(model(batch), batch.labels))
    model.eval()
    with torch.no_grad():
        assert_batched_equals_single(lambda b: list(model(b)), dm.val_dataloader().collate_fn, varied(dm))


@pytest.mark.parametrize("head", ["TargetDependentHead", "AspectAttentionHead"])
def test_checkpoint_round_trip(dm, head, tmp_path):
    model = build(dm, head, "onlstm")
    batch = dm.val_dataloader().collate_fn(varied(dm))
    assert_checkpoint_round_trip(AspectSentimentClassifier, model, tmp_path, lambda m: m(batch))


def test_a_few_steps_fit_a_handful_of_examples(dm):
    model = build(dm, "AspectPoolingHead", "onlstm")
    batch = dm.train_dataloader().collate_fn(list(range(12)))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    first = None
    for _ in range(40):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(batch), batch.labels)
        first = first if first is not None else loss.item()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.2 * first


def test_predict_runs_the_encoder_once_per_batch_and_writes_its_trees(dm):
    """The logits and the induced trees come from one pass of the head's encoder (the trees as from a second,
    separate pass: the same distances)."""
    from onlstm_tasks.tasks.tree_fields import induced_tree_fields

    model = build(dm, "AspectPoolingHead", "onlstm").eval()
    encoder = model.net.head.encoder
    calls = []
    handle = encoder.register_forward_hook(lambda module, args, output: calls.append(1))
    batch = dm.val_dataloader().collate_fn(varied(dm))
    with torch.no_grad():
        rows = model.predict_step(batch, 0)
    handle.remove()
    assert len(calls) == 1
    with torch.no_grad():
        again = encoder(model.net.embedder(batch.tokens), batch.tokens.mask)
    expected = induced_tree_fields(again, batch.tokens.mask, batch.tokens.words, -1, "mean")
    assert [row["heads"] for row in rows] == [fields["heads"] for fields in expected]
