"""Word embeddings, optionally initialised from pretrained GloVe / word2vec text files."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import torch
from torch import nn
from torch.nn import functional as F

from onlstm_tasks.data.core.batching import TokenBatch
from onlstm_tasks.data.core.vocab import PAD, UNK
from onlstm_tasks.embedders.base import TokenEmbedder, zero_padding
from onlstm_tasks.embedders.pretrained import copy_pretrained_rows

log = logging.getLogger(__name__)


class WordEmbedding(TokenEmbedder):
    """One trainable vector per vocabulary word, looked up by ``batch.word_ids``.

    ``vocab`` is the word vocabulary's ``itos`` list (index 0 ``<pad>``, 1 ``<unk>``), passed in by code.
    Rows start uniform in +-sqrt(3/dim) (the padding row at zero); with ``pretrained`` (a GloVe or word2vec
    text file, optionally ``.gz``) the rows of words found in the file are overwritten, and ``coverage``
    is the found fraction of the vocabulary (specials excluded).

    Which rows train (``fine_tune``): ``all`` (default), ``none`` (the same as ``freeze=True``: no row trains,
    including the random rows of words missing from the file), or ``unfound``: the rows set from the file are
    frozen (kept in a buffer, out of the optimiser's reach, weight decay included) and only the others train
    (``<unk>`` and the training words without a vector). With ``all``, rows of words that never occur in
    training (vectors-only words, see the data modules' ``vectors``) get no gradient, but an optimiser's weight
    decay still shrinks them: use ``unfound`` with weight decay.

    Unknown-word training, in training mode only (never at evaluation or prediction), masks drawn on the input's
    device: ``unk_replace`` replaces each token whose word occurs once in training (``batch.singletons``, set by
    the data modules on training batches) by ``<unk>`` with that probability (Lample et al., 2016);
    ``word_dropout`` replaces any token by ``<unk>`` with that probability. The character features still see
    the real word.

    The file is read when the weights are first needed, not when the module is built: every way of restoring a
    model (``load_from_checkpoint``, ``onlstm-tasks predict/test --ckpt_path``, resuming a fit) builds it from
    its saved hyper-parameters, which name the file, and only then loads the checkpoint's weights. So the file
    is read at the first forward pass or ``state_dict()`` call (or an explicit :meth:`load_pretrained`) unless a
    state dict holding this embedding's weight was loaded before: then the weights come from it, and the file
    is neither read nor needed. When it is needed and missing, that is an error naming the file.
    """

    def __init__(
        self,
        vocab: Sequence[str],
        dim: int = 100,
        pretrained: str | None = None,
        freeze: bool = False,
        lowercase_lookup: bool = True,
        fine_tune: Literal["all", "unfound", "none"] | None = None,
        unk_replace: float = 0.0,
        word_dropout: float = 0.0,
    ) -> None:
        super().__init__()
        fine_tune = fine_tune or ("none" if freeze else "all")
        if fine_tune not in ("all", "unfound", "none"):
            raise ValueError(f"fine_tune must be 'all', 'unfound' or 'none', got {fine_tune!r}")
        if freeze and fine_tune != "none":
            raise ValueError(f"freeze=True contradicts fine_tune={fine_tune!r}: give one of them")
        if fine_tune == "unfound" and pretrained is None:
            raise ValueError("fine_tune='unfound' freezes the rows found in the pretrained file: set pretrained")
        for name, p in (("unk_replace", unk_replace), ("word_dropout", word_dropout)):
            if not 0.0 <= p < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {p}")
        if (unk_replace or word_dropout) and list(vocab[:2]) != [PAD, UNK]:
            raise ValueError(f"unk_replace/word_dropout need a vocabulary starting with {PAD}, {UNK}; got "
                             f"{list(vocab[:2])}")
        self.output_size = dim
        self.fine_tune = fine_tune
        self.unk_replace, self.word_dropout = unk_replace, word_dropout
        self._warned_no_singletons = False
        self.vocab = list(vocab)
        self.pretrained = pretrained
        self.lowercase_lookup = lowercase_lookup
        self.embedding = nn.Embedding(len(vocab), dim, padding_idx=0)
        bound = math.sqrt(3.0 / dim)
        with torch.no_grad():
            self.embedding.weight.uniform_(-bound, bound)
            self.embedding.weight[0].zero_()
        self.coverage: float | None = None
        self.pretrained_pending = pretrained is not None  # True until the file is read or weights are loaded
        self.embedding.weight.requires_grad_(fine_tune != "none")
        if fine_tune == "unfound":  # filled by load_pretrained, or from a checkpoint's state dict
            self.register_buffer("frozen_rows", torch.zeros(len(vocab), dtype=torch.bool))
            self.register_buffer("frozen_weight", torch.zeros(len(vocab), dim))

    def load_pretrained(self) -> None:
        """Copy the vectors of ``pretrained`` into the rows of the words found (once; later calls do nothing)."""
        if not self.pretrained_pending:
            return
        path = Path(self.pretrained)
        if not path.is_file():
            raise FileNotFoundError(
                f"{path}: pretrained word vectors not found; they are needed to initialise a new model (a model "
                f"restored from a checkpoint takes its weights from the checkpoint and never reads the file)"
            )
        weight = self.embedding.weight
        with torch.no_grad():
            rows = weight.detach().to("cpu", copy=True)  # read on the CPU whatever the device
            found = copy_pretrained_rows(rows, self.vocab, path, self.lowercase_lookup)
            weight.copy_(rows)
            if self.fine_tune == "unfound":
                self.frozen_rows[found] = True
                self.frozen_weight.copy_(weight.detach() * self.frozen_rows.unsqueeze(1))
        self.pretrained_pending = False
        total = sum(1 for w in self.vocab if w not in (PAD, UNK))
        self.coverage = len(found) / total if total else 0.0
        log.info(
            "pretrained vectors %s: found %d / %d vocabulary words (%.1f%%)%s",
            path, len(found), total, 100.0 * self.coverage,
            "; their rows are frozen (fine_tune='unfound')" if self.fine_tune == "unfound" else "",
        )

    def forward(self, batch: TokenBatch) -> torch.Tensor:
        self.load_pretrained()
        ids = batch.word_ids
        if self.training and (self.unk_replace or self.word_dropout):
            ids = self.unknown_words(batch)
        x = self.embedding(ids)
        if self.fine_tune == "unfound":
            x = torch.where(self.frozen_rows[ids].unsqueeze(-1), F.embedding(ids, self.frozen_weight), x)
        return zero_padding(x, batch.mask)  # [B, T, dim]

    def unknown_words(self, batch: TokenBatch) -> torch.Tensor:
        """``batch.word_ids`` with the tokens chosen by ``unk_replace`` / ``word_dropout`` set to ``<unk>`` (1)."""
        ids = batch.word_ids
        drop = torch.zeros_like(batch.mask)
        if self.word_dropout:
            drop |= torch.rand(ids.shape, device=ids.device) < self.word_dropout
        if self.unk_replace:
            if batch.singletons is None:
                if not self._warned_no_singletons:
                    log.warning("unk_replace=%s does nothing: the training batches do not flag singleton words "
                                "(their data module has no training word counts, e.g. vocabularies from a "
                                "checkpoint)", self.unk_replace)
                    self._warned_no_singletons = True
            else:
                drop |= batch.singletons & (torch.rand(ids.shape, device=ids.device) < self.unk_replace)
        return ids.masked_fill(drop & batch.mask, 1)

    # ---- state dicts: a loaded weight replaces the file; a saved one must include it ---------------------------
    def _save_to_state_dict(self, destination, prefix, keep_vars) -> None:
        self.load_pretrained()
        super()._save_to_state_dict(destination, prefix, keep_vars)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs) -> None:
        if self.pretrained_pending and f"{prefix}embedding.weight" in state_dict:
            self.pretrained_pending = False
            log.info("pretrained vectors %s not read: the word embeddings come from the loaded weights",
                     self.pretrained)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)
