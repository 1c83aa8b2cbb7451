"""The CRF with no time loop in Python (:mod:`onlstm_tasks.modules.crf.scan`, and on the CPU the compiled
forward-backward kernels of :mod:`onlstm_tasks.modules.crf.compiled`) against brute-force enumeration and pytorch-crf's
per-step loop (the oracle of the likelihood and its gradients), and the Viterbi scan against enumeration and the
per-step decoder, constraints included; no host read in the loss."""

import itertools

import pytest
import torch
import torchcrf

from onlstm_tasks import native
from helpers.crf import assert_likelihood_matches_pytorch_crf
from helpers.host_reads import count_host_reads
from onlstm_tasks.modules import CRF
from onlstm_tasks.modules.crf import compiled as crf_cpu
from onlstm_tasks.modules.crf import scan as crf_scan
from onlstm_tasks.modules.crf import viterbi_decode
from onlstm_tasks.modules.crf.paths import choose

IOBES = ["O", "B-PER", "I-PER", "E-PER", "S-PER"]


def ragged(batch, steps, tags, dtype=torch.float64, scale=2.0, seed=0):
    generator = torch.Generator().manual_seed(seed)
    emissions = torch.randn(batch, steps, tags, dtype=dtype, generator=generator) * scale
    lengths = torch.randint(1, steps + 1, (batch,), generator=generator)
    lengths[0] = steps
    mask = torch.arange(steps) < lengths[:, None]
    params = [torch.randn(*shape, dtype=dtype, generator=generator) for shape in ((tags,), (tags, tags), (tags,))]
    return emissions, mask, params


def score(emissions, path, start, transitions, end):
    """One sentence's path score, in plain Python."""
    total = start[path[0]] + emissions[0, path[0]]
    for t in range(1, len(path)):
        total = total + transitions[path[t - 1], path[t]] + emissions[t, path[t]]
    return total + end[path[-1]]


@pytest.mark.parametrize("steps", [1, 2, 5])
def test_log_partition_is_the_sum_over_every_path(steps):
    emissions, mask, (start, transitions, end) = ragged(4, steps, 3)
    log_z = crf_scan.log_partition(emissions, mask, start, transitions, end)
    for b in range(4):
        n = int(mask[b].sum())
        scores = torch.stack([score(emissions[b, :n], p, start, transitions, end)
                              for p in itertools.product(range(3), repeat=n)])
        assert torch.allclose(log_z[b], torch.logsumexp(scores, 0), atol=1e-10)


@pytest.mark.parametrize("batch,steps,tags", [(3, 1, 4), (6, 9, 5), (8, 17, 37), (2, 64, 7)])
def test_likelihood_and_gradients_match_pytorch_crf(batch, steps, tags):
    emissions, mask, _ = ragged(batch, steps, tags, scale=3.0)
    oracle = torchcrf.CRF(tags, batch_first=True).double()
    for p in oracle.parameters():
        torch.nn.init.normal_(p, 0.0, 2.0)
    gold = torch.randint(0, tags, (batch, steps)).masked_fill(~mask, -100)
    emissions.requires_grad_(True)
    inputs = [emissions, oracle.start_transitions, oracle.transitions, oracle.end_transitions]
    expected = -oracle(emissions, gold.masked_fill(~mask, 0), mask=mask, reduction="mean")
    expected_grads = torch.autograd.grad(expected, inputs, allow_unused=True)
    ours = crf_scan.nll(emissions, gold, mask, oracle.start_transitions, oracle.transitions, oracle.end_transitions)
    grads = torch.autograd.grad(ours, inputs, allow_unused=True)
    assert torch.allclose(ours, expected, atol=1e-10)
    for got, want in zip(grads, expected_grads):
        if want is None:  # one step: no transition is used
            assert got is None or not got.any()
        else:
            assert torch.allclose(got, want, atol=1e-10)


