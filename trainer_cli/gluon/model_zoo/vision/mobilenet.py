"""MobileNet v1 (Howard et al. 2017) and v2 (Sandler et al. 2018) at any width multiplier."""
from ... import nn
from ...block import HybridBlock
from ..model_store import load_pretrained

__all__ = ["MobileNet", "MobileNetV2", "RELU6", "LinearBottleneck", "get_mobilenet",
           "get_mobilenet_v2", "mobilenet1_0", "mobilenet0_75", "mobilenet0_5", "mobilenet0_25",
           "mobilenet_v2_1_0", "mobilenet_v2_0_75", "mobilenet_v2_0_5", "mobilenet_v2_0_25"]


class RELU6(HybridBlock):
    """min(max(x, 0), 6)."""

    def hybrid_forward(self, F, x):
        return F.clip(x, 0, 6, name="relu6")


def _conv_bn(out, channels, kernel=1, stride=1, pad=0, groups=1, active=True, relu6=False):
    out.add(nn.Conv2D(channels, kernel, stride, pad, groups=groups, use_bias=False),
            nn.BatchNorm(scale=True))
    if active:
        out.add(RELU6() if relu6 else nn.Activation("relu"))


def _depthwise_separable(out, dw_channels, channels, stride):
    _conv_bn(out, dw_channels, kernel=3, stride=stride, pad=1, groups=dw_channels)
    _conv_bn(out, channels)


def _scaled(values, multiplier):
    return [int(v * multiplier) for v in values]


class MobileNet(HybridBlock):
    """A 3x3 stem and thirteen depthwise-separable convolutions, global average pooling and
    ``output``; every width scaled by ``multiplier``."""

    def __init__(self, multiplier=1.0, classes=1000, **kwargs):
        super().__init__(**kwargs)
        dw_channels = _scaled([32, 64] + [128] * 2 + [256] * 2 + [512] * 6 + [1024], multiplier)
        channels = _scaled([64] + [128] * 2 + [256] * 2 + [512] * 6 + [1024] * 2, multiplier)
        strides = [1, 2] * 3 + [1] * 5 + [2, 1]
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            with self.features.name_scope():
                _conv_bn(self.features, int(32 * multiplier), kernel=3, pad=1, stride=2)
                for dwc, c, s in zip(dw_channels, channels, strides):
                    _depthwise_separable(self.features, dwc, c, s)
                self.features.add(nn.GlobalAvgPool2D(), nn.Flatten())
            self.output = nn.Dense(classes)

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


class LinearBottleneck(HybridBlock):
    """Expand by ``t`` (1x1), depthwise 3x3, project (1x1, no activation); the input is added
    back when the shape allows."""

    def __init__(self, in_channels, channels, t, stride, **kwargs):
        super().__init__(**kwargs)
        self.use_shortcut = stride == 1 and in_channels == channels
        with self.name_scope():
            self.out = nn.HybridSequential()
            _conv_bn(self.out, in_channels * t, relu6=True)
            _conv_bn(self.out, in_channels * t, kernel=3, stride=stride, pad=1,
                     groups=in_channels * t, relu6=True)
            _conv_bn(self.out, channels, active=False)

    def hybrid_forward(self, F, x):
        out = self.out(x)
        return F.elemwise_add(out, x) if self.use_shortcut else out


class MobileNetV2(HybridBlock):
    """A 3x3 stem, seventeen linear bottlenecks, a 1x1 convolution to 1280 channels, global
    average pooling, and a 1x1 convolution as the classifier."""

    def __init__(self, multiplier=1.0, classes=1000, **kwargs):
        super().__init__(**kwargs)
        in_channels = _scaled([32] + [16] + [24] * 2 + [32] * 3 + [64] * 4 + [96] * 3 + [160] * 3,
                              multiplier)
        channels = _scaled([16] + [24] * 2 + [32] * 3 + [64] * 4 + [96] * 3 + [160] * 3 + [320],
                           multiplier)
        expansions = [1] + [6] * 16
        strides = [1, 2] * 2 + [1, 1, 2] + [1] * 6 + [2] + [1] * 3
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="features_")
            with self.features.name_scope():
                _conv_bn(self.features, int(32 * multiplier), kernel=3, stride=2, pad=1, relu6=True)
                for in_c, c, t, s in zip(in_channels, channels, expansions, strides):
                    self.features.add(LinearBottleneck(in_channels=in_c, channels=c, t=t, stride=s))
                _conv_bn(self.features, int(1280 * multiplier) if multiplier > 1.0 else 1280,
                         relu6=True)
                self.features.add(nn.GlobalAvgPool2D())
            self.output = nn.HybridSequential(prefix="output_")
            with self.output.name_scope():
                self.output.add(nn.Conv2D(classes, 1, use_bias=False, prefix="pred_"), nn.Flatten())

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


def _suffix(multiplier):
    # MXNet's file names: 1.0, 0.75, 0.5, 0.25
    text = "%.2f" % multiplier
    return text[:-1] if text in ("1.00", "0.50") else text


def get_mobilenet(multiplier, pretrained=False, ctx=None, root=None, **kwargs):
    net = MobileNet(multiplier, **kwargs)
    if pretrained:
        load_pretrained(net, "mobilenet%s" % _suffix(multiplier), root, ctx)
    return net


def get_mobilenet_v2(multiplier, pretrained=False, ctx=None, root=None, **kwargs):
    net = MobileNetV2(multiplier, **kwargs)
    if pretrained:
        load_pretrained(net, "mobilenetv2_%s" % _suffix(multiplier), root, ctx)
    return net


def _factory(getter, multiplier, name):
    def build(**kwargs):
        return getter(multiplier, **kwargs)
    build.__name__ = build.__qualname__ = name
    build.__doc__ = "%s at width multiplier %s." % (getter.__name__[4:], multiplier)
    return build


for _m, _tag in ((1.0, "1_0"), (0.75, "0_75"), (0.5, "0_5"), (0.25, "0_25")):
    globals()["mobilenet" + _tag] = _factory(get_mobilenet, _m, "mobilenet" + _tag)
    globals()["mobilenet_v2_" + _tag] = _factory(get_mobilenet_v2, _m, "mobilenet_v2_" + _tag)
