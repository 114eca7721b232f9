"""VGG 11/13/16/19 (Simonyan and Zisserman 2014), with or without BatchNorm."""
from .... import initializer
from ... import nn
from ...block import HybridBlock
from ..model_store import load_pretrained

__all__ = ["VGG", "get_vgg"] + ["vgg%d%s" % (n, bn) for n in (11, 13, 16, 19) for bn in ("", "_bn")]

# depth -> (convolutions per block, channels per block)
_SPEC = {11: ([1, 1, 2, 2, 2], [64, 128, 256, 512, 512]),
         13: ([2, 2, 2, 2, 2], [64, 128, 256, 512, 512]),
         16: ([2, 2, 3, 3, 3], [64, 128, 256, 512, 512]),
         19: ([2, 2, 4, 4, 4], [64, 128, 256, 512, 512])}


class VGG(HybridBlock):
    """Blocks of 3x3 convolutions (each optionally with BatchNorm) ending in a 2x2 max pooling,
    then two 4096-unit layers with dropout, then ``output``. The initializers are MXNet's."""

    def __init__(self, layers, filters, classes=1000, batch_norm=False, **kwargs):
        super().__init__(**kwargs)
        if len(layers) != len(filters):
            raise ValueError("VGG: layers and filters must have the same length")
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            for count, channels in zip(layers, filters):
                for _ in range(count):
                    self.features.add(nn.Conv2D(
                        channels, kernel_size=3, padding=1, bias_initializer="zeros",
                        weight_initializer=initializer.Xavier(rnd_type="gaussian", factor_type="out",
                                                              magnitude=2)))
                    if batch_norm:
                        self.features.add(nn.BatchNorm())
                    self.features.add(nn.Activation("relu"))
                self.features.add(nn.MaxPool2D(strides=2))
            for _ in range(2):
                self.features.add(nn.Dense(4096, activation="relu", weight_initializer="normal",
                                           bias_initializer="zeros"), nn.Dropout(rate=0.5))
            self.output = nn.Dense(classes, weight_initializer="normal", bias_initializer="zeros")

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


def get_vgg(num_layers, pretrained=False, ctx=None, root=None, **kwargs):
    """VGG of depth 11, 13, 16 or 19 (``batch_norm=True`` for the BatchNorm variant)."""
    if num_layers not in _SPEC:
        raise ValueError("Invalid number of layers: %r. Options are %s" % (num_layers, sorted(_SPEC)))
    layers, filters = _SPEC[num_layers]
    net = VGG(layers, filters, **kwargs)
    if pretrained:
        load_pretrained(net, "vgg%d%s" % (num_layers, "_bn" if kwargs.get("batch_norm") else ""),
                        root, ctx)
    return net


def _factory(depth, batch_norm):
    def build(**kwargs):
        if batch_norm:
            kwargs["batch_norm"] = True
        return get_vgg(depth, **kwargs)
    build.__name__ = build.__qualname__ = "vgg%d%s" % (depth, "_bn" if batch_norm else "")
    build.__doc__ = "VGG-%d%s." % (depth, " with BatchNorm" if batch_norm else "")
    return build


for _n in _SPEC:
    for _bn in (False, True):
        globals()["vgg%d%s" % (_n, "_bn" if _bn else "")] = _factory(_n, _bn)
