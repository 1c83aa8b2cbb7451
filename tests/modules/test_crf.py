import itertools
import warnings

import pytest
import torch
import torchcrf

from helpers.tags import valid_sequence

from onlstm_tasks.modules import CRF

IOB2 = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
IOBES = ["O", "B-PER", "I-PER", "E-PER", "S-PER"]
IOBES2 = ["O", "B-PER", "I-PER", "E-PER", "S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC"]


def path_score(crf, emissions, tags):
    """Unnormalised score of one tag sequence (plain Python over one sentence)."""
    p = crf.crf
    score = p.start_transitions[tags[0]] + emissions[0, tags[0]]
    for t in range(1, len(tags)):
        score = score + p.transitions[tags[t - 1], tags[t]] + emissions[t, tags[t]]
    return score + p.end_transitions[tags[-1]]


def random_crf(num_tags, labels=None, scheme=None, scale=1.0, seed=0):
    torch.manual_seed(seed)
    crf = CRF(num_tags, labels, scheme).double()
    with torch.no_grad():
        for p in crf.parameters():
            p.normal_(0.0, scale)
    return crf


def random_batch(batch, steps, num_tags, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    emissions = torch.randn(batch, steps, num_tags, generator=g, dtype=dtype)
    lengths = torch.randint(1, steps + 1, (batch,), generator=g)
    lengths[0] = steps
    mask = torch.arange(steps)[None, :] < lengths[:, None]
    tags = torch.randint(0, num_tags, (batch, steps), generator=g).masked_fill(~mask, -100)
    return emissions, tags, mask


@torch.no_grad()
def test_nll_equals_brute_force_log_sum_exp():
    crf = random_crf(4)
    emissions, tags, mask = random_batch(5, 4, 4)
    expected = []
    for b in range(5):
        n = int(mask[b].sum())
        all_scores = torch.stack([path_score(crf, emissions[b], seq)
                                  for seq in itertools.product(range(4), repeat=n)])
        gold = path_score(crf, emissions[b], tags[b, :n].tolist())
        expected.append(torch.logsumexp(all_scores, 0) - gold)
    torch.testing.assert_close(crf.nll(emissions, tags, mask), torch.stack(expected).mean())


def test_nll_ignores_padded_tags_raises_no_warning_and_has_gradients():
    crf = random_crf(5)
    emissions, tags, mask = random_batch(6, 7, 5)
    emissions.requires_grad_(True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss = crf.nll(emissions, tags, mask)
        loss.backward()
    assert torch.equal(loss, crf.nll(emissions, tags.masked_fill(~mask, 3), mask))
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in crf.parameters())
    assert emissions.grad[~mask].abs().sum() == 0 and emissions.grad[mask].abs().sum() > 0


@pytest.mark.parametrize("seed", range(3))
def test_unconstrained_viterbi_equals_pytorch_crf(seed, one_thread):
    crf = random_crf(7, seed=seed).float()
    emissions, _, mask = random_batch(16, 12, 7, seed=seed, dtype=torch.float32)
    decoded = crf.decode(emissions, mask, pad_value=-1)
    reference = crf.crf.decode(emissions, mask)
    assert decoded.dtype == torch.long and decoded.shape == mask.shape
    for b, ref in enumerate(reference):
        assert decoded[b, : len(ref)].tolist() == ref
    assert bool((decoded[~mask] == -1).all())


def test_unconstrained_viterbi_equals_pytorch_crf_at_ner_sizes(one_thread):
    # 37 tags (OntoNotes IOB2), length 40, float32
    crf = random_crf(37, seed=5).float()
    with torch.no_grad():
        crf.crf.transitions.mul_(0.5)
    for seed in range(6):
        emissions, _, mask = random_batch(32, 40, 37, seed=seed, dtype=torch.float32)
        reference = crf.crf.decode(emissions, mask)
        decoded = crf.decode(emissions, mask)
        assert [row[: len(ref)].tolist() for row, ref in zip(decoded, reference)] == reference


def test_edge_shapes():
    crf = CRF(3)
    assert crf.decode(torch.randn(4, 1, 3), torch.ones(4, 1, dtype=torch.bool)).shape == (4, 1)
    assert crf.decode(torch.randn(0, 5, 3), torch.ones(0, 5, dtype=torch.bool)).shape == (0, 5)


@pytest.mark.parametrize("labels, scheme", [(IOB2, None), (IOB2, "iob2"), (IOBES, None), (IOBES, "iobes")])
def test_viterbi_equals_brute_force_argmax(labels, scheme, one_thread):
    num_tags = len(labels)
    crf = random_crf(num_tags, labels if scheme else None, scheme, scale=2.0)
    emissions, _, mask = random_batch(6, 4, num_tags, seed=1)
    emissions = emissions * 3
    decoded = crf.decode(emissions, mask)
    for b in range(6):
        n = int(mask[b].sum())
        candidates = [seq for seq in itertools.product(range(num_tags), repeat=n)
                      if scheme is None or valid_sequence(scheme, [labels[i] for i in seq])]
        with torch.no_grad():
            best = max(candidates, key=lambda seq: float(path_score(crf, emissions[b], seq)))
        assert decoded[b, :n].tolist() == list(best)
        assert decoded[b, n:].eq(0).all()
    if scheme is not None:  # the constraints changed at least one path here
        assert crf.crf.decode(emissions, mask) != [row[:n].tolist() for row, n in zip(decoded, mask.sum(1))]


@pytest.mark.parametrize("labels, scheme", [(IOB2, "iob2"), (IOBES2, "iobes")])
def test_constrained_decode_never_returns_an_invalid_sequence(labels, scheme, one_thread):
    num_tags = len(labels)
    crf = random_crf(num_tags, labels, scheme, scale=1e4, seed=2)  # huge random transitions
    emissions, _, mask = random_batch(64, 9, num_tags, seed=3)
    emissions = emissions * 1e4
    inside = [i for i, label in enumerate(labels) if label[0] in "IE"]
    emissions[:, 0, inside] += 1e6  # the first token wants I-/E- (invalid starts)
    with torch.no_grad():  # and the learned transitions favour B-PER -> I-LOC / B-PER -> S-PER
        crf.crf.transitions[labels.index("B-PER"), labels.index("I-LOC" if scheme == "iob2" else "S-LOC")] = 1e7
        crf.crf.end_transitions[labels.index("B-PER")] = 1e7
    decoded = crf.decode(emissions, mask)
    for b in range(64):
        tags = [labels[i] for i in decoded[b, : int(mask[b].sum())]]
        assert valid_sequence(scheme, tags), tags
    # the same inputs give invalid paths without the constraints
    unconstrained = crf.crf.decode(emissions, mask)
    assert not all(valid_sequence(scheme, [labels[i] for i in seq]) for seq in unconstrained)


def test_constraints_follow_the_module_and_stay_out_of_the_state_dict():
    crf = CRF(len(IOBES), IOBES, "iobes")
    assert set(crf.state_dict()) == {"crf.start_transitions", "crf.end_transitions", "crf.transitions"}
    plain = CRF(len(IOBES))
    plain.load_state_dict(crf.state_dict())
    assert crf.constrained and not plain.constrained
    assert crf.double().allowed.dtype == torch.bool


def test_pytorch_crf_parameters_are_the_ones_used():
    crf = CRF(3)
    assert isinstance(crf.crf, torchcrf.CRF) and crf.crf.batch_first
    assert len(list(crf.parameters())) == 3


def test_bad_inputs_are_refused():
    crf = CRF(len(IOB2), IOB2, "iob2")
    emissions = torch.randn(2, 3, len(IOB2))
    with pytest.raises(ValueError, match="bool"):
        crf.decode(emissions, torch.ones(2, 3, dtype=torch.uint8))
    with pytest.raises(ValueError, match="left-aligned"):
        crf.decode(emissions, torch.tensor([[True, False, True], [True, True, True]]))
    with pytest.raises(ValueError, match="at least one"):
        crf.decode(emissions, torch.tensor([[False, False, False], [True, True, True]]))
    with pytest.raises(ValueError, match="labels"):
        CRF(4, IOB2, "iob2")
    with pytest.raises(ValueError, match="both"):
        CRF(5, IOB2)
    with pytest.raises(ValueError, match="every length"):
        CRF(3, ["B-PER", "I-PER", "E-PER"], "iobes")
