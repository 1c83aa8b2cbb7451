"""The ON-LSTM encoder: cells stacked into layers, optionally bidirectional, masked for padded batches."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from ..base import ONLSTMOutput, StatefulEncoder, check_layer_states
from ..dropout import check_probability, locked_dropout
from .cell import ONLSTMCell
from ..dropconnect import drop_connect
from .registry import allows_native_ops, check_name
from .layer_op import run_layer

LayerStates = tuple[tuple[torch.Tensor, torch.Tensor], ...]


class ONLSTM(StatefulEncoder):
    """Ordered Neurons LSTM (Shen et al., ICLR 2019) as a :class:`SequenceEncoder`.

    Args:
        input_size: features of each input vector.
        hidden_size: neurons per direction, each a multiple of ``chunk_size``: one size for every layer, or a
            list with one size per layer (as the authors' language models, e.g. ``[1150, 1150, 400]``).
        chunk_size: neurons per master-gate level (``levels = hidden_size / chunk_size``).
        num_layers: stacked layers; layer ``l + 1`` reads layer ``l``'s (both directions') states.
        bidirectional: adds a right-to-left direction that reads each sequence over its true length.
        dropout: locked (variational) dropout between layers, one mask per sequence shared over time.
        dropconnect: DropConnect on the hidden-to-hidden weights, one mask per forward pass shared over time.
        master_input: ``"paper"`` (i~ = 1 - cumax) or ``"symmetric"`` (reverse cumulative softmax).
        backend: the time loop (:mod:`.registry`): ``"triton"`` (Triton kernels that split each step over many
            programs, forward and backward; float32 on a CUDA device), ``"compiled"`` (the C++ kernels built at install;
            float32 on the CPU), ``"torch"`` (PyTorch operations; any device and dtype) or ``"auto"`` (Triton on a
            CUDA device, the compiled loop on the CPU, wherever they can run, else PyTorch's). Every back end
            computes the same function (tested against the reference cell); each layer is one call of the operator
            ``torch.ops.onlstm_tasks.onlstm_layer``, which ``torch.compile`` takes whole.

    Distances in the output are ``1 - mean(f~_t)`` (master forget) and ``mean(i~_t)`` (master input) per layer
    and direction.

    State carry (:class:`StatefulEncoder`): a unidirectional encoder on a full batch returns its final state, a
    tuple with one ``(h, c)`` per layer (each [B, hidden_sizes[layer]]), and starts from such a ``state`` when
    given one (the next window of a stream, truncated back-propagation through time). Without a state, "full"
    means mask None: a given mask is not read on the host to find out (an all-True mask counts as full only
    beside a given state).
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int | list[int] = 256,
        chunk_size: int = 8,
        num_layers: int = 1,
        bidirectional: bool = False,
        dropout: float = 0.0,
        dropconnect: float = 0.0,
        master_input: str = "paper",
        backend: str = "auto",
    ) -> None:
        super().__init__()
        check_name(backend)
        if input_size <= 0:
            raise ValueError(f"input_size must be positive, got {input_size}")
        if num_layers < 1:
            raise ValueError(f"num_layers must be at least 1, got {num_layers}")
        check_probability("dropout", dropout)
        check_probability("dropconnect", dropconnect)
        sizes = [hidden_size] * num_layers if isinstance(hidden_size, int) else list(hidden_size)
        if len(sizes) != num_layers:
            raise ValueError(f"hidden_size must be one size or one per layer ({num_layers}), got {hidden_size}")
        self.input_size, self.hidden_size, self.chunk_size = input_size, hidden_size, chunk_size
        self.hidden_sizes = sizes
        self.num_layers, self.bidirectional = num_layers, bidirectional
        self.dropout, self.dropconnect, self.master_input = dropout, dropconnect, master_input
        self.backend = backend
        self.num_directions = 2 if bidirectional else 1
        self.output_size = sizes[-1] * self.num_directions
        self.cells = nn.ModuleList(
            ONLSTMCell(input_size if layer == 0 else sizes[layer - 1] * self.num_directions, sizes[layer],
                       chunk_size, master_input)
            for layer in range(num_layers)
            for _ in range(self.num_directions)
        )

    @staticmethod
    def check_init_args(init_args: dict) -> None:
        """Checks the sizes a config gives before anything is built (the CLI calls this before reading data):
        every hidden size a positive multiple of ``chunk_size``. Raises ``ValueError`` naming the values."""
        chunk = init_args.get("chunk_size", 8)
        hidden = init_args.get("hidden_size", 256)
        sizes = [hidden] if isinstance(hidden, int) else list(hidden or [])
        for size in sizes:
            if isinstance(size, int) and isinstance(chunk, int) and (chunk <= 0 or size <= 0 or size % chunk):
                raise ValueError(f"hidden_size must be a positive multiple of chunk_size, got hidden_size={hidden}, "
                                 f"chunk_size={chunk}")

    def cell(self, layer: int, direction: int = 0) -> ONLSTMCell:
        return self.cells[layer * self.num_directions + direction]

    def recurrent_weights(self) -> list[torch.Tensor]:
        """The hidden-to-hidden weights this forward pass uses, DropConnect applied in training mode (see
        :func:`drop_connect`): one sample per cell, in cell order (layer-major, forward direction first)."""
        return drop_connect([cell.weight_hh for cell in self.cells], self.dropconnect, self.training,
                            allows_native_ops(self.backend))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                state: LayerStates | None = None) -> ONLSTMOutput:
        compiling = torch.compiler.is_compiling()
        if compiling:  # no data-dependent checks in a compiled graph: a given mask counts as ragged
            full, lengths = mask is None, None if mask is None else mask.sum(1)
        else:
            given, mask = mask, self.check_inputs(x, mask)
            lengths = mask.sum(1)
            # whether every row is full matters only to a left-to-right encoder that starts from a given state
            # (a stream's next window): only then are the lengths read on the host. A mask with no state means
            # no carry (a stream's first window passes mask None), so a training step reads nothing
            full = given is None or (not self.bidirectional and state is not None
                                     and bool((lengths == x.size(1)).all()))
        if lengths is None:
            lengths = torch.full((x.size(0),), x.size(1), dtype=torch.long, device=x.device)
        carry = self.carries_state(full, state)
        if state is not None:
            check_layer_states(state, ("h", "c"), self.hidden_sizes, x)
        weights = self.recurrent_weights()
        dirs, symmetric = self.num_directions, self.master_input == "symmetric"

        layers, dist_forget, dist_input, finals = [], [], [], []
        layer_input = x
        for layer in range(self.num_layers):
            if layer > 0:
                layer_input = locked_dropout(layer_input, self.dropout, self.training)
            cells = self.cells[layer * dirs : (layer + 1) * dirs]
            if dirs == 1:  # no stack: views cost nothing
                w_ih, bias, w_hh = cells[0].weight_ih[None], (cells[0].bias_ih + cells[0].bias_hh)[None], \
                    weights[layer][None]
            else:
                w_ih = torch.stack([cell.weight_ih for cell in cells])
                bias = torch.stack([cell.bias_ih + cell.bias_hh for cell in cells])
                w_hh = torch.stack(weights[layer * dirs : (layer + 1) * dirs])
            start = None if state is None else (state[layer][0][None], state[layer][1][None])
            hidden, d_f, d_i, c_last = run_layer(layer_input, lengths, w_ih, bias, w_hh, symmetric, self.backend,
                                                 start)
            if carry:  # left to right on a full batch: the state after the last step, to start the next window from
                finals.append((hidden[:, -1].clone(), c_last[0]))
            layers.append(hidden)
            dist_forget.append(d_f)
            dist_input.append(d_i)
            layer_input = hidden

        return ONLSTMOutput(
            hidden=layers[-1],
            layers=tuple(layers),
            distances=torch.stack(dist_forget),
            input_distances=torch.stack(dist_input),
            state=tuple(finals) if carry else None,
        )

    def load_reference_state_dict(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Loads weights of the authors' ``ONLSTMStack`` (yikangshen/Ordered-Neurons, ``ON_LSTM.py``).

        Their keys are ``cells.{k}.ih.0.weight``, ``cells.{k}.ih.0.bias``, ``cells.{k}.hh.weight`` and
        ``cells.{k}.hh.bias`` for layer ``k``; their gate order is the one this class uses (see
        :class:`ONLSTMCell`), so rows are copied unchanged. Only unidirectional encoders qualify, with the stack's
        sizes (for their language model ``ONLSTMStack([400, 1150, 1150, 400], chunk_size=10)``:
        ``ONLSTM(400, [1150, 1150, 400], 10, num_layers=3)``). Their DropConnect keeps weights unscaled in training and multiplies them by
        ``1 - p`` in eval, ours rescales in training (see :func:`drop_connect`), so ``hh.weight`` is multiplied
        by ``1 - self.dropconnect``: with the same ``dropconnect`` both models then compute the same function in
        eval mode and the same distribution of functions in training.
        """
        if self.bidirectional:
            raise ValueError("load_reference_state_dict needs a unidirectional encoder (the authors' is)")
        expected = {f"cells.{k}.{n}" for k in range(self.num_layers) for n in
                    ("ih.0.weight", "ih.0.bias", "hh.weight", "hh.bias")}
        missing, unexpected = expected - set(state_dict), set(state_dict) - expected
        if missing or unexpected:
            raise ValueError(
                f"state_dict does not match a {self.num_layers}-layer ONLSTMStack: "
                f"missing {sorted(missing)}, unexpected {sorted(unexpected)}"
            )
        with torch.no_grad():
            for k in range(self.num_layers):
                cell = self.cell(k)
                pairs = {
                    "weight_ih": state_dict[f"cells.{k}.ih.0.weight"],
                    "bias_ih": state_dict[f"cells.{k}.ih.0.bias"],
                    "weight_hh": state_dict[f"cells.{k}.hh.weight"] * (1.0 - self.dropconnect),
                    "bias_hh": state_dict[f"cells.{k}.hh.bias"],
                }
                for name, value in pairs.items():
                    target = getattr(cell, name)
                    if target.shape != value.shape:
                        raise ValueError(
                            f"layer {k} {name}: expected shape {tuple(target.shape)}, got {tuple(value.shape)}"
                        )
                    target.copy_(value)
