"""``nd.contrib`` as MXNet 1.9.1 computes it, written once against MXNet's API
(``record(mx)``): each operator's outputs (values, dtype and shape) and, where it has one, the
gradient of a weighted sum of its output; ``foreach``/``while_loop``/``cond`` driving small
recurrences under ``autograd.record()`` with their gradients.

    /tmp/mxvenv/bin/python tests/data/mxnet_nd/make_contrib_records.py

records ``contrib.npz``; tests/test_nd_contrib.py replays ``record`` with trainer_cli."""
import numpy as np


def _grad(mx, name, out, fn, *inputs, weights_seed=0):
    """``fn(*inputs)`` recorded, its output and each float input's gradient of a weighted sum."""
    arrays = [mx.nd.array(x, dtype=x.dtype) for x in inputs]
    for a in arrays:
        if a.dtype == np.float32:
            a.attach_grad()
    with mx.autograd.record():
        y = fn(*arrays)
        w = mx.nd.array(np.random.RandomState(weights_seed).randn(*y.shape).astype(np.float32))
        (y * w).sum().backward()
    out[name] = y.asnumpy()
    for k, a in enumerate(arrays):
        if a.dtype == np.float32:
            out["%s/grad%d" % (name, k)] = a.grad.asnumpy()


def record(mx):
    nd, c = mx.nd, mx.nd.contrib
    out = {}
    rng = np.random.RandomState(0)
    x = rng.randn(3, 4).astype(np.float32)
    xi = np.arange(6, dtype=np.int32).reshape(2, 3)
    out["arange_like"] = c.arange_like(nd.array(x)).asnumpy()
    out["arange_like_axis"] = c.arange_like(nd.array(x), axis=1, start=2, step=0.5).asnumpy()
    out["arange_like_repeat"] = c.arange_like(nd.array(x), repeat=3, start=-1).asnumpy()
    out["arange_like_int"] = c.arange_like(nd.array(xi, dtype="int32")).asnumpy()
    _grad(mx, "boolean_mask", out, lambda a, m: c.boolean_mask(a, m), x,
          np.array([1, 0, 1], np.int32))
    out["boolean_mask_none"] = np.array(
        c.boolean_mask(nd.array(x), nd.array([0, 0, 0])).shape)
    _grad(mx, "index_copy", out, lambda o, i, n: c.index_copy(o, i, n), x,
          np.array([2, 0], np.int64), rng.randn(2, 4).astype(np.float32))
    out["index_array"] = c.index_array(nd.array(xi, dtype="int32")).asnumpy()
    out["index_array_axes"] = c.index_array(nd.zeros((2, 3, 2)), axes=(2, 0)).asnumpy()
    for name, (a, b, kw) in {"close": (x, x + 1e-9, {}), "far": (x, x + 1, {}),
                             "atol": (x, x + 0.4, {"rtol": 0, "atol": 0.5}),
                             "nan_equal": (np.array([np.nan, 1], np.float32),) * 2 + ({},),
                             "nan_unequal": (np.array([np.nan, 1], np.float32),) * 2
                             + ({"equal_nan": False},)}.items():
        out["allclose_" + name] = c.allclose(nd.array(a), nd.array(b), **kw).asnumpy()
    _grad(mx, "div_sqrt_dim", out, c.div_sqrt_dim, rng.randn(2, 3, 5).astype(np.float32))
    _grad(mx, "quadratic", out, lambda a: c.quadratic(a, a=0.7, b=-1.3, c=2.1), x)
    out["quadratic_default"] = c.quadratic(nd.array(x)).asnumpy()
    edges = np.array([0.5, 1.5, -0.5, -1.5, 2.4999998, -2.5, 0.49999997, 3.7, -0.2],
                     np.float32)
    _grad(mx, "round_ste", out, c.round_ste, edges)
    _grad(mx, "sign_ste", out, c.sign_ste, np.array([0.5, -1.5, 0.0, -0.0], np.float32))
    _grad(mx, "gradientmultiplier", out, lambda a: c.gradientmultiplier(a, scalar=-2.5), x)
    specials = np.array([1.0, np.inf, -np.inf, np.nan, 0.0], np.float32)
    for name in ("isinf", "isnan", "isfinite"):
        out[name] = getattr(c, name)(nd.array(specials)).asnumpy()
    csr = nd.array(np.array([[0, 1, 0], [2, 0, 3]], np.float32)).tostype("csr")
    out["getnnz"] = c.getnnz(csr).asnumpy()
    # BatchNormWithReLU: batch statistics (recording trains), the moving ones updated; and the
    # Gluon layer over it.
    moving = [nd.array(rng.randn(3).astype(np.float32)),
              nd.array(rng.rand(3).astype(np.float32) + 0.5)]
    _grad(mx, "BatchNormWithReLU", out,
          lambda d, g, b: c.BatchNormWithReLU(d, g, b, moving[0], moving[1], eps=1e-4,
                                              fix_gamma=False),
          rng.randn(4, 3, 2, 2).astype(np.float32), rng.rand(3).astype(np.float32) + 0.5,
          rng.randn(3).astype(np.float32))
    out["BatchNormWithReLU/moving"] = np.concatenate([m.asnumpy() for m in moving])
    out["BatchNormWithReLU_global"] = c.BatchNormWithReLU(
        nd.array(rng.randn(2, 3, 2, 1).astype(np.float32)), nd.ones((3,)), nd.zeros((3,)),
        moving[0], moving[1], use_global_stats=True).asnumpy()
    layer = mx.gluon.nn.BatchNormReLU(in_channels=3, prefix="bnr_")
    layer.initialize()
    x = nd.array(rng.randn(5, 3, 2, 2).astype(np.float32))    # MXNet's: 4-D only
    x.attach_grad()
    with mx.autograd.record():
        y = layer(x)
    y.backward(nd.array(rng.randn(5, 3, 2, 2).astype(np.float32)))
    out["BatchNormReLU/out"] = y.asnumpy()
    out["BatchNormReLU/grad"] = x.grad.asnumpy()
    out["BatchNormReLU/gamma_grad"] = layer.gamma.grad().asnumpy()
    out["BatchNormReLU/running"] = np.concatenate([layer.running_mean.data().asnumpy(),
                                                   layer.running_var.data().asnumpy()])
    out["BatchNormReLU/names"] = np.array(sorted(layer.collect_params()))
    # rand_zipfian: the expected counts (the draws are each library's own generator's).
    samples, true_counts, sample_counts = c.rand_zipfian(
        nd.array(np.arange(0, 10000, 37), dtype="float32"), 20, 10000)
    out["rand_zipfian_true"] = true_counts.asnumpy()
    out["rand_zipfian_types"] = np.array([str(np.dtype(a.dtype)) for a in
                                          (samples, true_counts, sample_counts)]
                                         + [str(samples.shape), str(sample_counts.shape)])
    out["rand_zipfian_int_classes"] = c.rand_zipfian(
        nd.array([[1, 2], [3, 4]], dtype="int32"), 5, 5)[1].asnumpy()

    # foreach: a running sum and a running product of the rows, two outputs a step.
    def step(row, states):
        total, prod = states
        total = total + row
        prod = prod * row
        return [total * 2, prod], [total, prod]
    _grad(mx, "foreach", out,
          lambda d, s0, s1: nd.concat(*_flat(c.foreach(step, d, [s0, s1])), dim=0),
          rng.randn(4, 3).astype(np.float32), rng.randn(3).astype(np.float32),
          np.ones(3, np.float32))
    _grad(mx, "foreach_list", out,
          lambda a, b, s: nd.concat(*_flat(c.foreach(
              lambda rows, st: (rows[0] * rows[1] + st, st + rows[0]), [a, b], s)), dim=0),
          rng.randn(3, 2).astype(np.float32), rng.randn(3, 2).astype(np.float32),
          rng.randn(2).astype(np.float32))

    # while_loop: halve until below 1, at most 6 steps (padded rows only in shape).
    def body(v, k):
        return [v * 3, k], [v * 0.5, k + 1]
    def loop(v, k):     # the 3 steps run (MXNet leaves the 3 padding rows uninitialised)
        outputs, last = c.while_loop(lambda v, k: (v.sum() > 1), body, [v, k], max_iterations=6)
        return nd.concat(outputs[0][:3].reshape((-1,)), outputs[1][:3].reshape((-1,)),
                         *_flat(last), dim=0)
    _grad(mx, "while_loop", out, loop, np.array([4.0, 3.0], np.float32), np.zeros(1, np.float32))
    shapes = c.while_loop(lambda v, k: (v.sum() > 1), body, [nd.array([4.0, 3.0]), nd.zeros(1)],
                          max_iterations=6)[0]
    out["while_loop_shapes"] = np.array([list(s.shape) for s in shapes])
    v = nd.array([4.0, 3.0])
    outputs, last = c.while_loop(lambda v: v.sum() > 1, lambda v: (v * 3, v * 0.5), v,
                                 max_iterations=5)
    out["while_loop_single_steps"] = outputs[:3].asnumpy()
    out["while_loop_single_last"] = last.asnumpy()
    out["while_loop_single_shape"] = np.array(outputs.shape)
    _grad(mx, "cond_then", out, lambda a: c.cond(a.sum() > 0, lambda: a * 2, lambda: a - 1),
          np.array([1.0, 2.0], np.float32))
    _grad(mx, "cond_else", out, lambda a: c.cond(a.sum() > 0, lambda: a * 2, lambda: a * a),
          np.array([-1.0, -2.0], np.float32))
    return out


