"""Deferred parameter shapes inferred through a block's graph, written once against MXNet's API
(``record(mx)`` runs with ``mxnet`` or ``trainer_cli``): user HybridBlocks whose parameters are
declared with 0 dimensions and ``allow_deferred_init=True`` for each operator that takes
parameters, a Python custom operator with ``(0,)`` parameters (MXNet's RBM example style),
``gluon.SymbolBlock`` over symbols made with ``mx.sym`` (which create their own parameter
variables), and the errors for shapes that cannot be inferred.

Keys: ``<case>:shape:<param>`` (int64) the inferred shapes; ``<case>:out_first<i>`` the outputs of
the first call (every parameter initialized to ones), ``<case>:out<i>`` those of a second
call, after every parameter is set to the same values (seeded NumPy); ``<case>:json``,
``<case>:args`` text; ``<case>:error`` the message."""
import json
import os
import tempfile

import numpy as np

SEED = 7


def _text(value):
    return np.array(value)


class _Rng:
    def __init__(self, seed):
        self.rs = np.random.RandomState(seed)

    def array(self, shape, dtype="float32", low=-1.0, high=1.0):
        return self.rs.uniform(low, high, size=shape).astype(dtype)


def _net_class(mx):
    class Net(mx.gluon.HybridBlock):
        """Parameters (name, shape, kwargs) declared deferred; ``fn(F, x, *args, **params)``."""

        def __init__(self, specs, fn, **kwargs):
            super(Net, self).__init__(**kwargs)
            self._fn = fn
            with self.name_scope():
                for name, shape, extra in specs:
                    setattr(self, name, self.params.get(name, shape=shape,
                                                        allow_deferred_init=True, **extra))

        def hybrid_forward(self, F, x, *args, **params):
            return self._fn(F, x, *args, **params)
    return Net


def _fill(mx, block, seed):
    """Every parameter set to seeded values (positive for variances)."""
    rng = _Rng(seed)
    for name, param in sorted(block.collect_params().items()):
        low = 0.5 if name.endswith("var") else -1.0
        dtype = np.dtype(param.dtype).name
        param.set_data(mx.nd.array(rng.array(param.shape, dtype, low, 1.5), dtype=dtype))


def _outputs(out):
    return out if isinstance(out, (list, tuple)) else [out]


def _run_block(mx, out, name, block, inputs, hybridize=False, export=False, forward=True):
    """Outputs and shapes after the first call (or, without ``forward``, the shapes after
    ``block.infer_shape``), the exported graph, and the outputs once every parameter is set."""
    block.initialize(mx.init.One())
    if hybridize:
        block.hybridize()
    arrays = [mx.nd.array(a, dtype=a.dtype) for a in inputs]
    if forward:
        for i, o in enumerate(_outputs(block(*arrays))):
            out["%s:out_first%d" % (name, i)] = o.asnumpy()
    else:
        block.infer_shape(*arrays)
    for pname, param in sorted(block.collect_params().items()):
        out["%s:shape:%s" % (name, pname)] = np.array(param.shape, dtype=np.int64)
    if not forward:
        return
    if export:
        path = os.path.join(tempfile.mkdtemp(), "net")
        block.export(path)
        with open(path + "-symbol.json") as f:
            out[name + ":json"] = _text(f.read())
    _fill(mx, block, SEED)
    for i, o in enumerate(_outputs(block(*arrays))):
        out["%s:out%d" % (name, i)] = o.asnumpy()


