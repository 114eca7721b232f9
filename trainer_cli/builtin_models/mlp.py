"""A multi-layer perceptron classifier: hidden Dense layers with an activation, then logits."""
from trainer_cli.gluon import nn


def build(hidden=(128, 64), classes: int = 10, activation: str = "relu", dropout: float = 0.0):
    net = nn.HybridSequential()
    with net.name_scope():
        for units in hidden:
            net.add(nn.Dense(units, activation=activation))
            if dropout:
                net.add(nn.Dropout(dropout))
        net.add(nn.Dense(classes))
    return net
