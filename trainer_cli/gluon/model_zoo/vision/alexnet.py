"""AlexNet (Krizhevsky et al. 2012), as MXNet's model zoo defines it (one tower, no LRN)."""
from ... import nn
from ...block import HybridBlock
from ..model_store import load_pretrained

__all__ = ["AlexNet", "alexnet"]

# (channels, kernel, stride, padding, max-pool after)
_CONVS = [(64, 11, 4, 2, True), (192, 5, 1, 2, True), (384, 3, 1, 1, False),
          (256, 3, 1, 1, False), (256, 3, 1, 1, True)]


class AlexNet(HybridBlock):
    """Five ReLU convolutions, three max poolings, two 4096-unit layers with dropout 0.5."""

    def __init__(self, classes=1000, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            with self.features.name_scope():
                for channels, kernel, stride, pad, pool in _CONVS:
                    self.features.add(nn.Conv2D(channels, kernel_size=kernel, strides=stride,
                                                padding=pad, activation="relu"))
                    if pool:
                        self.features.add(nn.MaxPool2D(pool_size=3, strides=2))
                self.features.add(nn.Flatten())
                for _ in range(2):
                    self.features.add(nn.Dense(4096, activation="relu"), nn.Dropout(0.5))
            self.output = nn.Dense(classes)

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


def alexnet(pretrained=False, ctx=None, root=None, **kwargs):
    """AlexNet; ``pretrained=True`` loads MXNet's ImageNet weights from the local model store."""
    net = AlexNet(**kwargs)
    if pretrained:
        load_pretrained(net, "alexnet", root, ctx)
    return net
