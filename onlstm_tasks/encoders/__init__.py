"""Sequence encoders behind one contract (:mod:`.base`: ``SequenceEncoder``, ``EncoderOutput`` and its capability subclasses, ``EncoderFactory``,
the mask check): the ON-LSTM (:mod:`.onlstm`, its own subpackage), the library LSTM/GRU, the LSTM family run by
``CellStackEncoder``, the dependency-guided and tree-LSTM stacks, ``IndependentDirections`` and the default
encoders of each task (:mod:`.defaults`).

Plain torch, no Lightning. By the layer order (DESIGN.md) it may import only interaction, trees and errors below
it (``TreeSource`` and the tree helpers are passed down, never imported from above); data, embedders, modules and
tasks import it.
"""

from .base import EncoderOutput, ONLSTMOutput, RecurrentOutput, SequenceEncoder, TreeEncoder, TreeOutput, encode
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

__all__ = ["EncoderOutput", "ONLSTMOutput", "RecurrentOutput", "TreeOutput", "SequenceEncoder", "TreeEncoder", "encode", "ONLSTM", "ONLSTMCell",
           "ReferenceONLSTMCell", "LSTM", "GRU", "DependencyGuidedEncoder", "IndependentDirections", "CellStackEncoder", "RecurrentCell",
           "PeepholeLSTM", "CIFGLSTM", "NoForgetLSTM", "NestedLSTM", "NestedLSTMCell",
           "ChildSumTreeLSTM", "SLSTM", "SLSTMCell", "MLSTM", "MLSTMCell"]
