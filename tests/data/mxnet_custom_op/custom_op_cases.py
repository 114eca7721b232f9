"""Python custom operators (``mx.operator`` + ``nd.Custom``) as MXNet 1.9.1 runs them, written
once against MXNet's API (``record(mx)``): a few registered ops, their outputs, the gradients of
a weighted sum of their outputs under ``autograd.record()``, their auxiliary states, what
``forward`` saw (``is_train``, ``req``), and Gluon blocks calling ``F.Custom`` trained for two
steps (hybridized and not), exported, and imported again as a ``SymbolBlock``.

    /work/mxvenv/bin/python tests/data/mxnet_custom_op/make_custom_op_records.py

records ``custom_op.npz``; tests/test_custom_op.py replays ``record`` with trainer_cli.

The ops:

- ``tc_softmax``: MXNet's example/numpy-ops/custom_softmax.py (softmax with its loss gradient,
  ``need_top_grad=False``: the head gradient is ignored), computing on the host with NumPy.
- ``tc_mimo``: two arguments, three outputs (one int32, no gradient), a scalar keyword
  argument, a backward using every out_grad.
- ``tc_runmean``: an auxiliary state (a running mean, updated in training only).
- ``tc_addgrad``: a backward that writes then adds (``req`` 'add') into in_grad.
- ``tc_rbm``: example/restricted-boltzmann-machine/binary_rbm.py's operator, sampling replaced
  by a threshold (MXNet's random stream is not reproducible elsewhere): four arguments, two
  outputs, two auxiliary states, ``need_top_grad=False``, a gradient for three arguments only.
"""
import ast
import os
import tempfile

import numpy as np


