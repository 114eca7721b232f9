"""Gluon neural-network layers (``gluon.nn``)."""
from ..block import Block, HybridBlock, HybridSequential, Sequential
from .basic_layers import Activation, Dense, Flatten, HybridLambda, Identity, Lambda
