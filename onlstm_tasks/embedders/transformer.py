"""Word vectors from a Hugging Face transformer: sub-word states pooled back to one vector per word."""

from __future__ import annotations

import logging
from typing import Literal

import torch
from transformers import AutoModel, AutoTokenizer

from onlstm_tasks.data.core.batching import TokenBatch
from onlstm_tasks.embedders.base import TokenEmbedder, zero_padding

log = logging.getLogger(__name__)

_UNBOUNDED = 1_000_000  # tokenizers without a known limit report a huge model_max_length


class TransformerEmbedding(TokenEmbedder):
    """Last-layer states of ``AutoModel.from_pretrained(model_name_or_path)``, one vector per word.

    ``batch.words`` is tokenised inside ``forward`` by the model's fast tokenizer (``is_split_into_words``;
    byte-level BPE tokenizers are loaded with ``add_prefix_space=True`` so every word is tokenised as it would
    be mid-sentence). A word's vector is its first sub-word's state (``pooling="first"``) or the mean over its
    sub-words (``"mean"``). Sentences longer than ``max_length`` sub-words (default: the tokenizer's limit,
    else the model's ``max_position_embeddings``) are truncated with a logged warning; words that lost all their
    sub-words, or never had any, get zeros. ``truncated_words`` counts the words cut so far. With ``freeze`` the
    transformer is not trained and always runs in eval mode without gradients.
    """

    def __init__(
        self,
        model_name_or_path: str,
        pooling: Literal["first", "mean"] = "first",
        freeze: bool = False,
        max_length: int | None = None,
    ) -> None:
        super().__init__()
        if pooling not in ("first", "mean"):
            raise ValueError(f"pooling must be 'first' or 'mean', got {pooling!r}")
        self.pooling = pooling
        self.freeze = freeze
        self.tokenizer = _load_tokenizer(model_name_or_path)
        self.model = AutoModel.from_pretrained(model_name_or_path)
        if getattr(self.model, "pooler", None) is not None:
            # the sentence pooler is never used here; parameters without gradients break DDP
            self.model.pooler = None
        self.output_size = self.model.config.hidden_size
        if max_length is None:
            max_length = self.tokenizer.model_max_length
            if max_length >= _UNBOUNDED:
                max_length = getattr(self.model.config, "max_position_embeddings", 512)
        self.max_length = max_length
        self.truncated_words = 0
        # from_pretrained returns the model in eval mode, and Lightning keeps submodules in the mode they were built
        # in: without this, a trained transformer would run without its dropout
        self.model.train(self.training and not freeze)
        if freeze:
            self.model.requires_grad_(False)

    def train(self, mode: bool = True) -> "TransformerEmbedding":
        super().train(mode)
        if self.freeze:
            self.model.eval()
        return self

    def forward(self, batch: TokenBatch) -> torch.Tensor:
        B, T = batch.mask.shape
        device = batch.mask.device
        enc = self.tokenizer(
            [list(w) for w in batch.words],
            is_split_into_words=True,
            truncation=True,
            max_length=self.max_length,
            padding=True,
            return_tensors="pt",
        )
        inputs = {k: enc[k].to(device) for k in self.tokenizer.model_input_names if k in enc}
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.freeze):
            hidden = self.model(**inputs).last_hidden_state  # [B, S, H]

        # word index of every sub-word, -1 for specials and padding
        S = hidden.shape[1]
        sub_word = torch.full((B, S), -1, dtype=torch.long)
        lengths = enc["attention_mask"].sum(dim=1).tolist()  # sub-words per sentence, specials included
        for b in range(B):
            ids = [-1 if w is None else w for w in enc.word_ids(b)]
            sub_word[b, : len(ids)] = torch.tensor(ids, dtype=torch.long)
            self._count_truncation(b, lengths[b], max(ids, default=-1), len(batch.words[b]))
        sub_word = sub_word.to(device)
        keep = (sub_word >= 0) & (sub_word < T)
        if self.pooling == "first":
            previous = torch.cat([sub_word.new_full((B, 1), -1), sub_word[:, :-1]], dim=1)
            keep &= sub_word != previous

        # sum (and count) the kept sub-word states into their words' slots of a flat [B*T, H] buffer
        rows = torch.arange(B, device=device).unsqueeze(1) * T + sub_word  # [B, S]
        target = rows[keep]
        pooled = hidden.new_zeros(B * T, self.output_size).index_add(0, target, hidden[keep])
        counts = hidden.new_zeros(B * T).index_add(0, target, hidden.new_ones(target.shape[0]))
        pooled = pooled / counts.clamp(min=1).unsqueeze(-1)
        return zero_padding(pooled.reshape(B, T, self.output_size), batch.mask)

    def _count_truncation(self, b: int, length: int, last: int, num_words: int) -> None:
        """Count and report the words of sentence ``b`` after ``last``, the last word that kept a sub-word."""
        if length < self.max_length or last >= num_words - 1:
            return
        lost = num_words - 1 - last  # words after the last one that kept a sub-word
        # the last kept word may itself have been cut, but it keeps a vector
        self.truncated_words += lost
        log.warning(
            "sentence %d of the batch has more than %d sub-words: truncated, %d word(s) get zero vectors "
            "(%d truncated so far); raise max_length or split long sentences",
            b, self.max_length, lost, self.truncated_words,
        )


def _load_tokenizer(model_name_or_path: str):
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_name_or_path, add_prefix_space=True)
    except (TypeError, ValueError):
        tokenizer = AutoTokenizer.from_pretrained(model_name_or_path)
    if not tokenizer.is_fast:
        raise ValueError(
            f"{model_name_or_path}: TransformerEmbedding needs a fast tokenizer (for word_ids()), "
            f"got {type(tokenizer).__name__}"
        )
    return tokenizer
