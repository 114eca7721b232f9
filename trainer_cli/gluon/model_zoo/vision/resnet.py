"""ResNet v1 (He et al. 2015) and v2 (pre-activation, He et al. 2016), with MXNet 1.9.1's
parameter names (``resnetv10_stage1_conv0_weight``, ...) so that its model-zoo files load."""
from ... import nn
from ...block import HybridBlock
from ..model_store import load_pretrained

__all__ = ["ResNetV1", "ResNetV2", "BasicBlockV1", "BasicBlockV2", "BottleneckV1", "BottleneckV2",
           "get_resnet"] + ["resnet%d_v%d" % (n, v) for v in (1, 2) for n in (18, 34, 50, 101, 152)]

# depth -> (residual unit, units per stage, channels: the stem's then each stage's)
_SPEC = {18: ("basic", [2, 2, 2, 2], [64, 64, 128, 256, 512]),
         34: ("basic", [3, 4, 6, 3], [64, 64, 128, 256, 512]),
         50: ("bottleneck", [3, 4, 6, 3], [64, 256, 512, 1024, 2048]),
         101: ("bottleneck", [3, 4, 23, 3], [64, 256, 512, 1024, 2048]),
         152: ("bottleneck", [3, 8, 36, 3], [64, 256, 512, 1024, 2048])}


def _conv3x3(channels, stride, in_channels):
    return nn.Conv2D(channels, kernel_size=3, strides=stride, padding=1, use_bias=False,
                     in_channels=in_channels)


def _shortcut_v1(channels, stride, in_channels):
    branch = nn.HybridSequential(prefix="")
    branch.add(nn.Conv2D(channels, kernel_size=1, strides=stride, use_bias=False,
                         in_channels=in_channels), nn.BatchNorm())
    return branch


class BasicBlockV1(HybridBlock):
    """Two 3x3 convolutions with BatchNorm; ReLU after the sum with the shortcut."""

    def __init__(self, channels, stride, downsample=False, in_channels=0, **kwargs):
        super().__init__(**kwargs)
        self.body = nn.HybridSequential(prefix="")
        self.body.add(_conv3x3(channels, stride, in_channels), nn.BatchNorm(), nn.Activation("relu"),
                      _conv3x3(channels, 1, channels), nn.BatchNorm())
        self.downsample = _shortcut_v1(channels, stride, in_channels) if downsample else None

    def hybrid_forward(self, F, x):
        shortcut = self.downsample(x) if self.downsample else x
        return F.Activation(shortcut + self.body(x), act_type="relu")


class BottleneckV1(HybridBlock):
    """1x1 (stride here, as MXNet's v1), 3x3, 1x1 convolutions with BatchNorm."""

    def __init__(self, channels, stride, downsample=False, in_channels=0, **kwargs):
        super().__init__(**kwargs)
        mid = channels // 4
        self.body = nn.HybridSequential(prefix="")
        self.body.add(nn.Conv2D(mid, kernel_size=1, strides=stride), nn.BatchNorm(),
                      nn.Activation("relu"), _conv3x3(mid, 1, mid), nn.BatchNorm(),
                      nn.Activation("relu"), nn.Conv2D(channels, kernel_size=1, strides=1),
                      nn.BatchNorm())
        self.downsample = _shortcut_v1(channels, stride, in_channels) if downsample else None

    def hybrid_forward(self, F, x):
        shortcut = self.downsample(x) if self.downsample else x
        return F.Activation(self.body(x) + shortcut, act_type="relu")


class BasicBlockV2(HybridBlock):
    """Pre-activation: BatchNorm and ReLU before each 3x3 convolution."""

    def __init__(self, channels, stride, downsample=False, in_channels=0, **kwargs):
        super().__init__(**kwargs)
        self.bn1 = nn.BatchNorm()
        self.conv1 = _conv3x3(channels, stride, in_channels)
        self.bn2 = nn.BatchNorm()
        self.conv2 = _conv3x3(channels, 1, channels)
        self.downsample = (nn.Conv2D(channels, 1, stride, use_bias=False, in_channels=in_channels)
                           if downsample else None)

    def hybrid_forward(self, F, x):
        x_act = F.Activation(self.bn1(x), act_type="relu")
        shortcut = self.downsample(x_act) if self.downsample else x
        out = self.conv1(x_act)
        out = self.conv2(F.Activation(self.bn2(out), act_type="relu"))
        return out + shortcut


