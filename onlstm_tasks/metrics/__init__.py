"""The tasks' metrics, DDP-safe (torchmetrics states that pool every process's data before the score): entity F1 by
seqeval (:mod:`.entity`), corpus perplexity (:mod:`.perplexity`) and the per-class report of the aspect task
(:mod:`.classification_report`). Plain torch and torchmetrics, no Lightning."""

from .entity import EntityF1
from .perplexity import Perplexity

__all__ = ["EntityF1", "Perplexity"]