def test_large_float32_scores_stay_finite_and_exact():
    emissions, mask, (start, transitions, end) = ragged(16, 30, 9, dtype=torch.float32, scale=60.0)
    ours = crf_scan.log_partition(emissions, mask, start, transitions, end)
    wide = crf_scan.log_partition(*(t.double() for t in (emissions,)), mask, start.double(), transitions.double(),
                                  end.double())
    assert torch.isfinite(ours).all()
    assert torch.allclose(ours.double(), wide, rtol=1e-6)


@pytest.mark.parametrize("steps", [1, 3, 5])
def test_viterbi_scan_is_the_best_path_under_constraints(steps):
    crf = CRF(len(IOBES), IOBES, "iobes").double()
    emissions, mask, params = ragged(5, steps, len(IOBES), seed=steps)
    with torch.no_grad():
        for p, value in zip((crf.crf.start_transitions, crf.crf.transitions, crf.crf.end_transitions), params):
            p.copy_(value)
    with torch.no_grad():
        start, transitions, end = crf.constrained_parameters()
    path, best = crf_scan.viterbi(emissions, mask, start, transitions, end)
    for b in range(5):
        n = int(mask[b].sum())
        candidates = {p: score(emissions[b, :n], p, start, transitions, end)
                      for p in itertools.product(range(len(IOBES)), repeat=n)}
        want = max(candidates, key=lambda p: float(candidates[p]))
        assert tuple(path[b, :n].tolist()) == want
        assert torch.allclose(best[b], candidates[want])
        assert (path[b, n:] == path[b, n - 1]).all()  # padding repeats the last tag


def test_viterbi_scan_agrees_with_the_per_step_decoder():
    emissions, mask, (start, transitions, end) = ragged(32, 40, 37, dtype=torch.float32, seed=3)
    scan_path, scan_best = crf_scan.viterbi(emissions, mask, start, transitions, end)
    loop_path, loop_best = viterbi_decode(emissions, mask, start, transitions, end)
    assert torch.equal(scan_path, loop_path)
    assert torch.allclose(scan_best, loop_best, atol=1e-4)


def test_the_crf_loss_reads_nothing_on_the_host():
    crf = CRF(len(IOBES), IOBES, "iobes")
    emissions, mask, _ = ragged(4, 7, len(IOBES), dtype=torch.float32)
    tags = torch.randint(0, len(IOBES), (4, 7))
    emissions.requires_grad_(True)
    with count_host_reads() as reads:
        crf.nll(emissions, tags, mask).backward()
    assert reads.total == 0, reads.where


NOT_BUILT = "the compiled kernels were not built (no C++ compiler, or torch absent, at install time?)"
needs_compiled = [pytest.mark.compiled, pytest.mark.skipif(not native.available(), reason=NOT_BUILT)]


def compiled_test(test):
    for mark in reversed(needs_compiled):
        test = mark(test)
    return test


@compiled_test
@pytest.mark.parametrize("batch,steps,tags", [(3, 1, 4), (8, 17, 37), (5, 9, 5)])
def test_the_compiled_kernels_give_pytorch_crfs_likelihood_and_gradients(batch, steps, tags):
    emissions, mask, _ = ragged(batch, steps, tags, dtype=torch.float32, scale=3.0, seed=batch)
    assert_likelihood_matches_pytorch_crf(emissions, mask, crf_cpu.log_partition)


@compiled_test
def test_the_crf_takes_the_compiled_kernels_on_the_cpu_and_they_pass_opcheck():
    emissions, mask, _ = ragged(4, 7, len(IOBES), dtype=torch.float32)
    assert choose(emissions).log_partition is crf_cpu.log_partition
    assert choose(emissions).viterbi is viterbi_decode  # the loop decodes faster on the CPU
    assert choose(emissions.double()).log_partition is None  # pytorch-crf's loop
    assert choose(emissions.to("meta")).log_partition is crf_scan.log_partition  # any other device
    assert choose(emissions.to("meta")).viterbi is crf_scan.viterbi
    leaves = [t.requires_grad_() for t in (emissions, *(torch.randn(*s) for s in ((5,), (5, 5), (5,))))]
    torch.library.opcheck(crf_cpu.crf_log_partition, (leaves[0], mask.sum(1), *leaves[1:]))
