"""DenseNet 121/161/169/201 (Huang et al. 2016)."""
from ... import nn
from ...block import HybridBlock
from ...contrib.nn import HybridConcurrent, Identity
from ..model_store import load_pretrained

__all__ = ["DenseNet", "get_densenet", "densenet121", "densenet161", "densenet169", "densenet201"]

# depth -> (stem channels, growth rate, layers per dense block)
_SPEC = {121: (64, 32, [6, 12, 24, 16]), 161: (96, 48, [6, 12, 36, 24]),
         169: (64, 32, [6, 12, 32, 32]), 201: (64, 32, [6, 12, 48, 32])}


def _bn_relu_conv(out, channels, kernel_size, padding=0):
    out.add(nn.BatchNorm(), nn.Activation("relu"),
            nn.Conv2D(channels, kernel_size=kernel_size, padding=padding, use_bias=False))


def _dense_layer(growth_rate, bn_size, dropout):
    new = nn.HybridSequential(prefix="")
    _bn_relu_conv(new, bn_size * growth_rate, 1)
    _bn_relu_conv(new, growth_rate, 3, 1)
    if dropout:
        new.add(nn.Dropout(dropout))
    # The layer's input passes through beside its new features, concatenated on channels.
    out = HybridConcurrent(axis=1, prefix="")
    out.add(Identity(), new)
    return out


def _dense_block(count, bn_size, growth_rate, dropout, index):
    block = nn.HybridSequential(prefix="stage%d_" % index)
    with block.name_scope():
        for _ in range(count):
            block.add(_dense_layer(growth_rate, bn_size, dropout))
    return block


def _transition(channels):
    out = nn.HybridSequential(prefix="")
    _bn_relu_conv(out, channels, 1)
    out.add(nn.AvgPool2D(pool_size=2, strides=2))
    return out


class DenseNet(HybridBlock):
    """A 7x7 stem, dense blocks separated by transitions that halve the channels and the size,
    then BatchNorm, ReLU, a 7x7 average pooling (224x224 inputs) and ``output``."""

    def __init__(self, num_init_features, growth_rate, block_config, bn_size=4, dropout=0,
                 classes=1000, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(nn.Conv2D(num_init_features, kernel_size=7, strides=2, padding=3,
                                        use_bias=False), nn.BatchNorm(), nn.Activation("relu"),
                              nn.MaxPool2D(pool_size=3, strides=2, padding=1))
            channels = num_init_features
            for i, count in enumerate(block_config):
                self.features.add(_dense_block(count, bn_size, growth_rate, dropout, i + 1))
                channels += count * growth_rate
                if i != len(block_config) - 1:
                    channels //= 2
                    self.features.add(_transition(channels))
            self.features.add(nn.BatchNorm(), nn.Activation("relu"), nn.AvgPool2D(pool_size=7),
                              nn.Flatten())
            self.output = nn.Dense(classes)

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


def get_densenet(num_layers, pretrained=False, ctx=None, root=None, **kwargs):
    if num_layers not in _SPEC:
        raise ValueError("Invalid number of layers: %r. Options are %s" % (num_layers, sorted(_SPEC)))
    init_features, growth_rate, config = _SPEC[num_layers]
    net = DenseNet(init_features, growth_rate, config, **kwargs)
    if pretrained:
        load_pretrained(net, "densenet%d" % num_layers, root, ctx)
    return net


def _factory(depth):
    def build(**kwargs):
        return get_densenet(depth, **kwargs)
    build.__name__ = build.__qualname__ = "densenet%d" % depth
    build.__doc__ = "DenseNet-%d." % depth
    return build


for _n in _SPEC:
    globals()["densenet%d" % _n] = _factory(_n)
