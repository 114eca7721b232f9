"""SqueezeNet 1.0 and 1.1 (Iandola et al. 2016)."""
from ... import nn
from ...block import HybridBlock
from ...contrib.nn import HybridConcurrent
from ..model_store import load_pretrained

__all__ = ["SqueezeNet", "get_squeezenet", "squeezenet1_0", "squeezenet1_1"]

# The layers after the stem: "pool" or a fire module's (squeeze, expand 1x1, expand 3x3).
_BODY = {"1.0": [(16, 64, 64), (16, 64, 64), (32, 128, 128), "pool", (32, 128, 128),
                 (48, 192, 192), (48, 192, 192), (64, 256, 256), "pool", (64, 256, 256)],
         "1.1": [(16, 64, 64), (16, 64, 64), "pool", (32, 128, 128), (32, 128, 128), "pool",
                 (48, 192, 192), (48, 192, 192), (64, 256, 256), (64, 256, 256)]}
_STEM = {"1.0": (96, 7), "1.1": (64, 3)}


def _conv_relu(channels, kernel_size, padding=0):
    out = nn.HybridSequential(prefix="")
    out.add(nn.Conv2D(channels, kernel_size, padding=padding), nn.Activation("relu"))
    return out


def _fire(squeeze, expand1x1, expand3x3):
    out = nn.HybridSequential(prefix="")
    out.add(_conv_relu(squeeze, 1))
    expand = HybridConcurrent(axis=1, prefix="")
    expand.add(_conv_relu(expand1x1, 1), _conv_relu(expand3x3, 3, 1))
    out.add(expand)
    return out


def _pool():
    return nn.MaxPool2D(pool_size=3, strides=2, ceil_mode=True)


class SqueezeNet(HybridBlock):
    """Fire modules (a 1x1 squeeze, then 1x1 and 3x3 expansions concatenated); the classifier is a
    1x1 convolution and a 13x13 average pooling (224x224 inputs)."""

    def __init__(self, version, classes=1000, **kwargs):
        super().__init__(**kwargs)
        if version not in _BODY:
            raise ValueError("Unsupported SqueezeNet version %s: 1.0 or 1.1 expected" % (version,))
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            channels, kernel = _STEM[version]
            self.features.add(nn.Conv2D(channels, kernel_size=kernel, strides=2),
                              nn.Activation("relu"), _pool())
            for layer in _BODY[version]:
                self.features.add(_pool() if layer == "pool" else _fire(*layer))
            self.features.add(nn.Dropout(0.5))
            self.output = nn.HybridSequential(prefix="")
            self.output.add(nn.Conv2D(classes, kernel_size=1), nn.Activation("relu"),
                            nn.AvgPool2D(13), nn.Flatten())

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


def get_squeezenet(version, pretrained=False, ctx=None, root=None, **kwargs):
    net = SqueezeNet(version, **kwargs)
    if pretrained:
        load_pretrained(net, "squeezenet%s" % version, root, ctx)
    return net


def squeezenet1_0(**kwargs):
    """SqueezeNet 1.0."""
    return get_squeezenet("1.0", **kwargs)


def squeezenet1_1(**kwargs):
    """SqueezeNet 1.1: 2.4x less computation than 1.0 at the same accuracy."""
    return get_squeezenet("1.1", **kwargs)
