"""Sequence encoders: ON-LSTM and library RNNs behind one contract, and the dependency-guided stack."""

from .base import EncoderOutput, SequenceEncoder, TreeEncoder, encode
from .dependency_guided import DependencyGuidedEncoder
from .onlstm import ONLSTM
from .onlstm_cell import ONLSTMCell
from .reference import ReferenceONLSTMCell
from .rnn import GRU, LSTM

__all__ = ["EncoderOutput", "SequenceEncoder", "TreeEncoder", "encode", "ONLSTM", "ONLSTMCell",
           "ReferenceONLSTMCell", "LSTM", "GRU", "DependencyGuidedEncoder"]