def _register_rbm(mx):
    class AffineRBM(mx.operator.CustomOp):
        """Deterministic: hidden = sigmoid(data . weight + hidden_bias); visible probabilities
        = sigmoid(hidden . weight^T + visible_bias); the aux state keeps the hidden ones."""

        def forward(self, is_train, req, in_data, out_data, aux):
            data, vbias, hbias, weight = in_data
            hidden = mx.nd.sigmoid(mx.nd.dot(data, weight) + hbias)
            visible = mx.nd.sigmoid(mx.nd.dot(hidden, weight, transpose_b=True) + vbias)
            aux[0][:] = hidden
            self.assign(out_data[0], req[0], visible)
            self.assign(out_data[1], req[1], hidden)

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            for i in range(4):
                self.assign(in_grad[i], req[i], mx.nd.zeros(in_data[i].shape))

    class AffineRBMProp(mx.operator.CustomOpProp):
        def __init__(self, num_hidden):
            super(AffineRBMProp, self).__init__(False)
            self.num_hidden = int(num_hidden)

        def list_arguments(self):
            return ["data", "visible_bias", "hidden_bias", "weight"]

        def list_outputs(self):
            return ["visible_prob", "hidden_prob"]

        def list_auxiliary_states(self):
            return ["hidden_sample"]

        def infer_shape(self, in_shapes):
            data = in_shapes[0]
            hidden = (data[0], self.num_hidden)
            return ([data, (data[1],), (self.num_hidden,), (data[1], self.num_hidden)],
                    [data, hidden], [hidden])

        def create_operator(self, ctx, in_shapes, in_dtypes):
            return AffineRBM()

    mx.operator.register("tc_deferred_rbm")(AffineRBMProp)


