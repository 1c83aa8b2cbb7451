"""Migrating weights from the authors' ONLSTMStack (yikangshen/Ordered-Neurons).

``AuthorsLayoutStack`` below reproduces, for the test only, what their module computes in eval mode: the same
state-dict keys (``cells.{k}.ih.0.*``, ``cells.{k}.hh.*``), time-major inputs, the gate split of their
``ONLSTMCell.forward`` and their eval-time DropConnect scaling ``weight * (1 - p)``. It is written here from
their published description, independently of the package's encoder.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from onlstm_tasks.encoders import ONLSTM


class AuthorsLayoutCell(nn.Module):
    def __init__(self, input_size, hidden_size, chunk_size, dropconnect):
        super().__init__()
        self.hidden_size, self.chunk_size = hidden_size, chunk_size
        self.n_chunk = hidden_size // chunk_size
        self.ih = nn.Sequential(nn.Linear(input_size, 4 * hidden_size + 2 * self.n_chunk))
        self.hh = nn.Linear(hidden_size, 4 * hidden_size + 2 * self.n_chunk)
        self.dropconnect = dropconnect

    def step(self, projected, h, c):
        gates = projected + F.linear(h, self.hh.weight * (1 - self.dropconnect), self.hh.bias)
        n = self.n_chunk
        master_in_logits, master_forget_logits = gates[:, :n], gates[:, n : 2 * n]
        blocks = gates[:, 2 * n :].reshape(-1, 4 * n, self.chunk_size)
        out_g, cell_g, in_g, forget_g = blocks[:, :n], blocks[:, n : 2 * n], blocks[:, 2 * n : 3 * n], blocks[:, 3 * n :]
        master_in = 1.0 - torch.cumsum(torch.softmax(master_in_logits, -1), -1)
        master_forget = torch.cumsum(torch.softmax(master_forget_logits, -1), -1)
        d_forget = 1.0 - master_forget.mean(-1)
        d_in = master_in.mean(-1)
        mi, mf = master_in[..., None], master_forget[..., None]
        overlap = mf * mi
        f = torch.sigmoid(forget_g) * overlap + (mf - overlap)
        i = torch.sigmoid(in_g) * overlap + (mi - overlap)
        c = f * c + i * torch.tanh(cell_g)
        h = (torch.sigmoid(out_g) * torch.tanh(c)).reshape(-1, self.hidden_size)
        return h, c, d_forget, d_in


class AuthorsLayoutStack(nn.Module):
    def __init__(self, sizes, chunk_size, dropconnect):
        super().__init__()
        self.cells = nn.ModuleList(
            AuthorsLayoutCell(sizes[k], sizes[k + 1], chunk_size, dropconnect) for k in range(len(sizes) - 1)
        )

    def forward(self, x):  # x: [T, B, D]
        layer_in, d_forgets, d_ins = x, [], []
        for cell in self.cells:
            projected = cell.ih(layer_in)
            h = x.new_zeros(x.size(1), cell.hidden_size)
            c = x.new_zeros(x.size(1), cell.n_chunk, cell.chunk_size)
            hs, dfs, dis = [], [], []
            for t in range(x.size(0)):
                h, c, d_f, d_i = cell.step(projected[t], h, c)
                hs.append(h)
                dfs.append(d_f)
                dis.append(d_i)
            layer_in = torch.stack(hs)
            d_forgets.append(torch.stack(dfs))
            d_ins.append(torch.stack(dis))
        return layer_in, torch.stack(d_forgets), torch.stack(d_ins)  # [T,B,H], [L,T,B], [L,T,B]


@pytest.mark.parametrize("dropconnect", [0.0, 0.3])
@pytest.mark.parametrize("sizes", [[10, 16, 16, 16], [10, 24, 24, 8]], ids=["uniform", "lm-shaped"])
def test_loaded_weights_reproduce_the_authors_outputs(dropconnect, sizes):
    """Uniform layers, and the shape of their language models (ninp -> nhid -> nhid -> ninp, e.g. 400/1150/1150/400)."""
    torch.manual_seed(0)
    theirs = AuthorsLayoutStack(sizes, chunk_size=4, dropconnect=dropconnect).eval()
    hidden = sizes[1] if len(set(sizes[1:])) == 1 else sizes[1:]
    ours = ONLSTM(sizes[0], hidden, 4, num_layers=len(sizes) - 1, dropconnect=dropconnect).eval()
    ours.load_reference_state_dict(theirs.state_dict())

    x = torch.randn(9, 3, sizes[0])
    h, d_forget, d_in = theirs(x)
    out = ours(x.transpose(0, 1))
    assert (out.hidden - h.transpose(0, 1)).abs().max() < 1e-5
    assert (out.distances[:, 0] - d_forget.transpose(1, 2)).abs().max() < 1e-5
    assert (out.input_distances[:, 0] - d_in.transpose(1, 2)).abs().max() < 1e-5


def test_mismatched_reference_state_dict_is_rejected():
    theirs = AuthorsLayoutStack([10, 16, 16], chunk_size=4, dropconnect=0.0)
    with pytest.raises(ValueError, match="missing"):
        ONLSTM(10, 16, 4, num_layers=3).load_reference_state_dict(theirs.state_dict())
    with pytest.raises(ValueError, match="expected shape"):
        ONLSTM(10, 16, 8, num_layers=2).load_reference_state_dict(theirs.state_dict())
    with pytest.raises(ValueError, match="unidirectional"):
        ONLSTM(10, 16, 4, num_layers=2, bidirectional=True).load_reference_state_dict(theirs.state_dict())
    with pytest.raises(ValueError, match="expected shape"):  # per-layer sizes must match too
        ONLSTM(10, [16, 8], 4, num_layers=2).load_reference_state_dict(theirs.state_dict())


def test_per_layer_sizes_shape_the_stack():
    enc = ONLSTM(6, [12, 8], 4, num_layers=2, bidirectional=True, dropconnect=0.3)
    assert enc.output_size == 16 and enc.cell(1).input_size == 24 and enc.cell(1).hidden_size == 8
    x, mask = torch.randn(2, 5, 6), torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    out = enc.train()(x, mask)  # DropConnect masks of two shapes
    assert out.hidden.shape == (2, 5, 16) and [layer.size(-1) for layer in out.layers] == [24, 16]
    assert out.distances.shape == (2, 2, 2, 5)
    with pytest.raises(ValueError, match="one size or one per layer"):
        ONLSTM(6, [12, 8], 4, num_layers=3)
    with pytest.raises(ValueError, match="multiple of chunk_size"):
        ONLSTM(6, [12, 10], 4, num_layers=2)
