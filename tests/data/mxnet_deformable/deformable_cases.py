"""``nd.contrib.DeformableConvolution`` / ``ModulatedDeformableConvolution`` and
``gluon.contrib.cnn``'s blocks as MXNet 1.9.1 computes them, written once against MXNet's API.

``record(mx)``: for each operator case its output and, for ``DeformableConvolution``, the
gradients of data, offset, weight and bias of a weighted sum of the output (MXNet's CPU build has
no ``ModulatedDeformableConvolution`` backward: only its forward is recorded). The cases cover
groups, deformable groups, stride, dilation, padding, no_bias, 1x1 kernels, float64, offsets
that push samples outside the image, offsets landing exactly on pixels and places on and around
every border (MXNet's boundary rules differ between the two operators). ``*_cols`` cases use a
one-hot weight, so the output is the deformable im2col itself (a GEMM with one 1 per row is
exact): those are compared bit for bit.

``record_blocks(mx)``: the Gluon blocks' parameter names and shapes (before and after the first
call), reprs, the outputs for fixed parameters, and one SGD step of ``DeformableConvolution``
(loss, gradients, updated parameters); ``save_block_params(mx, path)`` writes a block's
parameters for the load test.

    /work/mxvenv/bin/python tests/data/mxnet_deformable/make_deformable_records.py

records ``deformable.npz`` and ``deformable_block.params``; tests/test_deformable_conv.py
replays both with trainer_cli."""
import numpy as np


def _border_places(rng, size, count):
    """Places around and on the borders of an axis of ``size`` pixels, and on pixels."""
    special = np.array([-1.5, -1.0, -0.999, -0.5, -1e-3, 0.0, 1e-3, 0.5, 1.0, size - 2.0,
                        size - 1.5, size - 1.0, size - 1.0 + 1e-3, size - 0.5, size - 1e-3,
                        float(size), size + 0.25, 2.0 + 2 ** -20, 1.0 - 2 ** -24])
    return rng.choice(special, count)


def _offsets(rng, kind, n, dg, kernel, out_hw, stride, dilate, pad, hw):
    kh, kw = kernel
    ho, wo = out_hw
    shape = (n, dg, kh, kw, 2, ho, wo)
    if kind == "random":
        return (rng.randn(*shape) * 1.2).astype(np.float32).reshape(n, -1, ho, wo)
    if kind == "far":
        return (rng.randn(*shape) * 4.0).astype(np.float32).reshape(n, -1, ho, wo)
    if kind == "integer":
        return rng.randint(-2, 3, shape).astype(np.float32).reshape(n, -1, ho, wo)
    if kind == "zero":
        return np.zeros(shape, np.float32).reshape(n, -1, ho, wo)
    # "border": offsets that put each place on a chosen spot near the borders.
    i = np.arange(kh).reshape(kh, 1, 1, 1)
    j = np.arange(kw).reshape(1, kw, 1, 1)
    base_y = i * dilate[0] - pad[0] + np.arange(ho).reshape(1, 1, ho, 1) * stride[0]
    base_x = j * dilate[1] - pad[1] + np.arange(wo).reshape(1, 1, 1, wo) * stride[1]
    count = n * dg * kh * kw * ho * wo
    want_y = _border_places(rng, hw[0], count).reshape(n, dg, kh, kw, ho, wo)
    want_x = _border_places(rng, hw[1], count).reshape(n, dg, kh, kw, ho, wo)
    off = np.stack([want_y - base_y, want_x - base_x], axis=4).astype(np.float32)
    return off.reshape(n, -1, ho, wo)


# name: (n, c, h, w, num_filter, kernel, stride, dilate, pad, num_group, dg, no_bias, offsets)
CASES = {
    "basic": (2, 3, 5, 6, 4, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, False, "random"),
    "groups": (2, 4, 5, 5, 6, (3, 3), (1, 1), (1, 1), (1, 1), 2, 1, False, "random"),
    "deformable_groups": (1, 4, 6, 5, 4, (3, 3), (1, 1), (1, 1), (0, 1), 1, 2, False, "random"),
    "groups_and_dgroups": (2, 8, 4, 5, 4, (2, 3), (1, 1), (1, 1), (1, 1), 2, 4, True, "random"),
    "stride_dilate": (2, 3, 7, 8, 5, (3, 2), (2, 1), (1, 2), (2, 1), 1, 1, False, "random"),
    "stride_no_pad": (1, 2, 7, 7, 3, (3, 3), (2, 3), (1, 1), (0, 0), 1, 1, False, "random"),
    "no_bias": (2, 3, 5, 5, 4, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, True, "random"),
    "kernel_1x1": (2, 3, 4, 5, 4, (1, 1), (1, 1), (1, 1), (0, 0), 1, 1, False, "random"),
    "outside": (2, 3, 5, 5, 4, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, False, "far"),
    "integer": (2, 3, 5, 6, 4, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, False, "integer"),
    "border": (2, 3, 4, 5, 4, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, False, "border"),
    "border_dgroups": (1, 4, 5, 4, 4, (2, 2), (1, 2), (2, 1), (1, 0), 2, 2, False, "border"),
    "zero_offset": (2, 3, 5, 5, 4, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1, False, "zero"),
}

