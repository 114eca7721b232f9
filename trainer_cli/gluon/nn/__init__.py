"""Gluon neural-network layers (``gluon.nn``)."""
from ..block import Block, HybridBlock, HybridSequential, Sequential
from .basic_layers import Activation, Dense, Flatten, HybridLambda, Identity, Lambda
from .conv_layers import (AvgPool1D, AvgPool2D, AvgPool3D, Conv1D, Conv2D, Conv3D, GlobalAvgPool1D,
                          GlobalAvgPool2D, GlobalAvgPool3D, GlobalMaxPool1D, GlobalMaxPool2D,
                          GlobalMaxPool3D, MaxPool1D, MaxPool2D, MaxPool3D)
from .norm_layers import BatchNorm, Dropout, Embedding, LayerNorm
from .activations import ELU, GELU, LeakyReLU, PReLU, SELU, Swish