def _flat(value):
    """The NDArrays of a (nested) result, in order, each flattened to 1-D."""
    if hasattr(value, "asnumpy"):
        return [value.reshape((-1,))]
    return [x for item in value for x in _flat(item)]


def record_attention(mx):
    """The interleaved attention products and their gradients (their values are matrix
    products: compared to float rounding)."""
    c = mx.nd.contrib
    out = {}
    rng = np.random.RandomState(3)
    heads, dim, length, batch, kv_length = 2, 3, 4, 2, 5
    qkv = rng.randn(length, batch, heads * 3 * dim).astype(np.float32)
    att = rng.rand(batch * heads, length, length).astype(np.float32)
    q = rng.randn(length, batch, heads * dim).astype(np.float32)
    kv = rng.randn(kv_length, batch, heads * 2 * dim).astype(np.float32)
    att2 = rng.rand(batch * heads, length, kv_length).astype(np.float32)
    _grad(mx, "selfatt_qk", out, lambda x: c.interleaved_matmul_selfatt_qk(x, heads=heads), qkv)
    _grad(mx, "selfatt_valatt", out,
          lambda x, a: c.interleaved_matmul_selfatt_valatt(x, a, heads=heads), qkv, att)
    _grad(mx, "encdec_qk", out,
          lambda x, y: c.interleaved_matmul_encdec_qk(x, y, heads=heads), q, kv)
    _grad(mx, "encdec_valatt", out,
          lambda y, a: c.interleaved_matmul_encdec_valatt(y, a, heads=heads), kv, att2)
    return out


def record_pooling(mx):
    """``AdaptiveAvgPooling2D`` over sizes that divide and sizes that do not (overlapping bins),
    forward and gradient."""
    c = mx.nd.contrib
    out = {}
    rng = np.random.RandomState(4)
    data = rng.randn(2, 3, 7, 10).astype(np.float32)
    for name, size in (("global", ()), ("one", 1), ("three", 3), ("two_by_four", (2, 4)),
                       ("five_by_six", (5, 6)), ("same", (7, 10))):
        _grad(mx, "adaptive_%s" % name, out,
              lambda x, size=size: c.AdaptiveAvgPooling2D(x, output_size=size), data)
    return out
