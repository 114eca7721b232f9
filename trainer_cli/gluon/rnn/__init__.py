"""Recurrent layers and cells (``gluon.rnn``): MXNet 1.9.1's names, parameters and numbers."""
from .rnn_cell import (BidirectionalCell, DropoutCell, GRUCell, HybridRecurrentCell,  # noqa: F401
                       HybridSequentialRNNCell, LSTMCell, ModifierCell, RecurrentCell, RNNCell,
                       ResidualCell, SequentialRNNCell, ZoneoutCell)
from .rnn_layer import GRU, LSTM, RNN  # noqa: F401

__all__ = ["RecurrentCell", "HybridRecurrentCell", "RNNCell", "LSTMCell", "GRUCell",
           "SequentialRNNCell", "HybridSequentialRNNCell", "DropoutCell", "ModifierCell",
           "ZoneoutCell", "ResidualCell", "BidirectionalCell", "RNN", "LSTM", "GRU"]
