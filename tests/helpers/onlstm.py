"""Shared helpers of the ON-LSTM layer tests: a ragged batch, a loss that reaches every output, and the comparisons
of an encoder with the reference cell (the oracle) and of the layer operator's back ends with each other."""

from __future__ import annotations

import torch

from onlstm_tasks.encoders.onlstm.layer_op import run_layer
from onlstm_tasks.encoders.onlstm.reference import reference_encode

TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-10}
# unsorted, with ties, shorter than T everywhere but row 1: exercises sorting, runs of steps on fewer rows and
# rows that keep stepping past their end inside a run
LENGTHS = [7, 9, 1, 8, 9, 5, 2, 8]


def batch(dtype, lengths=LENGTHS, steps=9, features=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lengths), steps, features, generator=g, dtype=dtype)
    mask = torch.arange(steps)[None, :] < torch.tensor(lengths)[:, None]
    return x, mask


def loss_fn(out_h, out_f, out_i, seed=1):
    """A loss that weights every output differently, so that every gradient path is exercised."""
    g = torch.Generator().manual_seed(seed)
    w_h = torch.randn(out_h.shape, generator=g, dtype=out_h.dtype)
    w_f = torch.randn(out_f.shape, generator=g, dtype=out_f.dtype)
    return (out_h * w_h).sum() + (out_f * w_f).sum() + out_i.pow(2).sum()


def compare_with_reference(enc, x, mask, recurrent_weights=None, fast_out=None, rtol=0.0):
    """Outputs and every gradient within TOLERANCE of the reference cell (plus ``rtol`` of the value: gradients
    summed over many positions in another order)."""
    tol = TOLERANCE[x.dtype]
    x = x.detach().requires_grad_()
    out = enc(x, mask) if fast_out is None else fast_out(x)
    ref = reference_encode(enc, x, mask, recurrent_weights=recurrent_weights)
    for got, want in zip((out.hidden, out.distances, out.input_distances), ref):
        torch.testing.assert_close(got, want, rtol=0, atol=tol)
    params = [x, *enc.parameters()]
    fast_grads = torch.autograd.grad(loss_fn(out.hidden, out.distances, out.input_distances), params)
    ref_grads = torch.autograd.grad(loss_fn(*ref), params)
    names = ["x", *(n for n, _ in enc.named_parameters())]
    for name, g_fast, g_ref in zip(names, fast_grads, ref_grads):
        torch.testing.assert_close(g_fast, g_ref, rtol=rtol, atol=tol, msg=lambda m: f"gradient of {name}: {m}")
    assert (fast_grads[0][~mask] == 0).all()


def layer_inputs(lengths: list[int], dirs: int, carry: bool, seed: int):
    """Random inputs of one layer (hidden 12, 3 levels, 5 features) over rows of ``lengths``: x, weight_ih, bias,
    weight_hh, then the initial state (``carry``) or None."""
    g = torch.Generator().manual_seed(seed)
    hidden, levels, features, steps = 12, 3, 5, max(lengths)
    gates = 4 * hidden + 2 * levels
    shapes = ((len(lengths), steps, features), (dirs, gates, features), (dirs, gates), (dirs, gates, hidden))
    args = [torch.randn(*shape, generator=g) for shape in shapes]
    state = tuple(torch.randn(dirs, len(lengths), hidden, generator=g) for _ in range(2)) if carry else None
    return args, state


def compare_layer_backends(backends, lengths, dirs, symmetric, carry, seed):
    """Every output (the final cell state too) and every gradient of the layer operator, equal within 2e-5 on the
    two back ends."""
    args, state = layer_inputs(lengths, dirs, carry, seed)
    results = []
    for backend in backends:
        leaves = [a.clone().requires_grad_() for a in args]
        h, d_f, d_i, c_last = run_layer(leaves[0], torch.tensor(lengths), *leaves[1:], symmetric, backend, state)
        loss = loss_fn(h, d_f, d_i) + (c_last * c_last.detach().sin()).sum()
        results.append((h, d_f, d_i, c_last, *torch.autograd.grad(loss, leaves)))
    for got, want in zip(*results):
        torch.testing.assert_close(got, want, rtol=0, atol=2e-5)


# which of the layer's outputs a loss reads: the others get no gradient (None reaches the back end's backward)
OUTPUT_SUBSETS = {"all": (0, 1, 2, 3), "hidden": (0,), "distances": (1, 2), "c_last": (3,)}


def compare_eager_with_operator(backend, lengths, dirs, symmetric, carry, seed, used):
    """:func:`run_layer` in eager mode (the plain autograd.Function) against a direct call of the registered
    operator ``torch.ops.onlstm_tasks.onlstm_layer``: the same outputs and gradients, bit for bit, where the loss reads
    only the outputs ``used`` (indices into ``h, forget, input, c_last``)."""
    args, state = layer_inputs(lengths, dirs, carry, seed)
    lengths = torch.tensor(lengths)
    results = []
    for eager in (True, False):
        leaves = [a.clone().requires_grad_() for a in args]
        if eager:
            outputs = run_layer(leaves[0], lengths, *leaves[1:], symmetric, backend, state)
            assert type(outputs[0].grad_fn).__name__ == "_EagerLayerBackward"  # not the operator
        else:
            h0, c0 = (None, None) if state is None else state
            outputs = torch.ops.onlstm_tasks.onlstm_layer(leaves[0], lengths, *leaves[1:], h0, c0, symmetric, backend,
                                                          True)[:4]
        g = torch.Generator().manual_seed(seed + 1)
        loss = sum((outputs[i] * torch.randn(outputs[i].shape, generator=g)).sum() for i in used)
        results.append((*outputs, *torch.autograd.grad(loss, leaves)))
    for got, want in zip(*results):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
