"""Parameters of one ON-LSTM direction and its batched time loop (the fast path)."""

from __future__ import annotations

import torch
from torch import nn

from .gates import MASTER_INPUT_VARIANTS, cumax, master_input_gate


class ONLSTMCell(nn.Module):
    """One direction of one ON-LSTM layer.

    Parameters (the layout of the authors' ``ON_LSTM.py``; ``L = hidden_size / chunk_size`` levels, ``G = 4H + 2L``):
    ``weight_ih`` [G, input_size], ``bias_ih`` [G], ``weight_hh`` [G, H], ``bias_hh`` [G], rows ordered

        [ master input (L) | master forget (L) | output (H) | cell (H) | input (H) | forget (H) ]

    where the four H-blocks are level-major: neuron ``k * chunk_size + j`` belongs to level ``k``.
    """

    def __init__(self, input_size: int, hidden_size: int, chunk_size: int, master_input: str = "paper") -> None:
        super().__init__()
        if chunk_size <= 0 or hidden_size <= 0 or hidden_size % chunk_size:
            raise ValueError(
                f"hidden_size must be a positive multiple of chunk_size, got hidden_size={hidden_size}, "
                f"chunk_size={chunk_size}"
            )
        if master_input not in MASTER_INPUT_VARIANTS:
            raise ValueError(f"master_input must be one of {MASTER_INPUT_VARIANTS}, got {master_input!r}")
        self.input_size, self.hidden_size, self.chunk_size = input_size, hidden_size, chunk_size
        self.levels = hidden_size // chunk_size
        self.master_input = master_input
        gates = 4 * hidden_size + 2 * self.levels
        self.weight_ih = nn.Parameter(torch.empty(gates, input_size))
        self.bias_ih = nn.Parameter(torch.empty(gates))
        self.weight_hh = nn.Parameter(torch.empty(gates, hidden_size))
        self.bias_hh = nn.Parameter(torch.empty(gates))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = self.hidden_size**-0.5  # as nn.LSTM
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def run(
        self, x: torch.Tensor, mask: torch.Tensor | None, weight_hh: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Runs left to right over x [B, T, D] from a zero state.

        ``mask`` [B, T] bool (None when every row is full): padded steps leave the state untouched. Returns
        hidden states [B, T, H] and forget/input distances [B, T]; values at padded steps are not zeroed here.
        """
        batch, steps, _ = x.shape
        levels, chunk = self.levels, self.chunk_size
        # one input projection for all time steps, both biases folded in; time-major for contiguous steps
        x_proj = torch.addmm(self.bias_ih + self.bias_hh, x.reshape(-1, x.size(-1)), self.weight_ih.t())
        x_proj = x_proj.view(batch, steps, -1).transpose(0, 1)
        w_hh_t = weight_hh.t()
        step_mask = None if mask is None else mask.t().unsqueeze(-1)  # [T, B, 1]

        h = x.new_zeros(batch, self.hidden_size)
        c = x.new_zeros(batch, levels, chunk)
        hs, d_forget, d_input = [], [], []
        for t in range(steps):
            pre = torch.addmm(x_proj[t], h, w_hh_t)  # [B, G]
            f_master = cumax(pre[:, levels : 2 * levels])  # [B, L]
            i_master = master_input_gate(pre[:, :levels], self.master_input)
            gates = pre[:, 2 * levels :].view(batch, 4, levels, chunk)
            out_gate, in_gate, forget_gate = torch.sigmoid(gates[:, (0, 2, 3)]).unbind(1)
            c_hat = torch.tanh(gates[:, 1])
            fm, im = f_master.unsqueeze(-1), i_master.unsqueeze(-1)  # [B, L, 1]
            omega = fm * im
            # c_t = omega (f c + i c^) + (f~ - omega) c + (i~ - omega) c^, grouped by c and c^
            c_new = c * (omega * forget_gate + fm - omega) + c_hat * (omega * in_gate + im - omega)
            h_new = (out_gate * torch.tanh(c_new)).view(batch, -1)
            if step_mask is not None:
                keep = step_mask[t]
                h_new = torch.where(keep, h_new, h)
                c_new = torch.where(keep.unsqueeze(-1), c_new, c)
            h, c = h_new, c_new
            hs.append(h)
            d_forget.append(1.0 - f_master.mean(-1))
            d_input.append(i_master.mean(-1))
        return torch.stack(hs, 1), torch.stack(d_forget, 1), torch.stack(d_input, 1)
