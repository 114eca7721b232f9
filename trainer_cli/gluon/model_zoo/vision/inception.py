"""Inception v3 (Szegedy et al. 2015), for 299x299 inputs."""
from ... import nn
from ...block import HybridBlock
from ...contrib.nn import HybridConcurrent
from ..model_store import load_pretrained

__all__ = ["Inception3", "inception_v3"]


def _conv(channels, kernel_size, strides=None, padding=None):
    """Convolution without bias, BatchNorm (epsilon 0.001), ReLU."""
    kwargs = {"channels": channels, "kernel_size": kernel_size}
    if strides is not None:
        kwargs["strides"] = strides
    if padding is not None:
        kwargs["padding"] = padding
    out = nn.HybridSequential(prefix="")
    out.add(nn.Conv2D(use_bias=False, **kwargs), nn.BatchNorm(epsilon=0.001), nn.Activation("relu"))
    return out


def _branch(pool, *convs):
    """An optional pooling ("avg": 3x3 stride 1; "max": 3x3 stride 2), then convolutions given as
    (channels, kernel, strides, padding)."""
    out = nn.HybridSequential(prefix="")
    if pool == "avg":
        out.add(nn.AvgPool2D(pool_size=3, strides=1, padding=1))
    elif pool == "max":
        out.add(nn.MaxPool2D(pool_size=3, strides=2))
    for spec in convs:
        out.add(_conv(*spec))
    return out


def _module(prefix, *branches):
    out = HybridConcurrent(axis=1, prefix=prefix)
    with out.name_scope():
        for make in branches:
            out.add(make())
    return out


def _split(channels):
    """A 1x3 and a 3x1 convolution side by side (module E)."""
    out = HybridConcurrent(axis=1, prefix="")
    out.add(_branch(None, (channels, (1, 3), None, (0, 1))),
            _branch(None, (channels, (3, 1), None, (1, 0))))
    return out


def _module_a(pool_features, prefix):
    return _module(prefix,
                   lambda: _branch(None, (64, 1)),
                   lambda: _branch(None, (48, 1), (64, 5, None, 2)),
                   lambda: _branch(None, (64, 1), (96, 3, None, 1), (96, 3, None, 1)),
                   lambda: _branch("avg", (pool_features, 1)))


def _module_b(prefix):
    return _module(prefix,
                   lambda: _branch(None, (384, 3, 2)),
                   lambda: _branch(None, (64, 1), (96, 3, None, 1), (96, 3, 2)),
                   lambda: _branch("max"))


def _module_c(c7, prefix):
    return _module(prefix,
                   lambda: _branch(None, (192, 1)),
                   lambda: _branch(None, (c7, 1), (c7, (1, 7), None, (0, 3)),
                                   (192, (7, 1), None, (3, 0))),
                   lambda: _branch(None, (c7, 1), (c7, (7, 1), None, (3, 0)),
                                   (c7, (1, 7), None, (0, 3)), (c7, (7, 1), None, (3, 0)),
                                   (192, (1, 7), None, (0, 3))),
                   lambda: _branch("avg", (192, 1)))


def _module_d(prefix):
    return _module(prefix,
                   lambda: _branch(None, (192, 1), (320, 3, 2)),
                   lambda: _branch(None, (192, 1), (192, (1, 7), None, (0, 3)),
                                   (192, (7, 1), None, (3, 0)), (192, 3, 2)),
                   lambda: _branch("max"))


def _then_split(first):
    def make():
        out = nn.HybridSequential(prefix="")
        out.add(first())
        out.add(_split(384))
        return out
    return make


def _module_e(prefix):
    return _module(prefix,
                   lambda: _branch(None, (320, 1)),
                   _then_split(lambda: _branch(None, (384, 1))),
                   _then_split(lambda: _branch(None, (448, 1), (384, 3, None, 1))),
                   lambda: _branch("avg", (192, 1)))


class Inception3(HybridBlock):
    """The stem, modules A1-A3, B, C1-C4, D, E1-E2, an 8x8 average pooling, dropout 0.5 and
    ``output``."""

    def __init__(self, classes=1000, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(_conv(32, 3, 2), _conv(32, 3), _conv(64, 3, None, 1),
                              nn.MaxPool2D(pool_size=3, strides=2), _conv(80, 1), _conv(192, 3),
                              nn.MaxPool2D(pool_size=3, strides=2))
            self.features.add(_module_a(32, "A1_"), _module_a(64, "A2_"), _module_a(64, "A3_"),
                              _module_b("B_"))
            for c7, prefix in ((128, "C1_"), (160, "C2_"), (160, "C3_"), (192, "C4_")):
                self.features.add(_module_c(c7, prefix))
            self.features.add(_module_d("D_"), _module_e("E1_"), _module_e("E2_"),
                              nn.AvgPool2D(pool_size=8), nn.Dropout(0.5))
            self.output = nn.Dense(classes)

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


def inception_v3(pretrained=False, ctx=None, root=None, **kwargs):
    """Inception v3; ``pretrained=True`` loads MXNet's ImageNet weights from the local store."""
    net = Inception3(**kwargs)
    if pretrained:
        load_pretrained(net, "inceptionv3", root, ctx)
    return net
