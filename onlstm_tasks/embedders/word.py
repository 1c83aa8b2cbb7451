"""Word embeddings, optionally initialised from pretrained GloVe / word2vec text files."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from onlstm_tasks.data.batching import TokenBatch
from onlstm_tasks.data.vocab import PAD, UNK
from onlstm_tasks.embedders.base import TokenEmbedder, zero_padding
from onlstm_tasks.embedders.pretrained import copy_pretrained_rows

log = logging.getLogger(__name__)


class WordEmbedding(TokenEmbedder):
    """One trainable vector per vocabulary word, looked up by ``batch.word_ids``.

    ``vocab`` is the word vocabulary's ``itos`` list (index 0 ``<pad>``, 1 ``<unk>``), passed in by code.
    Rows start uniform in +-sqrt(3/dim) (the padding row at zero); with ``pretrained`` (a GloVe or word2vec
    text file, optionally ``.gz``) the rows of words found in the file are overwritten, and ``coverage``
    is the found fraction of the vocabulary (specials excluded). ``freeze`` stops all rows from training,
    including the random rows of words missing from the file.

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
    ) -> None:
        super().__init__()
        self.output_size = dim
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
        self.embedding.weight.requires_grad_(not freeze)

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
        self.pretrained_pending = False
        total = sum(1 for w in self.vocab if w not in (PAD, UNK))
        self.coverage = found / total if total else 0.0
        log.info(
            "pretrained vectors %s: found %d / %d vocabulary words (%.1f%%)",
            path, found, total, 100.0 * self.coverage,
        )

    def forward(self, batch: TokenBatch) -> torch.Tensor:
        self.load_pretrained()
        return zero_padding(self.embedding(batch.word_ids), batch.mask)  # [B, T, dim]

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
