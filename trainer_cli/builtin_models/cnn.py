"""A small convolutional classifier for square single-channel images (8x8 digits, 28x28 MNIST)."""
from trainer_cli.gluon import nn


def build(classes: int = 10, channels=(16, 32), image_size: int = 8, in_channels: int = 1):
    """Inputs may be flat (N, size*size) or images (N, C, H, W); flat ones are reshaped."""
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.HybridLambda(lambda F, x: x.reshape((-1, in_channels, image_size, image_size))))
        for c in channels:
            net.add(nn.Conv2D(c, kernel_size=3, padding=1, activation="relu"))
            net.add(nn.MaxPool2D(pool_size=2, strides=2))
        net.add(nn.Flatten())
        net.add(nn.Dense(64, activation="relu"))
        net.add(nn.Dense(classes))
    return net
