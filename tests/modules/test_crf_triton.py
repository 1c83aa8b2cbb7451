"""The CRF's likelihood in two Triton kernels (:mod:`onlstm_tasks.modules.crf.triton_path`, the GPU's path) against
pytorch-crf (the oracle) and the sum over every path. Without a GPU the kernels run in Triton's interpreter on CPU
tensors (``TRITON_INTERPRET=1``, set by ``conftest.py``). Marked ``triton``: skipped without Triton, required in CI
(ONLSTM_REQUIRE_TRITON=1). On a GPU (marked ``cuda``) the compiled kernels against the scan."""

from __future__ import annotations

import itertools
import warnings

import pytest
import torch
from helpers.crf import assert_likelihood_matches_pytorch_crf
from helpers.host_reads import count_host_reads

from onlstm_tasks.modules.crf import paths
from onlstm_tasks.modules.crf import scan as crf_scan
from onlstm_tasks.modules.crf import triton_path

pytest.importorskip("triton", reason="Triton is not installed (pip install triton)")
pytestmark = [pytest.mark.triton,
              pytest.mark.filterwarnings("ignore:divide by zero encountered in log")]  # the interpreter's numpy: the
#                                                                                     padded tags' log(0) = -inf


def ragged(batch, steps, tags, scale=3.0, seed=0):
    generator = torch.Generator().manual_seed(seed)
    emissions = torch.randn(batch, steps, tags, generator=generator) * scale
    lengths = torch.randint(1, steps + 1, (batch,), generator=generator)
    lengths[0] = steps
    mask = torch.arange(steps) < lengths[:, None]
    return emissions, mask


@pytest.mark.parametrize("batch,steps,tags", [(3, 1, 4), (6, 9, 5), (8, 17, 37), (3, 12, 64), (2, 20, 7)])
def test_the_kernels_give_pytorch_crfs_likelihood_and_gradients(batch, steps, tags):
    emissions, mask = ragged(batch, steps, tags, seed=batch)
    torch.manual_seed(steps)
    assert_likelihood_matches_pytorch_crf(emissions, mask, triton_path.log_partition)


@pytest.mark.parametrize("steps", [1, 2, 5])
def test_log_partition_is_the_sum_over_every_path(steps):
    emissions, mask = ragged(4, steps, 3, scale=2.0)
    start, transitions, end = (torch.randn(*shape) for shape in ((3,), (3, 3), (3,)))
    log_z = triton_path.log_partition(emissions, mask, start, transitions, end)
    for b in range(4):
        n = int(mask[b].sum())
        scores = []
        for path in itertools.product(range(3), repeat=n):
            total = start[path[0]] + emissions[b, 0, path[0]] + end[path[-1]]
            total = total + sum(transitions[path[t - 1], path[t]] + emissions[b, t, path[t]] for t in range(1, n))
            scores.append(total)
        torch.testing.assert_close(log_z[b], torch.logsumexp(torch.stack(scores), 0), rtol=1e-6, atol=1e-5)


def test_forbidden_moves_and_other_dtypes():
    """-inf transitions (a move no path takes) give no NaN in the value or the gradients; float64 emissions come back
    in float64 (computed in float32), as the scan gives them."""
    emissions, mask = ragged(5, 8, 6, seed=3)
    emissions = emissions.double().requires_grad_(True)
    start, transitions, end = (torch.randn(*shape, dtype=torch.float64) for shape in ((6,), (6, 6), (6,)))
    transitions[0, 1] = transitions[2, 2] = float("-inf")
    transitions.requires_grad_(True)
    ours = triton_path.log_partition(emissions, mask, start, transitions, end)
    want = crf_scan.log_partition(emissions, mask, start, transitions, end)
    assert ours.dtype == torch.float64
    torch.testing.assert_close(ours, want, rtol=1e-6, atol=1e-5)
    got_grads = torch.autograd.grad(ours.sum(), (emissions, transitions))
    want_grads = torch.autograd.grad(want.sum(), (emissions, transitions))
    for got, expected in zip(got_grads, want_grads):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert got_grads[1][0, 1] == 0 and got_grads[1][2, 2] == 0


def test_the_likelihood_reads_nothing_on_the_host():
    emissions, mask = ragged(4, 7, 5)
    start, transitions, end = (torch.randn(*shape, requires_grad=True) for shape in ((5,), (5, 5), (5,)))
    tags = torch.randint(0, 5, (4, 7))
    emissions.requires_grad_(True)
    with count_host_reads() as reads, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        crf_scan.nll(emissions, tags, mask, start, transitions, end, partition=triton_path.log_partition).backward()
    assert reads.total == 0, reads.where


def test_the_path_is_the_gpus_first_choice_and_says_why_not_elsewhere():
    emissions, _ = ragged(2, 3, 5)
    assert paths.PATHS[0].name == "triton" and paths.named("triton").log_partition is triton_path.log_partition
    assert paths.named("triton").viterbi is crf_scan.viterbi
    assert "CUDA" in paths.named("triton").why_not(emissions)
    assert paths.choose(emissions).name != "triton"  # the CPU keeps its compiled kernels (or the loop)
    assert paths.choose(emissions.to("meta")).name == "scan"


needs_cuda = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]


@needs_cuda[0]
@needs_cuda[1]
@pytest.mark.parametrize("tags", [9, 37, 64])
def test_cuda_the_kernels_give_the_scans_likelihood_and_gradients(tags):
    """On a GPU, compiled: the CRF takes the kernels, and they give the scan's value and gradients."""
    emissions, mask = ragged(32, 40, tags, seed=tags)
    emissions, mask = emissions.cuda().requires_grad_(True), mask.cuda()
    params = [torch.randn(*shape, device="cuda", requires_grad=True) for shape in ((tags,), (tags, tags), (tags,))]
    assert paths.choose(emissions).name == "triton"
    ours = triton_path.log_partition(emissions, mask, *params)
    want = crf_scan.log_partition(emissions, mask, *params)
    torch.testing.assert_close(ours, want, rtol=1e-5, atol=1e-4)
    for got, expected in zip(torch.autograd.grad(ours.sum(), [emissions, *params]),
                             torch.autograd.grad(want.sum(), [emissions, *params])):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


def test_the_crf_module_on_the_path_trains_and_evaluates(monkeypatch):
    """``CRF.nll`` through the path (as a GPU takes it), with gradients and under ``inference_mode`` (validation)."""
    from onlstm_tasks.modules import CRF

    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    crf = CRF(len(labels), labels, "iob2")
    emissions, mask = ragged(4, 6, len(labels), seed=5)
    tags = torch.randint(0, len(labels), (4, 6))
    expected = crf.nll(emissions, tags, mask)  # the CPU's path
    triton = paths.named("triton")
    monkeypatch.setattr(paths, "choose", lambda emissions: triton)
    loss = crf.nll(emissions.requires_grad_(True), tags, mask)
    loss.backward()
    torch.testing.assert_close(loss, expected, rtol=1e-6, atol=1e-5)
    assert crf.crf.transitions.grad is not None and emissions.grad is not None
    with torch.inference_mode():
        torch.testing.assert_close(crf.nll(emissions, tags, mask), expected.detach(), rtol=1e-6, atol=1e-5)
