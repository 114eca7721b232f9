"""The tutorial's perceptron: one Dense unit on the raw features."""
from trainer_cli.gluon import nn


def build(units: int = 1):
    return nn.Dense(units)
