"""The recurrent-encoder tests' shared batch and invariants: a padded batch with mixed lengths (one row full, one of
length 1), padding invariance, and a cell with random biases."""

from __future__ import annotations

import torch

LENGTHS = [6, 3, 1, 5]


def mixed_batch(dtype=torch.float64, features=5, seed=0, lengths=LENGTHS):
    """``(x [B, T, features], mask [B, T] bool)``: random inputs, left-aligned mask of ``lengths``."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(len(lengths), max(lengths), features, generator=g, dtype=dtype)
    mask = torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]
    return x, mask


def random_bias_cell(cls, *args, seed: int, bound: float = 1.0, **options):
    """A float64 ``cls(*args, **options)`` built after ``torch.manual_seed(seed)``, its biases uniform in
    [-bound, bound] (gates away from their initial values, so every term of the equations matters)."""
    torch.manual_seed(seed)
    cell = cls(*args, **options).double()
    with torch.no_grad():
        cell.bias.uniform_(-bound, bound)
    return cell


def assert_padding_invariant(enc, x: torch.Tensor, mask: torch.Tensor, noise_atol: float = 0.0):
    """Every layer is zero at padding and unchanged by garbage there (up to ``noise_atol``), and each row equals the
    row run alone without padding. Returns the output over ``(x, mask)``."""
    out = enc(x, mask)
    noisy = enc(torch.where(mask[..., None], x, 100 * torch.randn_like(x)), mask)
    assert out.hidden.shape == (*x.shape[:2], enc.output_size)
    for layer, layer_noisy in zip(out.layers, noisy.layers):
        assert bool((layer[~mask] == 0).all())
        torch.testing.assert_close(layer, layer_noisy, rtol=0, atol=noise_atol)
    for b, n in enumerate(mask.sum(1).tolist()):
        alone = enc(x[b : b + 1, :n])
        for layer, layer_alone in zip(out.layers, alone.layers):
            torch.testing.assert_close(layer[b, :n], layer_alone[0], rtol=1e-12, atol=1e-12)
    return out