def record_blocks(mx):
    Net = _net_class(mx)
    rng = _Rng(1)
    out = {}
    x2 = rng.array((2, 5))
    x3 = rng.array((2, 3, 4))
    img = rng.array((2, 3, 7, 7))
    null = {"grad_req": "null"}
    cases = [
        ("fc", [("weight", (3, 0), {}), ("bias", (3,), {})],
         lambda F, x, weight, bias: F.FullyConnected(x, weight, bias, num_hidden=3), [x2]),
        ("fc_flatten", [("weight", (3, 0), {}), ("bias", (0,), {})],
         lambda F, x, weight, bias: F.FullyConnected(x, weight, bias, num_hidden=3), [x3]),
        ("fc_no_flatten", [("weight", (0, 0), {}), ("bias", (0,), {})],
         lambda F, x, weight, bias: F.FullyConnected(x, weight, bias, num_hidden=3,
                                                     flatten=False), [x3]),
        ("fc_float64", [("weight", (3, 0), {"dtype": "float64"})],
         lambda F, x, weight: F.FullyConnected(x, weight, no_bias=True, num_hidden=3),
         [x2.astype("float64")]),
        ("fc_through_scalar", [("weight", (0, 0), {}), ("bias", (0,), {})],
         lambda F, x, weight, bias: F.FullyConnected(x, weight * 0.5, bias, num_hidden=3), [x2]),
        ("fc_bias_added", [("weight", (3, 0), {}), ("bias", (0, 0), {})],
         lambda F, x, weight, bias: F.elemwise_add(
             F.FullyConnected(x, weight, no_bias=True, num_hidden=3), bias), [x2]),
        ("conv2d", [("weight", (4, 0, 3, 3), {}), ("bias", (0,), {})],
         lambda F, x, weight, bias: F.Convolution(x, weight, bias, kernel=(3, 3), num_filter=4,
                                                  pad=(1, 1), stride=(2, 2)), [img]),
        ("conv1d_groups", [("weight", (6, 0, 3), {}), ("bias", (6,), {})],
         lambda F, x, weight, bias: F.Convolution(x, weight, bias, kernel=(3,), num_filter=6,
                                                  num_group=2, dilate=(2,)),
         [rng.array((2, 4, 9))]),
        ("conv_no_bias", [("weight", (0, 0, 0, 0), {})],
         lambda F, x, weight: F.Convolution(x, weight, kernel=(3, 3), num_filter=4,
                                            no_bias=True), [img]),
        ("deconv", [("weight", (0, 0, 0, 0), {}), ("bias", (0,), {})],
         lambda F, x, weight, bias: F.Deconvolution(x, weight, bias, kernel=(3, 3), num_filter=6,
                                                    num_group=2, stride=(2, 2), adj=(1, 1),
                                                    no_bias=False), [rng.array((2, 4, 5, 5))]),
        ("batchnorm", [("gamma", (0,), {}), ("beta", (0,), {}), ("mean", (0,), null),
                       ("var", (0,), null)],
         lambda F, x, gamma, beta, mean, var: F.BatchNorm(x, gamma, beta, mean, var,
                                                          fix_gamma=False),
         [rng.array((2, 3, 4, 4))]),
        ("batchnorm_last_axis", [("gamma", (0,), {}), ("beta", (0,), {}), ("mean", (0,), null),
                                 ("var", (0,), null)],
         lambda F, x, gamma, beta, mean, var: F.BatchNorm(x, gamma, beta, mean, var, axis=-1,
                                                          fix_gamma=False, eps=1e-3), [x3]),
        ("layernorm", [("gamma", (0,), {}), ("beta", (0,), {})],
         lambda F, x, gamma, beta: F.LayerNorm(x, gamma, beta), [x3]),
        ("layernorm_axis1", [("gamma", (0,), {}), ("beta", (0,), {})],
         lambda F, x, gamma, beta: F.LayerNorm(x, gamma, beta, axis=1), [x3]),
        ("instancenorm", [("gamma", (0,), {}), ("beta", (0,), {})],
         lambda F, x, gamma, beta: F.InstanceNorm(x, gamma, beta), [x3]),
        ("groupnorm", [("gamma", (0,), {}), ("beta", (0,), {})],
         lambda F, x, gamma, beta: F.GroupNorm(x, gamma, beta, num_groups=2),
         [rng.array((2, 4, 3, 3))]),
        ("embedding", [("weight", (0, 0), {})],
         lambda F, x, weight: F.Embedding(x, weight, input_dim=10, output_dim=4),
         [np.array([[1, 9, 3], [0, 4, 4]], dtype="float32")]),
        ("prelu", [("alpha", None, {})],
         lambda F, x, alpha: F.LeakyReLU(x, alpha, act_type="prelu"), [x3]),
        ("lstm", [("rnn_param", (0,), {})],
         lambda F, x, h, c, rnn_param: F.RNN(x, rnn_param, h, c, state_size=4, num_layers=1,
                                             mode="lstm", state_outputs=True),
         [rng.array((5, 2, 3)), rng.array((1, 2, 4)), rng.array((1, 2, 4))]),
        ("gru_states_deferred", [("rnn_param", (0,), {}), ("begin", (0, 0, 0), {})],
         lambda F, x, rnn_param, begin: F.RNN(x, rnn_param, begin, state_size=4, num_layers=2,
                                              bidirectional=True, mode="gru"),
         [rng.array((5, 2, 3))]),
        ("rnn_tanh", [("rnn_param", (0,), {})],
         lambda F, x, h, rnn_param: F.RNN(x, rnn_param, h, state_size=3, num_layers=2,
                                          mode="rnn_tanh"),
         [rng.array((4, 2, 5)), rng.array((2, 2, 3))]),
        ("deformable", [("weight", (4, 0, 3, 3), {}), ("bias", (0,), {})],
         lambda F, x, offset, weight, bias: F.contrib.DeformableConvolution(
             x, offset, weight, bias, kernel=(3, 3), pad=(1, 1), num_filter=4),
         [rng.array((2, 3, 5, 5)), rng.array((2, 18, 5, 5), low=-0.5, high=0.5)]),
        ("modulated_deformable", [("weight", (0, 0, 0, 0), {})],
         lambda F, x, offset, mask, weight: F.contrib.ModulatedDeformableConvolution(
             x, offset, mask, weight, kernel=(3, 3), pad=(1, 1), num_filter=4, no_bias=True),
         [rng.array((2, 3, 5, 5)), rng.array((2, 18, 5, 5), low=-0.5, high=0.5),
          rng.array((2, 9, 5, 5), low=0.0, high=1.0)]),
    ]
    for name, specs, fn, inputs in cases:
        _run_block(mx, out, name, Net(specs, fn, prefix=name + "_"), inputs)
    # MXNet's oneDNN deconvolution fails to run with a target_shape: its shapes only.
    _run_block(mx, out, "deconv_target", Net([("weight", (0, 0, 0, 0), {})], lambda F, x, weight:
                                             F.Deconvolution(x, weight, kernel=(3, 3),
                                                             num_filter=2, stride=(2, 2),
                                                             target_shape=(10, 10)),
                                             prefix="deconv_target_"),
               [rng.array((2, 3, 5, 5))], forward=False)
    # Channels-last convolution (MXNet runs it on GPUs only): its shapes only.
    _run_block(mx, out, "conv_nhwc", Net([("weight", (0, 0, 0, 0), {}), ("bias", (0,), {})],
                                         lambda F, x, weight, bias: F.Convolution(
                                             x, weight, bias, kernel=(3, 2), num_filter=5,
                                             layout="NHWC"), prefix="conv_nhwc_"),
               [rng.array((2, 6, 7, 3))], forward=False)

    # Hybridized, then exported: the graph MXNet records (variables' shape attributes, the
    # versions of auxiliary states, the initializers BatchNorm gives its moving statistics).
    by_name = {case[0]: case for case in cases}
    _, specs, fn, inputs = by_name["batchnorm"]
    _run_block(mx, out, "batchnorm_hybrid", Net(specs, fn, prefix="bnh_"), inputs,
               hybridize=True, export=True)
    _, specs, fn, inputs = by_name["fc"]
    _run_block(mx, out, "fc_hybrid", Net(specs, fn, prefix="fch_"), inputs, hybridize=True,
               export=True)

    # A block with a deferred child (Dense without in_units) and deferred parameters of its own.
    class Outer(mx.gluon.HybridBlock):
        def __init__(self, **kwargs):
            super(Outer, self).__init__(**kwargs)
            with self.name_scope():
                self.dense = mx.gluon.nn.Dense(3)
                self.weight = self.params.get("weight", shape=(2, 0), allow_deferred_init=True)
                self.bias = self.params.get("bias", shape=(0,), allow_deferred_init=True)

        def hybrid_forward(self, F, x, weight, bias):
            return F.FullyConnected(F.relu(self.dense(x)), weight, bias, num_hidden=2)

    _run_block(mx, out, "nested", Outer(prefix="outer_"), [x3])
    _run_block(mx, out, "nested_hybrid", Outer(prefix="outerh_"), [x3], hybridize=True,
               export=True)

    # The RBM style: a Python operator's infer_shape gives its (0,) parameters' shapes.
    _register_rbm(mx)
    rbm_specs = [("visible_bias", (0,), {}), ("hidden_bias", (0,), {}), ("weight", (0, 0), {}),
                 ("hidden_sample", (0, 0), null)]

    def rbm(F, x, visible_bias, hidden_bias, weight, hidden_sample):
        return F.Custom(x, visible_bias, hidden_bias, weight, hidden_sample, num_hidden=4,
                        op_type="tc_deferred_rbm")
    _run_block(mx, out, "custom_rbm", Net(rbm_specs, rbm, prefix="rbm_"), [x2])
    _run_block(mx, out, "custom_rbm_hybrid", Net(rbm_specs, rbm, prefix="rbmh_"), [x2],
               hybridize=True, export=True)
    return out


