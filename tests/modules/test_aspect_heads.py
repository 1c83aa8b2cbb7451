"""Aspect heads: padding invariance, TD/TC semantics against direct encoder runs, config construction."""

import functools

import pytest
import torch

from helpers.yaml_build import from_yaml
from helpers.aspect_batch import D, LENGTHS, SPANS, aspect_batch
from onlstm_tasks.encoders import GRU, LSTM, ONLSTM
from onlstm_tasks.modules.aspect_heads import (
    AspectAttentionHead,
    AspectPoolingHead,
    TargetConnectionHead,
    TargetDependentHead,
    aspect_bounds,
)
from onlstm_tasks.tasks.absa import HeadFactory

torch.set_num_threads(1)
ENC = functools.partial(ONLSTM, hidden_size=8, chunk_size=2)
HEADS = {
    "td": lambda: TargetDependentHead(D, ENC),
    "tc": lambda: TargetConnectionHead(D, functools.partial(LSTM, hidden_size=8)),
    "attention": lambda: AspectAttentionHead(D, functools.partial(ONLSTM, hidden_size=8, chunk_size=4,
                                                                  bidirectional=True)),
    "pool-mean": lambda: AspectPoolingHead(D, ENC),
    "pool-max": lambda: AspectPoolingHead(D, functools.partial(GRU, hidden_size=8), pooling="max"),
}


def batch(seed=0):
    return aspect_batch(seed)[:3]


def test_aspect_bounds():
    _, _, aspect = batch()
    start, end = aspect_bounds(aspect)
    assert start.tolist() == [s for s, _ in SPANS] and end.tolist() == [e for _, e in SPANS]


@pytest.mark.parametrize("name", HEADS)
def test_padding_invariance_and_gradients(name):
    torch.manual_seed(0)
    head = HEADS[name]().eval()
    x, mask, aspect = batch()
    out = head(x, mask, aspect)
    assert out.shape == (3, head.output_size)
    noisy = torch.where(mask[..., None], x, torch.randn_like(x) * 50)
    torch.testing.assert_close(head(noisy, mask, aspect), out)
    for b, n in enumerate(LENGTHS.tolist()):
        alone = head(x[b : b + 1, :n], mask[b : b + 1, :n], aspect[b : b + 1, :n])
        torch.testing.assert_close(alone[0], out[b], atol=1e-6, rtol=1e-5)
    head.train()
    head(x, mask, aspect).pow(2).sum().backward()
    for pname, p in head.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, pname


def test_target_dependent_head_reads_left_and_right_contexts():
    torch.manual_seed(0)
    head = TargetDependentHead(D, ENC).eval()
    x, mask, aspect = batch()
    out = head(x, mask, aspect)
    for b, ((s, e), n) in enumerate(zip(SPANS, LENGTHS.tolist())):
        left = head.left(x[b : b + 1, :e]).hidden[0, -1]
        right = head.right(x[b : b + 1, s:n].flip(1)).hidden[0, -1]
        torch.testing.assert_close(out[b], torch.cat([left, right]), atol=1e-6, rtol=1e-5)


def test_target_connection_head_appends_the_mean_aspect_vector():
    torch.manual_seed(0)
    head = TargetConnectionHead(D, ENC).eval()
    x, mask, aspect = batch()
    b, (s, e) = 0, SPANS[0]
    mean = x[b, s:e].mean(0)
    left_in = torch.cat([x[b, :e], mean.expand(e, D)], -1)
    torch.testing.assert_close(head(x, mask, aspect)[b, : head.left.output_size],
                               head.left(left_in[None]).hidden[0, -1], atol=1e-6, rtol=1e-5)


def test_attention_weights_are_a_distribution_over_real_tokens():
    head = AspectAttentionHead(D, ENC)
    x, mask, aspect = batch()
    alpha = head.attention(x, mask, aspect)
    torch.testing.assert_close(alpha.sum(-1), torch.ones(3))
    assert (alpha[~mask] == 0).all()


def test_head_with_nested_encoder_builds_from_yaml():
    snippet = """
    class_path: onlstm_tasks.modules.aspect_heads.TargetDependentHead
    init_args:
      encoder:
        class_path: onlstm_tasks.encoders.LSTM
        init_args: {hidden_size: 8}
    """
    head = from_yaml(HeadFactory, snippet)(D)
    assert isinstance(head, TargetDependentHead) and isinstance(head.left, LSTM) and head.output_size == 16
