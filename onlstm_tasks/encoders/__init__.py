"""Sequence encoders: ON-LSTM and library RNNs behind one contract, and the dependency-guided stack."""

from .base import EncoderOutput, SequenceEncoder, TreeEncoder, encode
from .cell_stack import CellStackEncoder, RecurrentCell
from .dependency_guided import DependencyGuidedEncoder
from .independent_directions import IndependentDirections
from .lstm_variants import CIFGLSTM, NoForgetLSTM, PeepholeLSTM
from .mlstm import MLSTM, MLSTMCell
from .nested_lstm import NestedLSTM, NestedLSTMCell
from .onlstm import ONLSTM, ONLSTMCell, ReferenceONLSTMCell
from .rnn import GRU, LSTM
from .slstm import SLSTM, SLSTMCell
from .tree_lstm import ChildSumTreeLSTM

__all__ = ["EncoderOutput", "SequenceEncoder", "TreeEncoder", "encode", "ONLSTM", "ONLSTMCell",
           "ReferenceONLSTMCell", "LSTM", "GRU", "DependencyGuidedEncoder", "IndependentDirections", "CellStackEncoder", "RecurrentCell",
           "PeepholeLSTM", "CIFGLSTM", "NoForgetLSTM", "NestedLSTM", "NestedLSTMCell",
           "ChildSumTreeLSTM", "SLSTM", "SLSTMCell", "MLSTM", "MLSTMCell"]
