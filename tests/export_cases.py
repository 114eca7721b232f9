"""The networks of the export golden data, shared by its generator (run with real MXNet 1.9.1,
tests/data/hybrid_export/make_export_golden.py) and tests/test_hybrid_export.py: each is built from the
``mx`` module it is given (``mxnet`` or ``trainer_cli``), so both build the same blocks with the
same names. Weights are seeded by the parameter's name."""
import zlib

import numpy as np


def weight(name, shape):
    """A parameter's test value from its name: small, with variances and scales near 1."""
    rng = np.random.RandomState(zlib.crc32(name.encode()))
    if name.endswith(("running_var", "gamma")):
        return rng.uniform(0.8, 1.2, size=shape).astype(np.float32)
    if name.endswith(("running_mean", "beta", "bias", "alpha")):
        return rng.uniform(-0.1, 0.1, size=shape).astype(np.float32)
    if name.endswith("embedding0_weight"):
        return rng.uniform(-1, 1, size=shape).astype(np.float32)
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
    bound = np.sqrt(3.0 / max(fan_in, 1))
    return rng.uniform(-bound, bound, size=shape).astype(np.float32)


def data(name, shape, integers=0):
    rng = np.random.RandomState(zlib.crc32(("input:" + name).encode()))
    if integers:
        return rng.randint(0, integers, size=shape).astype(np.float32)
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def _blocks(mx):
    """Blocks written as MXNet's model zoo and Gluon examples write them."""
    gluon, nn = mx.gluon, mx.gluon.nn

    class Residual(gluon.HybridBlock):
        """ResNet's BasicBlockV1: two 3x3 convolutions, a 1x1 projection, relu of the sum."""

        def __init__(self, channels, stride, **kwargs):
            super().__init__(**kwargs)
            self.body = nn.HybridSequential(prefix="")
            self.body.add(nn.Conv2D(channels, 3, stride, 1, use_bias=False),
                          nn.BatchNorm(), nn.Activation("relu"),
                          nn.Conv2D(channels, 3, 1, 1, use_bias=False), nn.BatchNorm())
            self.downsample = nn.HybridSequential(prefix="")
            self.downsample.add(nn.Conv2D(channels, 1, stride, use_bias=False), nn.BatchNorm())

        def hybrid_forward(self, F, x):
            residual = self.downsample(x)
            x = self.body(x)
            return F.Activation(residual + x, act_type="relu")

    class Branches(gluon.HybridBlock):
        """Inception/SqueezeNet style: parallel branches joined along the channels."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.a = nn.Conv2D(3, 1, activation="relu")
                self.b = nn.HybridSequential()
                self.b.add(nn.Conv2D(2, 1), nn.Conv2D(2, 3, padding=1, activation="relu"))
                self.c = nn.HybridSequential()
                self.c.add(nn.AvgPool2D(3, 1, 1), nn.Conv2D(2, 1))

        def hybrid_forward(self, F, x):
            return F.concat(self.a(x), self.b(x), self.c(x), dim=1)

    class Bottleneck(gluon.HybridBlock):
        """MobileNetV2's linear bottleneck: expand, depthwise, project, add the input."""

        def __init__(self, channels, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.out = nn.HybridSequential()
                self.out.add(nn.Conv2D(channels * 2, 1, use_bias=False), nn.BatchNorm(),
                             nn.Activation("relu"),
                             nn.Conv2D(channels * 2, 3, padding=1, groups=channels * 2,
                                       use_bias=False), nn.BatchNorm(),
                             nn.Conv2D(channels, 1, use_bias=False), nn.BatchNorm())

        def hybrid_forward(self, F, x):
            return F.elemwise_add(self.out(x), x)

    class Arithmetic(gluon.HybridBlock):
        """Elementwise arithmetic and common F functions in hybrid_forward."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.a = nn.Dense(6)
                self.b = nn.Dense(6)

        def hybrid_forward(self, F, x):
            a, b = self.a(x), self.b(x)
            y = a * b + (1 - a) / 2 - b * 0.5
            y = F.clip(y, -0.5, 0.5) + F.relu(-y) + F.sigmoid(y) * F.tanh(a)
            y = F.broadcast_mul(y, F.exp(-F.square(b))) + y ** 2
            z = F.concat(y, F.elemwise_sub(a, b), F.Activation(b, act_type="softrelu"), dim=1)
            z = F.softmax(z, axis=-1) + F.log_softmax(z) * 0.1
            return F.broadcast_add(F.elemwise_mul(z, z) + F.sqrt(F.abs(z) + 1),
                                   F.mean(z, axis=1, keepdims=True))

    return Residual, Branches, Bottleneck, Arithmetic


def build(name, mx):
    """The network of case ``name`` built with the module ``mx``, and its input."""
    nn = mx.gluon.nn
    Residual, Branches, Bottleneck, Arithmetic = _blocks(mx)
    net = nn.HybridSequential(prefix=name + "_")
    with net.name_scope():
        if name == "mlp":
            net.add(nn.Dense(8, activation="relu"), nn.Dropout(0.3), nn.Dense(7, activation="tanh"),
                    nn.Activation("softsign"), nn.Dense(6, activation="sigmoid", use_bias=False),
                    nn.Activation("softrelu"), nn.Dense(4, in_units=6), nn.Dropout(0),
                    nn.HybridLambda("tanh"),
                    nn.HybridLambda(lambda F, x: F.LeakyReLU(x, act_type="leaky", slope=0.2)))
            x = data(name, (3, 5))
        elif name == "conv2d":
            net.add(nn.Conv2D(4, 3, padding=1, activation="relu"), nn.BatchNorm(),
                    nn.MaxPool2D(), nn.Conv2D(6, (3, 2), strides=(1, 2), padding=(1, 0), groups=2,
                                             dilation=(1, 1)),
                    nn.AvgPool2D(2, ceil_mode=True, count_include_pad=False),
                    nn.Conv2DTranspose(4, 3, strides=2, padding=1, output_padding=1,
                                       activation="tanh"),
                    nn.MaxPool2D(3, 2, 1), nn.GlobalMaxPool2D(), nn.Flatten(), nn.Dense(3))
            x = data(name, (2, 3, 9, 9))
        elif name == "conv1d3d":
            inner1 = nn.HybridSequential()
            with inner1.name_scope():
                inner1.add(nn.Conv1D(4, 3, padding=1, activation="relu"),
                           nn.Conv1DTranspose(3, 3, strides=2), nn.MaxPool1D(),
                           nn.AvgPool1D(3, 1, 1), nn.GlobalAvgPool1D(), nn.Flatten())
            net.add(inner1, nn.Dense(27), nn.HybridLambda(lambda F, x: F.reshape(x, (0, 1, 3, 3, 3))),
                    nn.Conv3D(2, 3, padding=1), nn.Conv3DTranspose(2, 2, strides=1),
                    nn.MaxPool3D(2, 1), nn.AvgPool3D(), nn.GlobalMaxPool3D(), nn.Flatten())
            x = data(name, (2, 2, 8))
        elif name == "norms":
            net.add(nn.Conv2D(4, 1), nn.LayerNorm(), nn.InstanceNorm(), nn.GroupNorm(2),
                    nn.BatchNorm(scale=False, momentum=0.8, epsilon=1e-3), nn.LeakyReLU(0.1),
                    nn.PReLU(), nn.ELU(0.7), nn.SELU(), nn.GELU(), nn.Swish(1.5),
                    nn.InstanceNorm(axis=2, scale=True), nn.BatchNorm(axis=3, use_global_stats=True),
                    nn.GlobalAvgPool2D())
            x = data(name, (2, 3, 5, 5))
        elif name == "embedding":
            net.add(nn.Embedding(10, 4), nn.Flatten(), nn.Dense(3))
            x = data(name, (4, 5), integers=10)
        elif name == "zoo":
            net.add(nn.Conv2D(4, 3, padding=1, use_bias=False), nn.BatchNorm(),
                    nn.Activation("relu"), Residual(6, 2), Branches(), Bottleneck(7),
                    nn.ReflectionPad2D(1), nn.GlobalAvgPool2D(), nn.Flatten(), Arithmetic())
            x = data(name, (2, 3, 8, 8))
        elif name == "rnn":
            net.add(mx.gluon.rnn.LSTM(4, num_layers=2, layout="NTC", bidirectional=True),
                    mx.gluon.rnn.GRU(3), mx.gluon.rnn.RNN(2, activation="tanh"),
                    mx.gluon.rnn.LSTM(3, projection_size=2))
            x = data(name, (2, 5, 3))
        elif name == "concurrent":
            # SqueezeNet's fire module and Inception's branches, as the model zoo builds them.
            contrib = mx.gluon.contrib.nn
            fire = contrib.HybridConcurrent(axis=1, prefix="")
            fire.add(nn.Conv2D(3, 1, activation="relu"), nn.Conv2D(2, 3, padding=1), contrib.Identity())
            net.add(nn.Conv2D(4, 1), fire, nn.MaxPool2D(3, 2, ceil_mode=True))
            x = data(name, (2, 3, 7, 7))
        elif name == "compare":
            # Masks from comparisons with symbols and scalars, as hybrid_forward code writes them.
            net.add(nn.Dense(4), nn.HybridLambda(
                lambda F, x: (x > 0) * x + (x <= -0.5) * 2 + (x >= x.flip(1)) + (x < 0.1) * 3
                + (0.2 < x) * 5 + (x >= 0.3) * (x < x * 2)))
            x = data(name, (3, 5))
        elif name == "equal":
            # == and != with symbols and scalars (MXNet records _equal, _not_equal and their
            # scalar forms).
            net.add(nn.Dense(4), nn.HybridLambda(
                lambda F, x: F.where(F.round(x * 2) == 0, x * 3, x) + (F.round(x) != x.flip(1))
                + (x.flip(1) == x.flip(1)) * 0.5 + (F.round(x) != 0) * 2))
            x = data(name, (3, 5))
        elif name == "more_ops":
            net.add(nn.Dense(5), nn.HybridLambda(_more_ops))
            x = data(name, (3, 5))
        else:
            raise KeyError(name)
    return net, x


def _more_ops(F, x):
    """The other F functions GluonNLP-style blocks call in hybrid_forward (broadcast_axis,
    topk, cumsum, gemm2, ...), on (3, 5) data."""
    row = F.broadcast_axis(F.expand_dims(F.sum(x, axis=1), axis=1), axis=1, size=5)
    inside = F.clip(x, -0.9, 0.9)
    positive = F.abs(x) + 1
    smooth = (F.log1p(F.abs(x)) + F.expm1(x * 0.1) + F.arctan(x) + F.sinh(x * 0.2)
              + F.cosh(x * 0.1) + F.log2(positive) + F.log10(positive) + F.arcsin(inside)
              + F.arccos(inside) + F.gamma(positive) + F.gammaln(positive) + F.erfinv(inside))
    masks = (F.broadcast_greater(x, row * 0.1) + F.broadcast_lesser_equal(x, row)
             + F.broadcast_equal(x, x) + F.broadcast_not_equal(x, row)
             + F.broadcast_greater_equal(x, row) + F.broadcast_lesser(x, row) + F.logical_not(x))
    top = F.topk(x, axis=1, k=2, ret_typ="value")
    order = F.argsort(x, axis=1)
    first = F.pick(x, F.reshape(F.slice_axis(order, axis=1, begin=0, end=1), (-1,)), axis=1)
    gram = F.linalg_gemm2(x, x, transpose_b=True)
    columns = [smooth, masks, top, F.cumsum(x, axis=1), gram,
               F.slice_like(gram, top, axes=(1,)), F.expand_dims(first, axis=1),
               F.expand_dims(F.prod(positive * 0.5, axis=1), axis=1),
               F.expand_dims(F.nansum(x, axis=1), axis=1),
               F.expand_dims(F.diag(gram), axis=1)]
    label = F.argmax(x, axis=1)
    loss = F.softmax_cross_entropy(x, label)
    return F.broadcast_add(F.make_loss(F.concat(*columns, dim=1)), loss)


CASES = ("mlp", "conv2d", "conv1d3d", "norms", "embedding", "zoo", "rnn", "concurrent",
         "compare", "equal", "more_ops")

# Model-zoo networks whose export is compared by the SHA-256 of MXNet's files (kept small).
ZOO = {"mobilenetv2_0.25": 32}


def build_zoo(name, mx):
    net = mx.gluon.model_zoo.vision.get_model(name, classes=4)
    return net, data(name, (1, 3, ZOO[name], ZOO[name]))


def set_weights(net, mx):
    for name, param in net.collect_params().items():
        value = weight(name, param.shape)
        if name.endswith("gamma") and param.grad_req == "null":
            # BatchNorm(scale=False) writes ones there as it runs (MXNet's Gluon does too).
            value = np.ones_like(value)
        param.set_data(mx.nd.array(value))


def _unrolled(mx):
    gluon = mx.gluon

    class Unrolled(gluon.HybridBlock):
        """A recurrent cell unrolled over a fixed length in hybrid_forward, as seq2seq and
        language-model code writes it; the outputs (batch first) and the last states are joined
        into one array."""

        def __init__(self, make_cell, length, layout="NTC", merge_outputs=True, **kwargs):
            super().__init__(**kwargs)
            self._length, self._layout, self._merge = length, layout, merge_outputs
            with self.name_scope():
                self.cell = make_cell()

        def hybrid_forward(self, F, x, valid_length=None):
            outputs, states = self.cell.unroll(self._length, x, layout=self._layout,
                                               merge_outputs=self._merge,
                                               valid_length=valid_length)
            time_axis = self._layout.find("T")
            if not self._merge:
                outputs = F.stack(*outputs, axis=time_axis)
            if time_axis == 0:
                outputs = F.swapaxes(outputs, dim1=0, dim2=1)
            return F.concat(F.reshape(outputs, (0, -1)), *states, dim=1)

    return Unrolled


def build_cell(name, mx):
    """The network of cell case ``name`` built with the module ``mx``, and its inputs (a tuple)."""
    rnn = mx.gluon.rnn
    Unrolled = _unrolled(mx)
    prefix = name + "_"
    inputs = (data(name, (2, 3, 5)),)

    def stack(*cells):
        def make():
            seq = rnn.HybridSequentialRNNCell()
            with seq.name_scope():
                for make_cell in cells:
                    seq.add(make_cell())
            return seq
        return make

    if name == "lstm_cell":
        net = Unrolled(lambda: rnn.LSTMCell(4), 3, prefix=prefix)
    elif name == "gru_cell":
        net = Unrolled(lambda: rnn.GRUCell(3), 2, layout="TNC", merge_outputs=False, prefix=prefix)
    elif name == "seq_cell":
        net = Unrolled(stack(lambda: rnn.LSTMCell(4), lambda: rnn.LSTMCell(3)), 3, prefix=prefix)
    elif name == "modifier_cells":
        net = Unrolled(stack(lambda: rnn.RNNCell(4, activation="relu"),
                             lambda: rnn.ResidualCell(rnn.GRUCell(4)),
                             lambda: rnn.DropoutCell(0.3),
                             lambda: rnn.ZoneoutCell(rnn.LSTMCell(3), 0.2, 0.3),
                             lambda: rnn.RNNCell(2)), 3, merge_outputs=False, prefix=prefix)
    elif name == "bi_cell":
        net = Unrolled(lambda: rnn.BidirectionalCell(rnn.LSTMCell(3), rnn.GRUCell(2)), 3,
                       prefix=prefix)
    elif name == "lstm_valid":
        net = Unrolled(lambda: rnn.LSTMCell(4), 3, prefix=prefix)
        inputs += (np.array([3, 1], dtype=np.float32),)
    elif name == "bi_valid":
        net = Unrolled(lambda: rnn.BidirectionalCell(rnn.LSTMCell(3), rnn.RNNCell(2)), 3,
                       layout="TNC", prefix=prefix)
        inputs = (data(name, (3, 2, 5)), np.array([2, 3], dtype=np.float32))
    else:
        raise KeyError(name)
    return net, inputs


CELL_CASES = ("lstm_cell", "gru_cell", "seq_cell", "modifier_cells", "bi_cell", "lstm_valid",
              "bi_valid")


def build_language_model(mx):
    """MXNet's word-language-model example in small: embedding, a 2-layer LSTM run from the
    begin states it is given (a list), a dense decoder; called as ``net(x, [h, c])``, it
    returns ``(scores, [h, c])``. Its inputs: token ids (length 4, batch 2) and the states."""
    gluon, nn, rnn = mx.gluon, mx.gluon.nn, mx.gluon.rnn

    class LanguageModel(gluon.HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.encoder = nn.Embedding(7, 3)
                self.rnn = rnn.LSTM(5, 2, input_size=3)
                self.decoder = nn.Dense(7, in_units=5)

        def hybrid_forward(self, F, inputs, hidden):
            output, hidden = self.rnn(self.encoder(inputs), hidden)
            return self.decoder(output.reshape((-1, 5))), hidden

    net = LanguageModel(prefix="lm_")
    states = [data("lm_h", (2, 2, 5)), data("lm_c", (2, 2, 5))]
    return net, (data("lm", (4, 2), integers=7), states)
