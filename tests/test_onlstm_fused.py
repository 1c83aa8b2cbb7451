"""The fused back end (``ONLSTM(backend="fused")``, :mod:`onlstm_tasks.encoders.onlstm.steps_fused`): each step's
element-wise work compiled by ``torch.compile``. On the CPU Inductor writes C++ for it, on a GPU Triton; the code
it compiles is the same, so the CPU tests check the function and the CUDA ones (marked ``cuda``; ``scripts/gpu_check.sh``
runs them with ONLSTM_REQUIRE_CUDA=1) check that a GPU runs it, picks it by default and never waits on the host
per step. Compiling costs tens of seconds on a CPU, so the CPU tests are marked slow.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from test_onlstm_backends import compare_layer_backends, layer_inputs, marked, needs_cuda
from test_onlstm_fast import batch, compare_with_reference, loss_fn

from onlstm_tasks.encoders import ONLSTM
from onlstm_tasks.encoders.onlstm.layer_op import fused_why_not, resolve_backend, run_layer
from onlstm_tasks.encoders.onlstm.reference import reference_encode



@pytest.mark.slow
@pytest.mark.parametrize("bidirectional,master_input", [(True, "paper"), (False, "symmetric")])
def test_the_fused_step_matches_the_reference_in_float32(bidirectional, master_input):
    """Outputs and every gradient (the distances' too) within 1e-5 of the reference cell, on a ragged batch."""
    torch.manual_seed(0)
    enc = ONLSTM(5, 12, 3, num_layers=2, bidirectional=bidirectional, master_input=master_input, backend="fused")
    x, mask = batch(torch.float32)
    compare_with_reference(enc, x, mask)


@pytest.mark.slow
@pytest.mark.parametrize("lengths,carry", [([6, 6, 6, 6], True), ([6, 2, 5, 1, 6, 3, 6, 4, 2], False)])
def test_the_fused_step_gives_the_pytorch_loop_outputs_and_gradients(lengths, carry):
    """Layer by layer, every output (the final cell state too) and gradient, from zeros or from a carried state."""
    compare_layer_backends(("fused", "torch"), lengths, 1, True, carry, seed=len(lengths))


@pytest.mark.slow
@pytest.mark.parametrize("lengths,carry", [([6, 6, 6, 6], True), ([6, 2, 5, 1, 6, 3, 6, 4, 2], False)])
def test_without_gradients_the_fused_step_gives_the_pytorch_loop_outputs(lengths, carry):
    """Inference keeps no per-step buffers (two cell slots): the same outputs, the final cell state included."""
    args, state = layer_inputs(lengths, 2, carry, seed=3)
    with torch.no_grad():
        got, want = (run_layer(args[0], torch.tensor(lengths), *args[1:], False, backend, state)
                     for backend in ("fused", "torch"))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=2e-5)


def test_the_fused_backend_is_chosen_only_where_it_can_run():
    x = torch.zeros(2, 3, 4)
    assert resolve_backend("fused", x) == "fused"
    assert resolve_backend("auto", x) in ("compiled", "torch")  # on the CPU, auto never compiles at run time
    meta = x.to("meta")
    assert fused_why_not(meta) == "the fused step runs on CUDA and CPU devices, not meta"
    with pytest.raises(ValueError, match="backend 'fused' cannot run here: the fused step runs on CUDA and CPU"):
        resolve_backend("fused", meta)


@marked(*needs_cuda)
@pytest.mark.parametrize("backend", ["auto", "fused", "torch"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_cuda_backends_match_the_reference(backend, bidirectional):
    """On a GPU ("auto" is the fused step where Triton is installed): outputs and gradients within 1e-5 of the
    reference cell run on the CPU."""
    torch.manual_seed(0)
    enc = ONLSTM(5, 12, 3, num_layers=2, bidirectional=bidirectional, backend=backend)
    x, mask = batch(torch.float32)
    x = x.requires_grad_()
    ref = reference_encode(enc, x, mask)
    ref_grads = torch.autograd.grad(loss_fn(*ref), [x, *enc.parameters()])
    enc = enc.cuda()
    xg = x.detach().cuda().requires_grad_()
    out = enc(xg, mask.cuda())
    grads = torch.autograd.grad(loss_fn(out.hidden.cpu(), out.distances.cpu(), out.input_distances.cpu()),
                                [xg, *enc.parameters()])
    for got, want in zip((out.hidden, out.distances, out.input_distances, *grads), (*ref, *ref_grads)):
        torch.testing.assert_close(got.cpu(), want, rtol=0, atol=1e-5)


@marked(*needs_cuda)
def test_cuda_auto_is_the_fused_step():
    assert resolve_backend("auto", torch.zeros(1, device="cuda")) == "fused"


@marked(*needs_cuda)
@pytest.mark.parametrize("backend", ["fused", "torch"])
def test_cuda_host_syncs_do_not_grow_with_the_steps(backend):
    """The time loop never waits on the GPU: a layer reads its rows' lengths once per call, so a forward and
    backward pass syncs as often over 32 steps as over 8."""
    torch.manual_seed(2)
    enc = ONLSTM(16, 32, 8, num_layers=2, bidirectional=True, backend=backend).cuda()

    def syncs(steps: int) -> int:
        x = torch.randn(4, steps, 16, device="cuda", requires_grad=True)
        mask = torch.arange(steps, device="cuda")[None] < torch.tensor([steps, steps - 1, 3, 1], device="cuda")[:, None]
        enc(x, mask).hidden.sum().backward()  # compiles (first call) outside the count
        torch.cuda.synchronize()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                enc(x, mask).hidden.sum().backward()
            finally:
                torch.cuda.set_sync_debug_mode("default")
        return sum("synchronizing" in str(w.message) for w in caught)

    assert syncs(32) == syncs(8)
