"""Model invariants every task's tests check (a helper module, not a test file).

* :func:`assert_gradients_reach_every_parameter`: one backward pass gives every trainable parameter a
  finite, non-zero gradient (a parameter without one is dead weight, and breaks DDP).
* :func:`assert_batched_equals_single`: what a model predicts for an example does not depend on the other
  examples of its batch, i.e. padding changes nothing.
* :func:`assert_checkpoint_round_trip`: a Lightning checkpoint rebuilds the module from its saved
  hyper-parameters alone (no data module) with identical weights and identical outputs.

The helpers are task-agnostic: the caller supplies the loss, the collate and predict functions, or the
function computing outputs from a module.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

M = TypeVar("M", bound=nn.Module)


def assert_gradients_reach_every_parameter(module: nn.Module, loss: torch.Tensor) -> None:
    """Backpropagate ``loss`` and require a non-None, finite, not-all-zero gradient on every trainable parameter.

    Gradients already stored on ``module`` are cleared first, so only ``loss`` counts. Use dropout 0 (or a fixed
    seed) with tiny models: a dropout mask can zero a small parameter's gradient by chance.
    """
    if loss.dim() != 0:
        raise ValueError(f"loss must be a scalar, got shape {tuple(loss.shape)}")
    if not torch.isfinite(loss):
        raise AssertionError(f"the loss is not finite: {loss.item()}")
    module.zero_grad(set_to_none=True)
    loss.backward()
    trainable = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
    assert trainable, "the module has no trainable parameters"
    missing = [name for name, p in trainable if p.grad is None]
    zero = [name for name, p in trainable if p.grad is not None and not bool(p.grad.ne(0).any())]
    not_finite = [name for name, p in trainable if p.grad is not None and not bool(torch.isfinite(p.grad).all())]
    problems = [f"{what}: {names}" for what, names in
                (("no gradient", missing), ("all-zero gradient", zero), ("non-finite gradient", not_finite)) if names]
    assert not problems, "parameters the loss does not train properly -- " + "; ".join(problems)


def assert_outputs_equal(actual: Any, expected: Any, where: str = "output", atol: float = 1e-5,
                         rtol: float = 1e-4) -> None:
    """Recursive comparison: tensors (and floats) with tolerance, dicts/lists/tuples element-wise, rest by ``==``."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{where}: expected a tensor, got {type(actual).__name__}"
        assert actual.shape == expected.shape, f"{where}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
        if expected.is_floating_point():
            torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, msg=lambda m: f"{where}: {m}")
        else:
            assert torch.equal(actual, expected), f"{where}: {actual.tolist()} != {expected.tolist()}"
    elif isinstance(expected, Mapping):
        assert isinstance(actual, Mapping) and set(actual) == set(expected), (
            f"{where}: keys {sorted(actual) if isinstance(actual, Mapping) else type(actual)} != {sorted(expected)}")
        for key in expected:
            assert_outputs_equal(actual[key], expected[key], f"{where}[{key!r}]", atol, rtol)
    elif isinstance(expected, (list, tuple)):
        assert isinstance(actual, (list, tuple)) and len(actual) == len(expected), (
            f"{where}: {actual!r} != {expected!r}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_outputs_equal(a, e, f"{where}[{i}]", atol, rtol)
    elif isinstance(expected, float):
        assert math.isclose(actual, expected, rel_tol=rtol, abs_tol=atol), f"{where}: {actual} != {expected}"
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def assert_batched_equals_single(
    predict: Callable[[Any], Sequence[Any]],
    collate: Callable[[Sequence[Any]], Any],
    examples: Sequence[Any],
    atol: float = 1e-5,
    rtol: float = 1e-4,
) -> None:
    """Predictions for ``collate(examples)`` equal those for ``collate([example])`` of every example alone.

    ``predict(batch)`` returns one output per example (tensors cut to the example's real length, label lists,
    dicts of those, ...); call it on a module in eval mode. Give examples of different lengths so the batch
    holds padding. Tensors are compared with tolerance, everything else exactly.
    """
    assert len(examples) > 1, "give at least two examples (of different lengths) so the batch is padded"
    batched = list(predict(collate(list(examples))))
    assert len(batched) == len(examples), f"predict returned {len(batched)} outputs for {len(examples)} examples"
    for i, example in enumerate(examples):
        alone = list(predict(collate([example])))
        assert len(alone) == 1, f"predict returned {len(alone)} outputs for one example"
        assert_outputs_equal(batched[i], alone[0], f"example {i} (batched vs alone)", atol, rtol)


def save_checkpoint(module: nn.Module, path: str | Path) -> Path:
    """Write a Lightning checkpoint of ``module`` as ``Trainer.fit`` would (weights + hyper-parameters), untrained."""
    import lightning.pytorch as pl

    trainer = pl.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, max_epochs=0, accelerator="cpu", devices=1)
    trainer.strategy.connect(module)
    trainer.save_checkpoint(path)
    return Path(path)


def assert_checkpoint_round_trip(
    module_cls: type[M],
    module: M,
    tmp_path: str | Path,
    outputs: Callable[[M], Any],
    atol: float = 1e-6,
    rtol: float = 1e-5,
) -> M:
    """Save ``module`` as a Lightning checkpoint, reload it with ``module_cls.load_from_checkpoint`` and compare.

    The reloaded module must be a ``module_cls`` with the same hyper-parameters, the same state dict (names,
    shapes, values) and, in eval mode, the same ``outputs(module)`` (e.g. the logits of a fixed batch). Both
    modules are left in eval mode; the reloaded one is returned.
    """
    path = save_checkpoint(module, Path(tmp_path) / f"{module_cls.__name__}.ckpt")
    # our own file: full unpickling allowed (hyper-parameters may hold factories such as functools.partial)
    loaded = module_cls.load_from_checkpoint(path, map_location="cpu", weights_only=False)
    assert type(loaded) is module_cls, f"reloaded a {type(loaded).__name__}, expected {module_cls.__name__}"
    assert set(loaded.hparams) == set(module.hparams), f"hparams {sorted(loaded.hparams)} != {sorted(module.hparams)}"
    for key, value in module.hparams.items():
        if isinstance(value, (str, int, float, bool, list, tuple, dict, type(None))):
            assert loaded.hparams[key] == value, f"hparam {key!r}: {loaded.hparams[key]!r} != {value!r}"
    original, reloaded = module.state_dict(), loaded.state_dict()
    assert list(reloaded) == list(original), f"state dict keys differ: {set(reloaded) ^ set(original)}"
    for name, tensor in original.items():
        assert reloaded[name].shape == tensor.shape, (
            f"{name}: shape {tuple(reloaded[name].shape)} != {tuple(tensor.shape)}")
        assert torch.equal(reloaded[name], tensor), f"{name}: values differ after reloading"
    module.eval()
    loaded.eval()
    with torch.no_grad():
        assert_outputs_equal(outputs(loaded), outputs(module), "reloaded vs original", atol, rtol)
    return loaded


def assert_a_step_lowers_the_loss(model: nn.Module, batch: Any, lr: float = 0.1) -> None:
    """Every parameter gets a gradient from ``model.training_step(batch, 0)``, and one SGD step lowers that loss."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    loss = model.training_step(batch, 0)
    assert_gradients_reach_every_parameter(model, loss)
    optimizer.step()
    with torch.no_grad():
        assert model.training_step(batch, 0) < loss
