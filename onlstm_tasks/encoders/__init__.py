"""Sequence encoders: ON-LSTM and library RNNs behind one contract."""

from .base import EncoderOutput, SequenceEncoder
from .onlstm import ONLSTM
from .onlstm_cell import ONLSTMCell
from .reference import ReferenceONLSTMCell
from .rnn import GRU, LSTM

__all__ = ["EncoderOutput", "SequenceEncoder", "ONLSTM", "ONLSTMCell", "ReferenceONLSTMCell", "LSTM", "GRU"]