class BottleneckV2(HybridBlock):
    """Pre-activation bottleneck: the stride on the 3x3 convolution."""

    def __init__(self, channels, stride, downsample=False, in_channels=0, **kwargs):
        super().__init__(**kwargs)
        mid = channels // 4
        self.bn1 = nn.BatchNorm()
        self.conv1 = nn.Conv2D(mid, kernel_size=1, strides=1, use_bias=False)
        self.bn2 = nn.BatchNorm()
        self.conv2 = _conv3x3(mid, stride, mid)
        self.bn3 = nn.BatchNorm()
        self.conv3 = nn.Conv2D(channels, kernel_size=1, strides=1, use_bias=False)
        self.downsample = (nn.Conv2D(channels, 1, stride, use_bias=False, in_channels=in_channels)
                           if downsample else None)

    def hybrid_forward(self, F, x):
        x_act = F.Activation(self.bn1(x), act_type="relu")
        shortcut = self.downsample(x_act) if self.downsample else x
        out = self.conv1(x_act)
        out = self.conv2(F.Activation(self.bn2(out), act_type="relu"))
        out = self.conv3(F.Activation(self.bn3(out), act_type="relu"))
        return out + shortcut


def _stage(unit, count, channels, stride, index, in_channels):
    stage = nn.HybridSequential(prefix="stage%d_" % index)
    with stage.name_scope():
        stage.add(unit(channels, stride, channels != in_channels, in_channels=in_channels, prefix=""))
        for _ in range(count - 1):
            stage.add(unit(channels, 1, False, in_channels=channels, prefix=""))
    return stage


def _stem(features, channels, thumbnail):
    if thumbnail:  # CIFAR-sized inputs: one 3x3 convolution, no down-sampling
        features.add(_conv3x3(channels, 1, 0))
    else:
        features.add(nn.Conv2D(channels, 7, 2, 3, use_bias=False), nn.BatchNorm(),
                     nn.Activation("relu"), nn.MaxPool2D(3, 2, 1))


class ResNetV1(HybridBlock):
    """``features`` (stem, four stages, global average pooling) then the ``output`` Dense layer.
    ``thumbnail=True`` replaces the 7x7 stem and its max pooling by one 3x3 convolution."""

    def __init__(self, block, layers, channels, classes=1000, thumbnail=False, **kwargs):
        super().__init__(**kwargs)
        if len(layers) != len(channels) - 1:
            raise ValueError("ResNetV1: channels needs one more entry than layers")
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            _stem(self.features, channels[0], thumbnail)
            for i, count in enumerate(layers):
                self.features.add(_stage(block, count, channels[i + 1], 1 if i == 0 else 2, i + 1,
                                         channels[i]))
            self.features.add(nn.GlobalAvgPool2D())
            self.output = nn.Dense(classes, in_units=channels[-1])

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


class ResNetV2(HybridBlock):
    """Pre-activation ResNet: a BatchNorm without scale or shift normalises the input first, and
    BatchNorm + ReLU close the last stage."""

    def __init__(self, block, layers, channels, classes=1000, thumbnail=False, **kwargs):
        super().__init__(**kwargs)
        if len(layers) != len(channels) - 1:
            raise ValueError("ResNetV2: channels needs one more entry than layers")
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(nn.BatchNorm(scale=False, center=False))
            _stem(self.features, channels[0], thumbnail)
            in_channels = channels[0]
            for i, count in enumerate(layers):
                self.features.add(_stage(block, count, channels[i + 1], 1 if i == 0 else 2, i + 1,
                                         in_channels))
                in_channels = channels[i + 1]
            self.features.add(nn.BatchNorm(), nn.Activation("relu"), nn.GlobalAvgPool2D(),
                              nn.Flatten())
            self.output = nn.Dense(classes, in_units=in_channels)

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


_UNITS = {1: {"basic": BasicBlockV1, "bottleneck": BottleneckV1},
          2: {"basic": BasicBlockV2, "bottleneck": BottleneckV2}}


def get_resnet(version, num_layers, pretrained=False, ctx=None, root=None, **kwargs):
    """ResNet ``version`` 1 or 2 of depth 18, 34, 50, 101 or 152."""
    if num_layers not in _SPEC:
        raise ValueError("Invalid number of layers: %d. Options are %s" % (num_layers, sorted(_SPEC)))
    if version not in (1, 2):
        raise ValueError("Invalid resnet version: %r. Options are 1 and 2." % (version,))
    unit, layers, channels = _SPEC[num_layers]
    net = (ResNetV1 if version == 1 else ResNetV2)(_UNITS[version][unit], layers, channels, **kwargs)
    if pretrained:
        load_pretrained(net, "resnet%d_v%d" % (num_layers, version), root, ctx)
    return net


def _factory(version, depth):
    def build(**kwargs):
        return get_resnet(version, depth, **kwargs)
    build.__name__ = build.__qualname__ = "resnet%d_v%d" % (depth, version)
    build.__doc__ = "ResNet-%d v%d." % (depth, version)
    return build


for _v in (1, 2):
    for _n in _SPEC:
        globals()["resnet%d_v%d" % (_n, _v)] = _factory(_v, _n)
