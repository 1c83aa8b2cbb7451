"""The ON-LSTM's equations, written once: gate layout, master gates (cumax and its variants), the cell update.

Every implementation points here. The plain reference cell (:mod:`.reference`, the test oracle) and
:meth:`ONLSTMCell.step <onlstm_tasks.encoders.onlstm.cell.ONLSTMCell.step>` call :func:`onlstm_update`; the fast
back ends compute the same update: the loop over length-sorted rows in the regrouped form below, with PyTorch
operations (:mod:`.backends.loop.steps_torch`) or C++ kernels (``onlstm_tasks/native/csrc/onlstm_cpu.cpp``), and the
Triton kernels (:mod:`.backends.triton.kernels`) in the form of :func:`ordered_cell_update`; all are tested against
:func:`onlstm_update` through the reference cell (``tests/encoders/test_onlstm_cell.py``, ``tests/encoders/test_onlstm_fast.py``,
``tests/encoders/test_onlstm_backends.py``, ``tests/encoders/test_onlstm_triton.py``).

Gate layout of the pre-activations ``W_ih x + b_ih + W_hh h + b_hh`` (the layout of the authors' ``ON_LSTM.py``),
``L = hidden_size / chunk_size`` levels of ``C = chunk_size`` neurons, ``H = L * C``, ``G = 4H + 2L`` rows:

    [ master input (L) | master forget (L) | output (H) | cell (H) | input (H) | forget (H) ]

where the four H-blocks are level-major: neuron ``k * C + j`` belongs to level ``k``.

One step (Shen et al., ICLR 2019, eqs. 9-14), each level's master gate value broadcast over its C neurons::

    f~ = cumax(master forget logits)                 non-decreasing over levels, ends at 1
    i~ = 1 - cumax(master input logits)   (paper)    non-increasing over levels, top level 0
       = reverse cumsum(softmax(logits))  (symmetric variant, bottom level 1)
    o, c^, i, f = sigmoid, tanh, sigmoid, sigmoid of their rows
    w   = f~ i~
    c_t = w (f c_{t-1} + i c^) + (f~ - w) c_{t-1} + (i~ - w) c^
    h_t = o tanh(c_t)

and the distances the encoders report are ``1 - mean(f~)`` (forget) and ``mean(i~)`` (input).

The fast back ends use the regrouped form of the same ``c_t`` (:func:`regrouped_cell_update`)::

    eff_in = i~ - w (1 - i),   eff_forget = f~ - w (1 - f),   c_t = eff_forget c_{t-1} + eff_in c^

with three rewrites that each save a pass over memory per step: the cell-candidate rows of the weights are doubled
and the input/forget rows negated, so that one ``sigmoid`` over the four H-blocks yields ``o``, ``sigmoid(2 g)`` and
``1 - i``, ``1 - f`` directly; and the cell state is kept doubled (``2 c``, ``2 c^``), so that
``tanh(c) = 2 sigmoid(2 c) - 1`` needs no extra multiply.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor
import torch.nn.functional as F

MASTER_INPUT_VARIANTS = ("paper", "symmetric")


class GateRows(NamedTuple):
    """Where each block of the pre-activations starts (see the module docstring): rows ``[0, forget_master)`` are
    the master input logits, ``[forget_master, output)`` the master forget logits, ``[output, cell)`` the output
    gate, ``[cell, input)`` the cell candidate, ``[input, forget)`` the input gate, ``[forget, G)`` the forget gate."""

    forget_master: int
    output: int
    cell: int
    input: int
    forget: int


def gate_rows(hidden_size: int, levels: int) -> GateRows:
    """The first row of each block of the ``4 * hidden_size + 2 * levels`` pre-activations."""
    output = 2 * levels
    return GateRows(levels, output, output + hidden_size, output + 2 * hidden_size, output + 3 * hidden_size)


def cumax(x: torch.Tensor) -> torch.Tensor:
    """cumax(x) = cumsum(softmax(x)) over the last dimension: non-decreasing, ending at 1."""
    return torch.cumsum(F.softmax(x, dim=-1), dim=-1)


def master_input_gate(logits: torch.Tensor, variant: str) -> torch.Tensor:
    """The master input gate i~, non-increasing over levels.

    ``paper``: ``1 - cumax(x)`` (its top level is always 0). ``symmetric``: the reverse cumulative sum of the
    softmax (the variant from the blog that popularised ON-LSTM; its bottom level is always 1).
    """
    if variant == "paper":
        return 1.0 - cumax(logits)
    if variant == "symmetric":
        return torch.flip(torch.cumsum(torch.flip(F.softmax(logits, dim=-1), [-1]), dim=-1), [-1])
    raise ValueError(f"master_input must be one of {MASTER_INPUT_VARIANTS}, got {variant!r}")


def ordered_cell_update(c_prev: Tensor, c_hat: Tensor, forget: Tensor, input: Tensor, master_forget: Tensor,
                        master_input: Tensor) -> Tensor:
    """The paper's soft update (eq. 14), every argument already broadcast to the cell's shape:

    omega = f~ * i~
    c_t   = omega * (f * c_{t-1} + i * c^) + (f~ - omega) * c_{t-1} + (i~ - omega) * c^
    """
    omega = master_forget * master_input
    return (
        omega * (forget * c_prev + input * c_hat)
        + (master_forget - omega) * c_prev
        + (master_input - omega) * c_hat
    )


def regrouped_cell_update(c_prev: Tensor, c_hat: Tensor, forget: Tensor, input: Tensor, master_forget: Tensor,
                          master_input: Tensor) -> Tensor:
    """:func:`ordered_cell_update` regrouped as the fast back ends compute it (one product per state):

    eff_in = i~ - w (1 - i),   eff_forget = f~ - w (1 - f),   c_t = eff_forget c_{t-1} + eff_in c^
    """
    omega = master_forget * master_input
    eff_in = master_input - omega * (1.0 - input)
    eff_forget = master_forget - omega * (1.0 - forget)
    return eff_forget * c_prev + eff_in * c_hat


def onlstm_update(
    pre: torch.Tensor, c_prev: torch.Tensor, chunk_size: int, master_input: str = "paper"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One ON-LSTM step from its pre-activations: every equation of the module docstring, plainly.

    ``pre`` [..., G] (``W_ih x + b_ih + W_hh h + b_hh``), ``c_prev`` [..., H], any leading dimensions (none for one
    vector, ``[B]`` for a batch). Returns ``(h_t [..., H], c_t [..., H], f~ [..., L], i~ [..., L])``.
    """
    hidden_size = c_prev.size(-1)
    levels = hidden_size // chunk_size
    rows = gate_rows(hidden_size, levels)
    mi_logits = pre[..., : rows.forget_master]
    mf_logits = pre[..., rows.forget_master : rows.output]
    o_pre, c_pre, i_pre, f_pre = pre[..., rows.output :].split(hidden_size, dim=-1)

    f_master = cumax(mf_logits)  # [..., L], non-decreasing
    i_master = master_input_gate(mi_logits, master_input)  # [..., L], non-increasing

    out_gate = torch.sigmoid(o_pre)
    c_hat = torch.tanh(c_pre)
    in_gate = torch.sigmoid(i_pre)
    forget_gate = torch.sigmoid(f_pre)

    # each level's master gate value covers chunk_size neurons
    f_master_full = f_master.repeat_interleave(chunk_size, dim=-1)
    i_master_full = i_master.repeat_interleave(chunk_size, dim=-1)
    c_t = ordered_cell_update(c_prev, c_hat, forget_gate, in_gate, f_master_full, i_master_full)
    h_t = out_gate * torch.tanh(c_t)
    return h_t, c_t, f_master, i_master
