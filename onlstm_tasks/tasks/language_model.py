"""``LanguageModel``: the Lightning side of a word-level (optionally bidirectional) AWD-LSTM-style language model."""

from __future__ import annotations

import math

import lightning.pytorch as pl
import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from torch import nn

from onlstm_tasks.data.core.batching import IGNORE
from onlstm_tasks.data.core.vocab import DEFAULT_CHAR_VOCAB, EOS
from onlstm_tasks.embedders.base import TokenEmbedder
from onlstm_tasks.encoders.base import (
    DIRECTION_COMBINATIONS,
    EncoderFactory,
    SequenceEncoder,
    StatefulEncoder,
    detach_state,
)
from onlstm_tasks.encoders.defaults import LANGUAGE_MODEL, default_encoder
from onlstm_tasks.metrics import Perplexity
from onlstm_tasks.modules.language_model import (
    LanguageModelNet,
    LMOutput,
    activation_penalties,
    token_nll,
)
from onlstm_tasks.modules.lm_softmax import check_softmax
from onlstm_tasks.tasks.gathered import log_gathered
from onlstm_tasks.tasks.hub import TaskHubMixin
from onlstm_tasks.tasks.optimization import optimizers_config
from onlstm_tasks.tasks.tree_fields import induced_tree_fields
from onlstm_tasks.tasks.words import EncodesWords, trim_frame

DIRECTIONS = ("forward", "backward", "both")