# The cases the modulated operator (forward only) and the column (one-hot weight) cases run.
MODULATED = ["basic", "groups", "deformable_groups", "stride_dilate", "no_bias", "outside",
             "integer", "border", "border_dgroups"]
COLUMNS = ["basic", "stride_dilate", "outside", "integer", "border", "border_dgroups"]


def _out_hw(h, w, kernel, stride, dilate, pad):
    return tuple((s + 2 * p - (d * (k - 1) + 1)) // st + 1
                 for s, k, st, d, p in zip((h, w), kernel, stride, dilate, pad))


def case_inputs(name, dtype=np.float32, seed=0):
    """The numpy inputs and keyword arguments of case ``name``."""
    n, c, h, w, f, kernel, stride, dilate, pad, groups, dg, no_bias, kind = CASES[name]
    rng = np.random.RandomState(seed + sorted(CASES).index(name))
    out_hw = _out_hw(h, w, kernel, stride, dilate, pad)
    data = rng.randn(n, c, h, w).astype(dtype)
    offset = _offsets(rng, kind, n, dg, kernel, out_hw, stride, dilate, pad, (h, w)).astype(dtype)
    mask = rng.uniform(0, 2, (n, dg * kernel[0] * kernel[1]) + out_hw).astype(dtype)
    weight = rng.randn(f, c // groups, kernel[0], kernel[1]).astype(dtype)
    bias = rng.randn(f).astype(dtype)
    kwargs = dict(kernel=kernel, stride=stride, dilate=dilate, pad=pad, num_filter=f,
                  num_group=groups, num_deformable_group=dg, no_bias=no_bias)
    head = rng.randn(n, f, *out_hw).astype(dtype)
    return data, offset, mask, weight, bias, kwargs, head


def _column_weight(c, kernel, dtype):
    """The one-hot weight whose convolution output is the column buffer itself."""
    rows = c * kernel[0] * kernel[1]
    return np.eye(rows, dtype=dtype).reshape(rows, c, kernel[0], kernel[1])


def record(mx):
    nd, contrib = mx.nd, mx.nd.contrib
    out = {}
    for name in sorted(CASES):
        for dtype in (np.float32, np.float64):
            if dtype == np.float64 and name not in ("basic", "border", "groups_and_dgroups"):
                continue
            tag = name if dtype == np.float32 else name + "_f64"
            data, offset, mask, weight, bias, kwargs, head = case_inputs(name, dtype)
            arrays = [nd.array(a, dtype=dtype) for a in (data, offset, weight, bias)]
            if kwargs["no_bias"]:
                arrays = arrays[:3]
            for a in arrays:
                a.attach_grad()
            with mx.autograd.record():
                y = contrib.DeformableConvolution(*arrays, **kwargs)
            y.backward(nd.array(head, dtype=dtype))
            out["v1/%s/out" % tag] = y.asnumpy()
            for key, a in zip(("data", "offset", "weight", "bias"), arrays):
                out["v1/%s/grad_%s" % (tag, key)] = a.grad.asnumpy()
            if name in MODULATED:
                args = [nd.array(a, dtype=dtype) for a in (data, offset, mask, weight, bias)]
                if kwargs["no_bias"]:
                    args = args[:4]
                out["v2/%s/out" % tag] = contrib.ModulatedDeformableConvolution(
                    *args, **kwargs).asnumpy()
    for name in COLUMNS:
        data, offset, mask, weight, bias, kwargs, head = case_inputs(name)
        c, kernel = data.shape[1], kwargs["kernel"]
        eye = _column_weight(c, kernel, np.float32)
        kw = dict(kwargs, num_filter=eye.shape[0], num_group=1, no_bias=True)
        out["cols_v1/%s" % name] = contrib.DeformableConvolution(
            nd.array(data), nd.array(offset), nd.array(eye), **kw).asnumpy()
        out["cols_v2/%s" % name] = contrib.ModulatedDeformableConvolution(
            nd.array(data), nd.array(offset), nd.array(mask), nd.array(eye), **kw).asnumpy()
    # im2col_step: a batch of 4 in steps of 2 (and of 1) gives the same numbers.
    data, offset, mask, weight, bias, kwargs, head = case_inputs("basic", seed=7)
    big = [np.concatenate([a, a[::-1] * 0.5]) for a in (data, offset, mask)]
    for step in (1, 2, 64):
        out["v2/im2col_step_%d/out" % step] = contrib.ModulatedDeformableConvolution(
            nd.array(big[0]), nd.array(big[1]), nd.array(big[2]), nd.array(weight),
            nd.array(bias), im2col_step=step, **kwargs).asnumpy()
    return out


def _block_params(mx, net, x, seed):
    """Give every parameter of ``net`` fixed values (after shapes are known): small random
    offset weights, so that the offsets are not all zero."""
    net.initialize()
    net(x)
    rng = np.random.RandomState(seed)
    for name, p in sorted(net.collect_params().items()):
        scale = 0.3 if "offset" in name else 1.0
        p.set_data(mx.nd.array((rng.randn(*p.shape) * scale).astype(np.float32)))


def _names(net):
    return np.array(["%s %s" % (k, tuple(int(s) for s in v.shape))
                     for k, v in net.collect_params().items()])


def make_blocks(mx):
    cnn = mx.gluon.contrib.cnn
    return {
        "v1": cnn.DeformableConvolution(4, kernel_size=3, padding=1, in_channels=3),
        "v1_groups": cnn.DeformableConvolution(6, kernel_size=(3, 2), strides=(2, 1),
                                               dilation=(1, 2), padding=(1, 1), groups=2,
                                               num_deformable_group=2, activation="relu",
                                               offset_use_bias=False),
        "v1_nobias": cnn.DeformableConvolution(3, kernel_size=3, use_bias=False,
                                               prefix="mydeform_"),
        "v2": cnn.ModulatedDeformableConvolution(4, kernel_size=3, padding=1, in_channels=4),
        "v2_groups": cnn.ModulatedDeformableConvolution(4, kernel_size=(2, 3), groups=2,
                                                        num_deformable_group=2,
                                                        activation="tanh", use_bias=False),
    }


def block_input(name):
    c = 3 if name in ("v1", "v1_nobias") else 4
    return np.random.RandomState(11).randn(2, c, 6, 5).astype(np.float32)


def record_blocks(mx):
    out = {}
    nets = make_blocks(mx)
    for k, name in enumerate(sorted(nets)):
        net = nets[name]
        out["block/%s/names_before" % name] = _names(net)
        out["block/%s/repr_before" % name] = np.array(repr(net))
        x = mx.nd.array(block_input(name))
        _block_params(mx, net, x, seed=20 + k)
        out["block/%s/names_after" % name] = _names(net)
        out["block/%s/repr_after" % name] = np.array(repr(net))
        out["block/%s/out" % name] = net(x).asnumpy()
        net.hybridize()
        out["block/%s/out_hybrid" % name] = net(x).asnumpy()
        net(x)
    # One SGD step of a deformable convolution layer: loss, gradients and updated parameters.
    net = mx.gluon.contrib.cnn.DeformableConvolution(4, kernel_size=3, padding=1,
                                                     num_deformable_group=1)
    x = mx.nd.array(block_input("v1"))
    _block_params(mx, net, x, seed=40)
    trainer = mx.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    target = mx.nd.array(np.random.RandomState(41).randn(2, 4, 6, 5).astype(np.float32))
    loss_fn = mx.gluon.loss.L2Loss()
    with mx.autograd.record():
        loss = loss_fn(net(x), target)
    loss.backward()
    out["train/loss"] = loss.asnumpy()
    for name, p in net.collect_params().items():
        out["train/grad/" + name[len(net.prefix):]] = p.grad().asnumpy()
    trainer.step(2)
    for name, p in net.collect_params().items():
        out["train/param/" + name[len(net.prefix):]] = p.data().asnumpy()
    out["train/out_after"] = net(x).asnumpy()
    return out


def save_block_params(mx, path):
    """Write the parameters of a ``DeformableConvolution`` (made like ``make_blocks``'s "v1")
    to ``path``; returns the output they give on ``block_input("v1")``."""
    net = mx.gluon.contrib.cnn.DeformableConvolution(4, kernel_size=3, padding=1, in_channels=3)
    x = mx.nd.array(block_input("v1"))
    _block_params(mx, net, x, seed=50)
    net.save_parameters(path)
    return net(x).asnumpy()