def record_symbols(mx):
    """Symbols made with mx.sym: the parameter variables each operator creates, and
    SymbolBlocks over them, whose parameters take their shapes at the first call."""
    sym = mx.sym
    out = {}
    x = sym.var("x")
    made = {
        "fc": sym.FullyConnected(data=x, num_hidden=3, name="fc"),
        "fc_no_bias": sym.FullyConnected(data=x, num_hidden=3, no_bias=True, name="fc"),
        "fc_weight_given": sym.FullyConnected(x, sym.var("w"), num_hidden=3, name="fc"),
        "conv": sym.Convolution(x, kernel=(3, 3), num_filter=4, name="c"),
        "deconv": sym.Deconvolution(x, kernel=(3, 3), num_filter=4, name="d"),
        "batchnorm": sym.BatchNorm(x, eps=1e-3, fix_gamma=False, name="bn"),
        "batchnorm_given": sym.BatchNorm(x, sym.var("g"), sym.var("b"), sym.var("mm"),
                                         sym.var("mv"), name="bn"),
        "bn_relu": sym.contrib.BatchNormWithReLU(x, name="bnr"),
        "layernorm": sym.LayerNorm(x, name="ln"),
        "instancenorm": sym.InstanceNorm(x, name="inorm"),
        "groupnorm": sym.GroupNorm(x, num_groups=2, name="gn"),
        "embedding": sym.Embedding(x, input_dim=5, output_dim=3, name="e"),
        "prelu": sym.LeakyReLU(x, act_type="prelu", name="p"),
        "prelu_given": sym.LeakyReLU(x, sym.var("g"), act_type="prelu", name="p"),
        "leaky": sym.LeakyReLU(x, act_type="leaky", name="l"),
        "lstm": sym.RNN(x, state_size=4, num_layers=1, mode="lstm", name="r"),
        "gru_lengths": sym.RNN(x, state_size=4, num_layers=1, mode="gru",
                               use_sequence_length=True, name="g"),
        "softmax": sym.softmax(x, name="sm"),
        "softmax_length": sym.softmax(x, use_length=True, name="sml"),
        "sequence_mask": sym.SequenceMask(x, use_sequence_length=True, name="sq"),
        "ctc": sym.contrib.ctc_loss(x, use_label_lengths=True, name="ctc"),
        "resize_like": sym.contrib.BilinearResize2D(x, mode="like", name="br"),
        "deformable": sym.contrib.DeformableConvolution(x, kernel=(3, 3), num_filter=4,
                                                        name="dc"),
        "modulated": sym.contrib.ModulatedDeformableConvolution(x, kernel=(3, 3),
                                                                num_filter=4, name="mdc"),
        "elemwise_add": sym.elemwise_add(x, name="ea"),
        "take": sym.take(x, name="tk"),
        "where": sym.where(x, name="wh"),
        "anonymous": sym.FullyConnected(x, num_hidden=3, attr={"__lr_mult__": "2"}),
    }
    for key, s in made.items():
        out["sym_%s:args" % key] = _text(json.dumps([s.list_arguments(),
                                                     s.list_auxiliary_states()]))
        out["sym_%s:json" % key] = _text(s.tojson())

    rng = _Rng(3)
    chain = sym.Activation(sym.BatchNorm(sym.Convolution(x, kernel=(3, 3), num_filter=4,
                                                         name="conv"),
                                         fix_gamma=False, name="bn"), act_type="relu")
    chain = sym.FullyConnected(chain, num_hidden=5, name="fc2")
    blocks = {
        "sb_fc": (made["fc"], [x], [rng.array((2, 5))]),
        "sb_weight_given": (made["fc_weight_given"], [x], [rng.array((2, 6))]),
        "sb_chain": (chain, [x], [rng.array((2, 3, 6, 6))]),
        "sb_lstm": (made["lstm"], [x], [rng.array((5, 2, 3))]),
        "sb_embedding_prelu": (sym.LeakyReLU(sym.Embedding(x, input_dim=10, output_dim=4,
                                                           name="emb"),
                                             act_type="prelu", name="act"), [x],
                               [np.array([[1, 2], [7, 0]], dtype="float32")]),
        "sb_two_inputs": (sym.FullyConnected(x, num_hidden=2, name="fa") +
                          sym.FullyConnected(sym.var("y"), num_hidden=2, name="fb"),
                          [x, sym.var("y")], [rng.array((3, 4)), rng.array((3, 6))]),
    }
    for key, (s, inputs, arrays) in blocks.items():
        block = mx.gluon.SymbolBlock(s, inputs)
        _run_block(mx, out, key, block, arrays)
    return out


def record_errors(mx):
    """MXNet's messages where a shape cannot be inferred or contradicts the declared one."""
    Net = _net_class(mx)
    out = {}
    cases = [
        ("broadcast", [("gamma", (0,), {})],
         lambda F, x, gamma: F.broadcast_mul(x, gamma.reshape((1, -1)))),
        ("inconsistent", [("weight", (4, 0), {})],
         lambda F, x, weight: F.FullyConnected(x, weight, num_hidden=3, no_bias=True)),
        ("prelu_rank_known", [("alpha", (0,), {})],
         lambda F, x, alpha: F.LeakyReLU(x, alpha, act_type="prelu")),
    ]
    for name, specs, fn in cases:
        block = Net(specs, fn, prefix="err_%s_" % name)
        block.initialize()
        try:
            block(mx.nd.ones((2, 3)))
            message = "no error"
        except ValueError as exc:
            message = str(exc)
        out["err_%s:error" % name] = _text(message)
    return out


def record(mx):
    out = {}
    out.update(record_blocks(mx))
    out.update(record_symbols(mx))
    out.update(record_errors(mx))
    return out
