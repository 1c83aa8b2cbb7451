"""Entity-level precision / recall / F1 (seqeval) that stays correct under DDP.

:class:`EntityF1` keeps every real token's predicted and gold tag id plus every sentence's length as ``cat`` list
states, so under DDP torchmetrics gathers all processes' sentences and seqeval scores the whole split once:
never an average of per-process F1s. Tags are scored as IOB2 (IOBES ids are converted first).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

import torch
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

from onlstm_tasks.data.core.tags import iobes_to_iob2, parse_label

_STATES = ("preds", "target", "lengths")
_KEYS = ("precision", "recall", "f1", "strict_precision", "strict_recall", "strict_f1")


class EntityF1(Metric):
    """Micro entity P/R/F1 over tag ids; ``id2label[i]`` is the label string of tag id ``i``.

    ``scheme`` is the scheme of ``id2label`` ("iob2" or "iobes"); scores are always computed on IOB2 tags:
    ``precision``/``recall``/``f1`` in seqeval's default (conlleval-compatible) mode and ``strict_*`` in seqeval's
    strict IOB2 mode (an entity must start with B-). ``update`` takes ``pred``, ``gold`` [B, T] long and
    ``mask`` [B, T] bool; values at padded positions are ignored (may be anything, e.g. -100).
    """

    is_differentiable = False
    higher_is_better = True
    full_state_update = False

    def __init__(self, id2label: Sequence[str], scheme: str = "iob2", **kwargs) -> None:
        super().__init__(**kwargs)
        for label in id2label:
            parse_label(label, scheme)  # ValueError naming any label that does not belong to the scheme
        self.id2label = list(id2label)
        self.scheme = scheme
        # IOBES -> IOB2 is position-wise (S- -> B-, E- -> I-), so converting the label list converts every sequence
        self._iob2 = self.id2label if scheme == "iob2" else iobes_to_iob2(self.id2label)
        for name in _STATES:
            self.add_state(name, default=[], dist_reduce_fx="cat")
        self._add_placeholders()

    def update(self, pred: torch.Tensor, gold: torch.Tensor, mask: torch.Tensor) -> None:
        if not (pred.shape == gold.shape == mask.shape) or mask.dim() != 2:
            raise ValueError(f"pred, gold and mask must share one [B, T] shape, got "
                             f"{tuple(pred.shape)}, {tuple(gold.shape)}, {tuple(mask.shape)}")
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must be a bool tensor, got dtype {mask.dtype}")
        # mask selects tokens row by row, so each sentence's tokens stay contiguous and in order
        self.preds.append(pred[mask].long())
        self.target.append(gold[mask].long())
        self.lengths.append(mask.sum(dim=1).long())

    def compute(self) -> dict[str, torch.Tensor]:
        y_true, y_pred = self._sentences()
        if not y_true:
            return {key: torch.tensor(0.0) for key in _KEYS}
        # seqeval imports scikit-learn and pandas (0.3 s): imported when a score is computed, not at start-up
        from seqeval.metrics.sequence_labeling import precision_recall_fscore_support as conlleval_prfs
        from seqeval.metrics.v1 import precision_recall_fscore_support as strict_prfs
        from seqeval.scheme import IOB2

        p, r, f, _ = conlleval_prfs(y_true, y_pred, average="micro", zero_division=0)
        sp, sr, sf, _ = strict_prfs(y_true, y_pred, average="micro", zero_division=0, scheme=IOB2)
        return {key: torch.tensor(float(v)) for key, v in zip(_KEYS, (p, r, f, sp, sr, sf))}

    def report(self, digits: int = 4) -> str:
        """seqeval's per-type classification report (default mode) of everything accumulated.

        Under DDP this gathers the states of every process, so every rank must call it.
        """
        with self.sync_context(should_sync=self.sync_on_compute, should_unsync=True):
            y_true, y_pred = self._sentences()
        if not any(label != "O" for sentence in y_true + y_pred for label in sentence):
            return "no entities in the gold tags or the predictions\n"
        from seqeval.metrics import classification_report

        return classification_report(y_true, y_pred, digits=digits, zero_division=0)

    def reset(self) -> None:
        super().reset()
        self._add_placeholders()

    def _add_placeholders(self) -> None:
        # torchmetrics gathers an empty list state as an empty tensor of the metric's float dtype; a rank that saw
        # no batch would then send float while the others send long. An empty long tensor in every list avoids it.
        for name in _STATES:
            getattr(self, name).append(torch.zeros(0, dtype=torch.long, device=self.device))

    def _sentences(self) -> tuple[list[list[str]], list[list[str]]]:
        """Gold and predicted IOB2 label sequences, one list per sentence."""
        preds, target, lengths = (dim_zero_cat(getattr(self, name)).long().tolist() for name in _STATES)
        if len(preds) != len(target) or len(preds) != sum(lengths):
            raise RuntimeError("EntityF1 states are inconsistent (token counts do not match sentence lengths)")
        for name, ids in (("prediction", preds), ("gold", target)):
            bad = [i for i in ids if not 0 <= i < len(self._iob2)]
            if bad:
                raise ValueError(f"{name} tag id {bad[0]} is outside id2label (size {len(self._iob2)})")
        ends = list(accumulate(lengths))
        starts = [end - n for end, n in zip(ends, lengths)]
        labels = self._iob2
        y_true = [[labels[i] for i in target[s:e]] for s, e in zip(starts, ends)]
        y_pred = [[labels[i] for i in preds[s:e]] for s, e in zip(starts, ends)]
        return y_true, y_pred