def _register(mx, log):
    """Register the ops on ``mx`` (MXNet or trainer_cli); ``log`` collects what forward saw."""
    op = mx.operator

    class Softmax(op.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            x = in_data[0].asnumpy()
            y = np.exp(x - x.max(axis=1).reshape((x.shape[0], 1)))
            y /= y.sum(axis=1).reshape((x.shape[0], 1))
            self.assign(out_data[0], req[0], mx.nd.array(y))

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            lab = in_data[1].asnumpy().ravel().astype(int)
            y = out_data[0].asnumpy()
            y[np.arange(lab.shape[0]), lab] -= 1.0
            self.assign(in_grad[0], req[0], mx.nd.array(y))

    @op.register("tc_softmax")
    class SoftmaxProp(op.CustomOpProp):
        def __init__(self):
            super(SoftmaxProp, self).__init__(need_top_grad=False)

        def list_arguments(self):
            return ["data", "label"]

        def list_outputs(self):
            return ["output"]

        def infer_shape(self, in_shape):
            data_shape = in_shape[0]
            label_shape = (in_shape[0][0],)
            return [data_shape, label_shape], [data_shape], []

        def infer_type(self, in_type):
            return in_type, [in_type[0]], []

        def create_operator(self, ctx, shapes, dtypes):
            return Softmax()

    class Mimo(op.CustomOp):
        def __init__(self, scale):
            super(Mimo, self).__init__()
            self.scale = scale

        def forward(self, is_train, req, in_data, out_data, aux):
            log.append(("mimo", int(is_train), list(req)))
            a, b = in_data
            self.assign(out_data[0], req[0],
                        mx.nd.broadcast_mul(a, b.reshape((1, -1))) * self.scale)
            self.assign(out_data[1], req[1], (a * a).sum(axis=1))
            self.assign(out_data[2], req[2], mx.nd.argmax(a, axis=1).astype("int32"))

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            a, b = in_data
            g0, g1 = out_grad[0], out_grad[1]
            ga = mx.nd.broadcast_mul(g0, b.reshape((1, -1))) * self.scale \
                + 2 * a * g1.reshape((-1, 1))
            gb = (g0 * a).sum(axis=0) * self.scale
            self.assign(in_grad[0], req[0], ga)
            self.assign(in_grad[1], req[1], gb)

    @op.register("tc_mimo")
    class MimoProp(op.CustomOpProp):
        def __init__(self, scale="1.0"):
            super(MimoProp, self).__init__(need_top_grad=True)
            self.scale = float(scale)

        def list_arguments(self):
            return ["a", "b"]

        def list_outputs(self):
            return ["prod", "sumsq", "argmax"]

        def infer_shape(self, in_shape):
            a = in_shape[0]
            return [a, [a[1]]], [a, [a[0]], [a[0]]], []

        def infer_type(self, in_type):
            return [in_type[0], in_type[0]], [in_type[0], in_type[0], np.int32], []

        def create_operator(self, ctx, shapes, dtypes):
            log.append(("mimo_create", [list(s) for s in shapes], list(dtypes)))
            return Mimo(self.scale)

    class RunMean(op.CustomOp):
        def __init__(self, momentum):
            super(RunMean, self).__init__()
            self.momentum = momentum

        def forward(self, is_train, req, in_data, out_data, aux):
            log.append(("runmean", int(is_train), list(req)))
            x = in_data[0]
            if is_train:
                aux[0][:] = aux[0] * self.momentum + x.mean(axis=0) * (1 - self.momentum)
            self.assign(out_data[0], req[0], mx.nd.broadcast_sub(x, aux[0].reshape((1, -1))))

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            self.assign(in_grad[0], req[0], out_grad[0])

    @op.register("tc_runmean")
    class RunMeanProp(op.CustomOpProp):
        def __init__(self, momentum="0.9"):
            super(RunMeanProp, self).__init__(need_top_grad=True)
            self.momentum = float(momentum)

        def list_arguments(self):
            return ["data"]

        def list_auxiliary_states(self):
            return ["running_mean"]

        def infer_shape(self, in_shape):
            return in_shape, [in_shape[0]], [[in_shape[0][1]]]

        def create_operator(self, ctx, shapes, dtypes):
            return RunMean(self.momentum)

    class AddGrad(op.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            self.assign(out_data[0], req[0], in_data[0] * in_data[0] * 0.5)

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            g, x = out_grad[0], in_data[0]
            self.assign(in_grad[0], req[0], g * 0.25)
            # The rest of the gradient added onto the first part.
            self.assign(in_grad[0], "add" if req[0] != "null" else "null", g * x - g * 0.25)

    @op.register("tc_addgrad")
    class AddGradProp(op.CustomOpProp):
        def __init__(self):
            super(AddGradProp, self).__init__(need_top_grad=True)

        def create_operator(self, ctx, shapes, dtypes):
            return AddGrad()

    class BinaryRBM(op.CustomOp):
        def __init__(self, k):
            self.k = k

        def forward(self, is_train, req, in_data, out_data, aux):
            log.append(("rbm", int(is_train), list(req)))
            visible, vbias, hbias, weight = in_data
            if is_train:
                _, hidden_prob = self.sample_layer(visible, hbias, weight, False)
                hidden_sample = aux[1]
            else:
                hidden_sample, hidden_prob = self.sample_layer(visible, hbias, weight, False)
            for _ in range(self.k):
                visible_sample, visible_prob = self.sample_layer(hidden_sample, vbias, weight,
                                                                 True)
                hidden_sample, _ = self.sample_layer(visible_sample, hbias, weight, False)
            if is_train:
                aux[0][:] = visible_sample
                aux[1][:] = hidden_sample
            self.assign(out_data[0], req[0], visible_prob)
            self.assign(out_data[1], req[1], hidden_prob)

        def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
            visible = in_data[0]
            visible_sample, hidden_sample = aux[0], aux[1]
            hidden_prob = out_data[1]
            g_vbias = (visible_sample - visible).mean(axis=0)
            g_hbias = (hidden_sample - hidden_prob).mean(axis=0)
            g_weight = (mx.nd.batch_dot(visible_sample.expand_dims(2),
                                        hidden_sample.expand_dims(1))
                        - mx.nd.batch_dot(visible.expand_dims(2),
                                          hidden_prob.expand_dims(1))).mean(axis=0)
            self.assign(in_grad[1], req[1], g_vbias)
            self.assign(in_grad[2], req[2], g_hbias)
            self.assign(in_grad[3], req[3], g_weight)

        def sample_layer(self, other, bias, weight, transpose):
            prob = mx.nd.dot(other, weight, transpose_b=transpose)
            prob = mx.nd.broadcast_add(prob, bias.reshape((1, -1)))
            prob.sigmoid(out=prob)
            return prob > 0.5, prob

    @op.register("tc_rbm")
    class BinaryRBMProp(op.CustomOpProp):
        def __init__(self, num_hidden, k, for_training):
            super(BinaryRBMProp, self).__init__(False)
            self.num_hidden = int(num_hidden)
            self.k = int(k)
            self.for_training = ast.literal_eval(for_training)

        def list_arguments(self):
            return ["data", "visible_layer_bias", "hidden_layer_bias", "interaction_weight"]

        def list_outputs(self):
            return ["visible_layer_prob_1", "hidden_layer_prob_1"]

        def list_auxiliary_states(self):
            return (["aux_visible_layer_sample", "aux_hidden_layer_sample"]
                    if self.for_training else [])

        def infer_shape(self, in_shapes):
            v = in_shapes[0]
            h = (v[0], self.num_hidden)
            return [v, (v[1],), (self.num_hidden,), (v[1], self.num_hidden)], [v, h], \
                [v, h] if self.for_training else []

        def infer_type(self, in_type):
            t = in_type[0]
            return [t] * 4, [t, t], [t, t] if self.for_training else []

        def create_operator(self, ctx, in_shapes, in_dtypes):
            return BinaryRBM(self.k)


def _weights(shape, seed):
    return np.random.RandomState(seed).uniform(0.5, 1.5, size=shape).astype(np.float32)


def _softmax(mx, out, log):
    nd = mx.nd
    rng = np.random.RandomState(1)
    for dtype in ("float32", "float64"):
        x = rng.randn(5, 4).astype(dtype)
        label = np.array([0, 3, 1, 1, 2], dtype)
        data = nd.array(x, dtype=dtype)
        data.attach_grad()
        with mx.autograd.record():
            y = nd.Custom(data, nd.array(label, dtype=dtype), op_type="tc_softmax")
            # need_top_grad=False: the weights of the head gradient do not reach backward.
            w = nd.array(_weights(y.shape, 2), dtype=dtype)
            (y * w).sum().backward()
        out["softmax_%s" % dtype] = y.asnumpy()
        out["softmax_%s/grad" % dtype] = data.grad.asnumpy()
    # Outside record(): no gradient, the same values.
    out["softmax_plain"] = nd.Custom(nd.array(x), nd.array(label), op_type="tc_softmax").asnumpy()


def _mimo(mx, out, log):
    nd = mx.nd
    rng = np.random.RandomState(3)
    for dtype in ("float32", "float64", "float16"):
        a_np = rng.randn(3, 4).astype(dtype)
        b_np = rng.randn(4).astype(dtype)
        a, b = nd.array(a_np, dtype=dtype), nd.array(b_np, dtype=dtype)
        a.attach_grad()
        b.attach_grad()
        del log[:]
        with mx.autograd.record():
            prod, sumsq, arg = nd.Custom(a, b, op_type="tc_mimo", scale=1.5)
            loss = (prod * nd.array(_weights(prod.shape, 4), dtype=dtype)).sum() \
                + (sumsq * nd.array(_weights(sumsq.shape, 5), dtype=dtype)).sum()
        loss.backward()
        key = "mimo_%s" % dtype
        out[key + "/prod"] = prod.asnumpy()
        out[key + "/sumsq"] = sumsq.asnumpy()
        out[key + "/argmax"] = arg.asnumpy()
        out[key + "/grad_a"] = a.grad.asnumpy()
        out[key + "/grad_b"] = b.grad.asnumpy()
        out[key + "/create"] = np.array([v for s in log[0][1] for v in s] + log[0][2])
        out[key + "/forward_is_train_req"] = np.array(
            [log[1][1]] + [["null", "write", "inplace", "add"].index(r) for r in log[1][2]])
    # Only the second output reaches the head: the first's out_grad is zeros.
    a = nd.array(rng.randn(3, 4).astype("float32"))
    b = nd.array(rng.randn(4).astype("float32"))
    a.attach_grad()
    b.attach_grad()
    with mx.autograd.record():
        outs = nd.Custom(a, b, op_type="tc_mimo")
        outs[1].backward()
    out["mimo_second_only/grad_a"] = a.grad.asnumpy()
    out["mimo_second_only/grad_b"] = b.grad.asnumpy()
    # Only ``a`` needs a gradient (req 'null' for b), and predict mode (is_train 0).
    a.attach_grad()
    b2 = nd.array(b.asnumpy())
    del log[:]
    with mx.autograd.record(train_mode=False):
        outs = nd.Custom(a, b2, op_type="tc_mimo", scale=-2)
        (outs[0] * 3).sum().backward()
    out["mimo_a_only/grad_a"] = a.grad.asnumpy()
    out["mimo_a_only/forward_is_train"] = np.array([log[-1][1]])


def _runmean(mx, out, log):
    nd = mx.nd
    rng = np.random.RandomState(6)
    x = nd.array(rng.randn(4, 3).astype("float32"))
    x.attach_grad()
    mean = nd.array(rng.randn(3).astype("float32") * 0.1)
    del log[:]
    with mx.autograd.record():
        y = nd.Custom(x, mean, op_type="tc_runmean", momentum=0.75)
        (y * nd.array(_weights(y.shape, 7))).sum().backward()
    out["runmean/train"] = y.asnumpy()
    out["runmean/train_aux"] = mean.asnumpy()
    out["runmean/grad"] = x.grad.asnumpy()
    # Predict mode: the running mean is used, not updated.
    y = nd.Custom(x, mean, op_type="tc_runmean", momentum=0.75)
    out["runmean/predict"] = y.asnumpy()
    out["runmean/predict_aux"] = mean.asnumpy()
    # train_mode() without recording: is_train is 1, the state is updated.
    with mx.autograd.train_mode():
        y = nd.Custom(x, mean, op_type="tc_runmean")
    out["runmean/train_mode"] = y.asnumpy()
    out["runmean/train_mode_aux"] = mean.asnumpy()
    out["runmean/is_train"] = np.array([entry[1] for entry in log])


def _addgrad(mx, out, log):
    nd = mx.nd
    x_np = np.random.RandomState(8).randn(2, 3).astype("float32")
    x = nd.array(x_np)
    x.attach_grad()
    with mx.autograd.record():
        y = nd.Custom(x, op_type="tc_addgrad")
        (y * nd.array(_weights(y.shape, 9))).sum().backward()
    out["addgrad/y"] = y.asnumpy()
    out["addgrad/grad"] = x.grad.asnumpy()
    # The variable's grad_req 'add': two passes accumulate (MXNet hands backward req 'add').
    x = nd.array(x_np)
    x.attach_grad(grad_req="add")
    for step in range(2):
        with mx.autograd.record():
            y = nd.Custom(x, op_type="tc_addgrad")
            (y * (step + 2)).sum().backward()
    out["addgrad/accumulated"] = x.grad.asnumpy()
    # The same input used by the op and by another op: the gradients add up.
    x = nd.array(x_np)
    x.attach_grad()
    with mx.autograd.record():
        z = nd.Custom(x, op_type="tc_addgrad") + x * 3
        z.sum().backward()
    out["addgrad/shared"] = x.grad.asnumpy()


def _rbm(mx, out, log):
    nd = mx.nd
    rng = np.random.RandomState(10)
    nv, nh, batch = 6, 4, 5
    data = nd.array((rng.uniform(size=(batch, nv)) > 0.5).astype("float32"))
    vbias = nd.array(rng.randn(nv).astype("float32") * 0.3)
    hbias = nd.array(rng.randn(nh).astype("float32") * 0.3)
    weight = nd.array(rng.randn(nv, nh).astype("float32"))
    aux_v = nd.zeros((batch, nv))
    aux_h = nd.array((rng.uniform(size=(batch, nh)) > 0.5).astype("float32"))
    for p in (vbias, hbias, weight):
        p.attach_grad()
    with mx.autograd.record():
        v, h = nd.Custom(data, vbias, hbias, weight, aux_v, aux_h, num_hidden=nh, k=2,
                         for_training=True, op_type="tc_rbm")
    v.backward()
    out["rbm/visible_prob"] = v.asnumpy()
    out["rbm/hidden_prob"] = h.asnumpy()
    out["rbm/aux_visible"] = aux_v.asnumpy()
    out["rbm/aux_hidden"] = aux_h.asnumpy()
    for name, p in (("vbias", vbias), ("hbias", hbias), ("weight", weight)):
        out["rbm/grad_" + name] = p.grad.asnumpy()
    v, h = nd.Custom(data, vbias, hbias, weight, num_hidden=nh, k=1, for_training=False,
                     op_type="tc_rbm")
    out["rbm/predict_visible"] = v.asnumpy()


def _blocks(mx):
    """Gluon blocks calling F.Custom (defined per ``mx``)."""
    gluon = mx.gluon

    class SoftmaxNet(gluon.HybridBlock):
        def __init__(self, **kwargs):
            super(SoftmaxNet, self).__init__(**kwargs)
            with self.name_scope():
                self.fc = gluon.nn.Dense(3, in_units=4)

        def hybrid_forward(self, F, x, label):
            return F.Custom(self.fc(x), label, op_type="tc_softmax")

    class MimoNet(gluon.HybridBlock):
        def __init__(self, **kwargs):
            super(MimoNet, self).__init__(**kwargs)
            with self.name_scope():
                self.weight = self.params.get("weight", shape=(4,))
                self.mean = self.params.get("mean", shape=(4,), grad_req="null")

        def hybrid_forward(self, F, x, weight, mean):
            centered = F.Custom(x, mean, op_type="tc_runmean", momentum=0.5)
            prod, sumsq, _ = F.Custom(centered, weight, op_type="tc_mimo", scale=0.5)
            return prod.sum(axis=1) + sumsq

    class RBMNet(gluon.HybridBlock):
        def __init__(self, nv, nh, batch, **kwargs):
            super(RBMNet, self).__init__(**kwargs)
            self.nh = nh
            with self.name_scope():
                self.vbias = self.params.get("visible_layer_bias", shape=(nv,))
                self.hbias = self.params.get("hidden_layer_bias", shape=(nh,))
                self.weight = self.params.get("interaction_weight", shape=(nv, nh))
                self.aux_v = self.params.get("aux_visible_layer_sample", shape=(batch, nv),
                                             grad_req="null")
                self.aux_h = self.params.get("aux_hidden_layer_sample", shape=(batch, nh),
                                             grad_req="null")

        def hybrid_forward(self, F, data, vbias, hbias, weight, aux_v, aux_h):
            return F.Custom(data, vbias, hbias, weight, aux_v, aux_h, num_hidden=self.nh, k=1,
                            for_training=True, op_type="tc_rbm")

    return SoftmaxNet, MimoNet, RBMNet


def _set(mx, block, seed):
    rng = np.random.RandomState(seed)
    for name, p in sorted(block.collect_params().items()):
        p.set_data(mx.nd.array(rng.uniform(-0.5, 0.5, size=p.shape).astype("float32")))


def _train(mx, out, key, block, inputs, steps=2, lr=0.1):
    """``steps`` SGD steps of ``block`` on ``inputs``; records outputs and parameters."""
    trainable = {name: p for name, p in block.collect_params().items() if p.grad_req != "null"}
    trainer = mx.gluon.Trainer(trainable, "sgd", {"learning_rate": lr})
    for step in range(steps):
        with mx.autograd.record():
            y = block(*inputs)
            heads = y if isinstance(y, (list, tuple)) else [y]
            loss = heads[0].sum()
        loss.backward()
        trainer.step(inputs[0].shape[0])
        for k, h in enumerate(heads):
            out["%s/step%d/out%d" % (key, step, k)] = h.asnumpy()
    for name, p in sorted(block.collect_params().items()):
        out["%s/param/%s" % (key, name[len(block.prefix):])] = p.data().asnumpy()


def _gluon(mx, out, log):
    nd = mx.nd
    SoftmaxNet, MimoNet, RBMNet = _blocks(mx)
    rng = np.random.RandomState(11)
    x = nd.array(rng.randn(5, 4).astype("float32"))
    label = nd.array([0, 2, 1, 1, 0])
    x4 = nd.array(rng.randn(3, 4).astype("float32"))
    nv, nh, batch = 6, 4, 5
    v = nd.array((rng.uniform(size=(batch, nv)) > 0.5).astype("float32"))
    tmp = tempfile.mkdtemp()
    for hybrid in (False, True):
        tag = "hybrid" if hybrid else "eager"
        for key, make, inputs, seed in (("softmax_net", SoftmaxNet, (x, label), 12),
                                        ("mimo_net", MimoNet, (x4,), 13),
                                        ("rbm_net", lambda **kw: RBMNet(nv, nh, batch, **kw),
                                         (v,), 14)):
            block = make(prefix=key + "_")
            block.initialize()
            _set(mx, block, seed)
            if hybrid:
                block.hybridize()
            _train(mx, out, "%s_%s" % (key, tag), block, inputs)
            if hybrid:
                path = os.path.join(tmp, key)
                block.export(path)
                with open(path + "-symbol.json") as f:
                    out["%s/symbol_json" % key] = np.array(f.read())
                names = ["data"] if len(inputs) == 1 else ["data0", "data1"]
                imported = mx.gluon.SymbolBlock.imports(path + "-symbol.json", names,
                                                        path + "-0000.params")
                with mx.autograd.predict_mode():
                    y = imported(*inputs)
                ys = y if isinstance(y, (list, tuple)) else [y]
                for k, h in enumerate(ys):
                    out["%s/imported/out%d" % (key, k)] = h.asnumpy()


def record(mx):
    log = []
    _register(mx, log)
    out = {}
    for part in (_softmax, _mimo, _runmean, _addgrad, _rbm, _gluon):
        part(mx, out, log)
    return out
