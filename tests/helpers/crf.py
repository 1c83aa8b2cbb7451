"""A CRF likelihood against pytorch-crf's (the oracle), for the tests of each path that computes it."""

from __future__ import annotations

import torch
import torchcrf

from onlstm_tasks.modules.crf import scan as crf_scan


def assert_likelihood_matches_pytorch_crf(emissions: torch.Tensor, mask: torch.Tensor, partition) -> None:
    """The mean negative log-likelihood of random gold tags with ``partition`` as the log-partition
    (:func:`onlstm_tasks.modules.crf.scan.nll`), and its gradients in the emissions and every CRF parameter, equal
    pytorch-crf's (float32 tolerances). pytorch-crf's parameters are drawn from the global RNG."""
    batch, steps, tags = emissions.shape
    oracle = torchcrf.CRF(tags, batch_first=True)
    for p in oracle.parameters():
        torch.nn.init.normal_(p, 0.0, 2.0)
    gold = torch.randint(0, tags, (batch, steps))
    emissions = emissions.detach().requires_grad_(True)
    inputs = [emissions, oracle.start_transitions, oracle.transitions, oracle.end_transitions]
    expected = -oracle(emissions, gold, mask=mask, reduction="mean")
    expected_grads = torch.autograd.grad(expected, inputs, allow_unused=True)
    ours = crf_scan.nll(emissions, gold, mask, *inputs[1:], partition=partition)
    grads = torch.autograd.grad(ours, inputs, allow_unused=True)
    torch.testing.assert_close(ours, expected, rtol=1e-6, atol=1e-5)
    for got, want in zip(grads, expected_grads):  # one step: no transition is used
        torch.testing.assert_close(got, torch.zeros_like(got) if want is None else want, rtol=1e-5, atol=1e-5)
