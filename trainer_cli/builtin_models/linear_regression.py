"""Linear regression: ``outputs`` Dense units, no activation."""
from trainer_cli.gluon import nn


def build(outputs: int = 1, in_units: int = 0):
    return nn.Dense(outputs, in_units=in_units)
