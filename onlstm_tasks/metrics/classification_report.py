"""A per-class precision/recall/F1 report from a (DDP-summed) confusion matrix."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def per_class_scores(confusion: torch.Tensor) -> dict[str, torch.Tensor]:
    """confusion [C,C] (rows gold, columns predicted) -> precision/recall/f1/support per class."""
    confusion = confusion.double()
    tp = confusion.diagonal()
    predicted, support = confusion.sum(0), confusion.sum(1)
    precision = torch.where(predicted > 0, tp / predicted.clamp_min(1), torch.zeros_like(tp))
    recall = torch.where(support > 0, tp / support.clamp_min(1), torch.zeros_like(tp))
    f1 = torch.where(precision + recall > 0, 2 * precision * recall / (precision + recall).clamp_min(1e-12),
                     torch.zeros_like(tp))
    return {"precision": precision, "recall": recall, "f1": f1, "support": support}


def format_report(confusion: torch.Tensor, labels: Sequence[str], digits: int = 4) -> str:
    scores = per_class_scores(confusion)
    width = max(len(label) for label in [*labels, "macro avg"])
    lines = [f"{'':<{width}}  {'precision':>9}  {'recall':>9}  {'f1-score':>9}  {'support':>7}"]
    for i, label in enumerate(labels):
        p, r, f, s = (scores[k][i].item() for k in ("precision", "recall", "f1", "support"))
        lines.append(f"{label:<{width}}  {p:>9.{digits}f}  {r:>9.{digits}f}  {f:>9.{digits}f}  {int(s):>7}")
    total = int(confusion.sum())
    accuracy = confusion.diagonal().sum().item() / max(total, 1)
    macro = [scores[k].mean().item() for k in ("precision", "recall", "f1")]
    lines += ["", f"{'accuracy':<{width}}  {'':>9}  {'':>9}  {accuracy:>9.{digits}f}  {total:>7}",
              f"{'macro avg':<{width}}  " + "  ".join(f"{v:>9.{digits}f}" for v in macro) + f"  {total:>7}"]
    return "\n".join(lines)
