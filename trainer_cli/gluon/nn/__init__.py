"""Gluon neural-network layers (``gluon.nn``)."""
from ..block import Block, HybridBlock, HybridSequential, Sequential
from ..symbol_block import SymbolBlock
from .basic_layers import Activation, Dense, Flatten, HybridLambda, Identity, Lambda
from .conv_layers import (AvgPool1D, AvgPool2D, AvgPool3D, Conv1D, Conv1DTranspose, Conv2D,
                          Conv2DTranspose, Conv3D, Conv3DTranspose, GlobalAvgPool1D,
                          GlobalAvgPool2D, GlobalAvgPool3D, GlobalMaxPool1D, GlobalMaxPool2D,
                          GlobalMaxPool3D, MaxPool1D, MaxPool2D, MaxPool3D, ReflectionPad2D)
from .norm_layers import (BatchNorm, BatchNormReLU, Dropout, Embedding, GroupNorm, InstanceNorm,
                          LayerNorm)
from .activations import ELU, GELU, LeakyReLU, PReLU, SELU, Swish