class LanguageModel(EncodesWords, TaskHubMixin, pl.LightningModule):
    """A word-level language model over any left-to-right encoder; perplexity on validation and test.

    Args:
        word_vocab: the data module's vocabulary (``<pad>``, ``<unk>``, ``<eos>``, words), linked by the CLI and
            saved in checkpoints.
        char_vocab: linked too (language models read words only).
        embedding_dim: word vectors (also the softmax's input with ``tie_weights``).
        encoder: builds one direction's :class:`SequenceEncoder` from its input size (default: the paper's
            3-layer ON-LSTM, ``hidden_size [1150, 1150, embedding_dim]``, chunk size 10, dropout 0.3 between
            layers, DropConnect 0.45). Must be unidirectional; stream mode needs one that carries state
            (:class:`~onlstm_tasks.encoders.base.StatefulEncoder`: ONLSTM, LSTM, GRU).
        bidirectional: a forward and a backward language model trained together (sentence mode only).
        tie_weights: the softmax's weights are the word vectors (needs the last layer's size = embedding_dim).
        embedding_dropout: whole word vectors dropped in training (the same words in every position).
        input_dropout: locked dropout on the encoder's input.
        output_dropout: locked dropout on the encoder's output, before the softmax.
        softmax: ``full`` (default) or ``adaptive`` (``torch.nn.AdaptiveLogSoftmaxWithLoss``, much cheaper for
            vocabularies of tens of thousands of words; needs ``tie_weights: false``), see
            :mod:`onlstm_tasks.modules.lm_softmax`. Perplexity, ``predict`` records and probing are the same.
        adaptive_cutoffs: the adaptive softmax's cluster boundaries (word ids, increasing).
        div_value: the adaptive softmax's shrink factor of each cluster's projection.
        activation_regularization: AR's weight (alpha) in the penalties of
            :func:`~onlstm_tasks.modules.language_model.activation_penalties` (0 disables).
        temporal_activation_regularization: TAR's weight (beta) there (0 disables).
        optimizer: a LightningCLI-style optimizer callable (default Adam, lr 1e-3).
        lr_scheduler: a LightningCLI-style learning-rate scheduler callable (default none); it watches
            ``val_ppl`` (lower is better).
        tree_layer: which layer's distances give the ``tree``/``heads`` of ``predict`` records (ON-LSTM encoders;
            the paper's best layer for a 3-layer language model is the second, ``tree_layer: 1``).
        tree_directions: how a bidirectional model's two directions' distances are merged for those trees.

    ``predict`` writes one record per sentence of ``data.predict_file``: its tokens, the summed negative
    log-likelihood and perplexity of each direction (every word and the closing ``<eos>``, or for the backward
    model the opening one), and the induced tree (``tree``, ``heads``, and the ``distances`` it is read from).

    Logged: ``train_loss`` (NLL per token plus penalties), ``val_ppl``/``test_ppl`` (pooled over both
    directions of a bidirectional model), ``*_ppl_forward``/``*_ppl_backward`` and ``*_nll`` (nats per token).
    Probing (:meth:`encode_words`) frames each sentence with ``<eos>`` as in training and returns the words'
    positions only.
    """

    sentence_frame = ((EOS,), (EOS,))
    empty_record: dict = {}  # a blank input line's record is its text, no tokens and "empty": true

    def __init__(
        self,
        word_vocab: list[str],
        char_vocab: list[str] | None = None,
        embedding_dim: int = 400,
        encoder: EncoderFactory | None = None,
        bidirectional: bool = False,
        tie_weights: bool = True,
        embedding_dropout: float = 0.1,
        input_dropout: float = 0.5,
        output_dropout: float = 0.45,
        activation_regularization: float = 2.0,
        temporal_activation_regularization: float = 1.0,
        optimizer: OptimizerCallable | None = None,
        lr_scheduler: LRSchedulerCallable | None = None,
        tree_layer: int = -1,
        tree_directions: str = "mean",
        softmax: str = "full",
        adaptive_cutoffs: list[int] | None = None,
        div_value: float = 4.0,
    ) -> None:
        super().__init__()
        if EOS not in word_vocab:
            raise ValueError(f"word_vocab must contain the boundary token {EOS!r} (LanguageModelDataModule adds it)")
        if activation_regularization < 0 or temporal_activation_regularization < 0:
            raise ValueError("activation_regularization and temporal_activation_regularization must be >= 0")
        if tree_directions not in DIRECTION_COMBINATIONS:
            raise ValueError(f"tree_directions must be one of {DIRECTION_COMBINATIONS}, got {tree_directions!r}")
        self.save_hyperparameters()
        if char_vocab is None:
            self.hparams.char_vocab = list(DEFAULT_CHAR_VOCAB)  # probing builds token batches with it
        encoder = encoder or default_encoder(**LANGUAGE_MODEL)
        self.net = LanguageModelNet(len(word_vocab), embedding_dim, encoder, bidirectional,
                                    tie_weights, embedding_dropout, input_dropout, output_dropout,
                                    softmax, adaptive_cutoffs, div_value)
        self.alpha, self.beta = activation_regularization, temporal_activation_regularization
        self.optimizer_factory, self.scheduler_factory = optimizer, lr_scheduler
        self.scores = nn.ModuleDict({f"{stage}_{d}": Perplexity() for stage in ("val", "test") for d in DIRECTIONS})
        # stream mode: the final state of the previous window of each loader (truncated BPTT). Kept on the
        # LightningModule between steps, never on a network module; reset at every loader's first window.
        self._carried: dict[str, object] = {}

    @staticmethod
    def check_init_args(init_args: dict) -> None:
        """The softmax options a config gives, checked before any data is read (the CLI calls this); raises
        ``ValueError`` naming the key."""
        check_softmax(init_args.get("softmax", "full"), init_args.get("adaptive_cutoffs"),
                      init_args.get("div_value", 4.0), init_args.get("tie_weights", True))

    # ---- probing (EncodesWords) ---------------------------------------------------------------------------
    def word_embedder(self) -> TokenEmbedder:
        return self.net.embedder

    def sentence_encoder(self) -> SequenceEncoder:
        return self.net.encoder

    # ---- loops --------------------------------------------------------------------------------------------
    def _run(self, batch, stage: str) -> LMOutput:
        if not batch.carry:
            return self.net(batch.tokens)
        if self.net.bidirectional:
            raise ValueError("a bidirectional language model trains in sentence mode (data mode: sentence); stream "
                             "mode carries one left-to-right state")
        if not isinstance(self.net.encoder, StatefulEncoder):
            raise ValueError(f"stream mode carries the recurrent state across windows, which "
                             f"{type(self.net.encoder).__name__} cannot take; use an ONLSTM, LSTM or GRU encoder or "
                             f"data mode: sentence")
        state = None if batch.index[0] == 0 else self._carried.get(stage)
        out = self.net(batch.tokens, state=state, carry=True)
        self._carried[stage] = detach_state(out.encoded.state)
        return out

    def _nll(self, out: LMOutput, batch) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        sums = {"forward": token_nll(self.net.nll(out.forward, batch.forward_targets), batch.forward_targets)}
        if out.backward is not None:
            if batch.backward_targets is None:
                raise ValueError("the batch has no backward targets: a bidirectional model needs data mode: sentence")
            sums["backward"] = token_nll(self.net.nll(out.backward, batch.backward_targets), batch.backward_targets)
        sums["both"] = (sum(s for s, _ in sums.values()), sum(n for _, n in sums.values()))
        return sums

    def training_step(self, batch, batch_idx):
        out = self._run(batch, "train")
        nll, count = self._nll(out, batch)["both"]
        loss = nll / count.clamp(min=1)
        # batch_size: sentences (windows), known on the host; the bar shows train_nll as logged
        self.log("train_nll", loss, batch_size=len(batch.index))
        if self.alpha or self.beta:
            ar, tar = activation_penalties(out.encoded, out.dropped, batch.tokens.mask)
            loss = loss + self.alpha * ar + self.beta * tar
        self.log("train_loss", loss, batch_size=len(batch.index))
        return loss

    def _evaluate(self, batch, stage: str) -> None:
        for direction, (nll, count) in self._nll(self._run(batch, stage), batch).items():
            self.scores[f"{stage}_{direction}"].update(nll, count)

    def validation_step(self, batch, batch_idx):
        self._evaluate(batch, "val")

    def test_step(self, batch, batch_idx):
        self._evaluate(batch, "test")

    def on_validation_epoch_end(self) -> None:
        self._log_scores("val")

    def on_test_epoch_end(self) -> None:
        self._log_scores("test")

    def _log_scores(self, stage: str) -> None:
        directions = ("forward", "backward", "both") if self.net.bidirectional else ("forward", "both")
        for direction in directions:
            metric = self.scores[f"{stage}_{direction}"]
            scores = metric.compute()  # pooled over every process's tokens
            metric.reset()
            if direction == "both":
                log_gathered(self, f"{stage}_ppl", scores["ppl"].float(), prog_bar=True)
                log_gathered(self, f"{stage}_nll", scores["nll"].float())
            else:
                log_gathered(self, f"{stage}_ppl_{direction}", scores["ppl"].float())

    def predict_step(self, batch, batch_idx):
        out = self.net(batch.tokens)
        mask = batch.tokens.mask
        targets = {"forward": batch.forward_targets, "backward": batch.backward_targets}
        scores = {}
        for direction, states in (("forward", out.forward), ("backward", out.backward)):
            if states is not None:
                nll = self.net.nll(states, targets[direction]).sum(1)
                scores[direction] = (nll.tolist(), (targets[direction] != IGNORE).sum(1).tolist())
        lead, trail = (len(part) for part in self.sentence_frame)
        words = [row[lead:len(row) - trail] for row in batch.tokens.words]
        trees = induced_tree_fields(trim_frame(out.encoded, mask, lead, trail), mask[:, lead + trail:], words,
                                    self.hparams.tree_layer, self.hparams.tree_directions, with_distances=True)
        records = []
        for row, index in enumerate(batch.index):
            record = {"index": index, "tokens": words[row]}
            for direction, (nll, count) in scores.items():
                record[f"nll_{direction}"] = nll[row]
                record[f"ppl_{direction}"] = math.exp(nll[row] / count[row])
            records.append({**record, **trees[row]})
        return records

    # ---- optimisation -------------------------------------------------------------------------------------
    def configure_optimizers(self):
        return optimizers_config(self.parameters(), self.optimizer_factory, self.scheduler_factory, "val_ppl",
                                 higher_is_better=False)
