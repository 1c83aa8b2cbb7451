"""Corpus perplexity that stays correct under DDP."""

from __future__ import annotations

import torch
from torchmetrics import Metric


class Perplexity(Metric):
    """Corpus perplexity ``exp(total NLL / total predicted tokens)``, DDP-safe: both sums are ``sum``-reduced
    states, so the processes' tokens are pooled before the ratio (never an average of per-process perplexities).

    ``update(nll_sum, count)`` takes a batch's summed negative log-likelihood in nats and its number of
    predicted tokens. ``compute()`` returns ``{"ppl", "nll"}`` (``nll`` per token); NaN before any token.
    """

    is_differentiable = False
    higher_is_better = False
    full_state_update = False

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.add_state("nll", default=torch.tensor(0.0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("count", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, nll_sum: torch.Tensor, count: torch.Tensor) -> None:
        self.nll += nll_sum.detach().to(torch.float64)
        self.count += count.detach().to(torch.long)

    def compute(self) -> dict[str, torch.Tensor]:
        per_token = self.nll / self.count if self.count > 0 else torch.tensor(float("nan"), dtype=torch.float64)
        return {"ppl": per_token.exp(), "nll": per_token}
