"""The op registry: every public ``nd`` op, how to call it, on which inputs, in which dtypes, and
where (and why) it deliberately differs from MXNet 1.9.1.

One ``Sample`` is one call: ``call(nd, *arrays)`` on inputs made by ``Sample.make``; the same
function runs on the real MXNet (tests/data/mxnet_ops/make_op_reference.py, which records its
values and gradients in reference.npz) and here (tests/test_op_registry.py). ``SAMPLES`` holds
them all, ``EXCLUDED`` the public ``nd`` callables that are deliberately not here (with the
reason), ``DEVIATIONS`` what differs from MXNet (docs/compat.md's "Ops that differ from MXNet"
section is generated from it: ``python tests/op_registry.py --write-compat``), and ``LAYERS`` the
Gluon layers with the golden file each is checked against.

A sample's gradient is taken with respect to its ``wrt`` inputs (by default every input made by
``U``, i.e. every floating input; fixed ``C`` inputs are not differentiated), under
``autograd.record()``, with a seeded head gradient per output.

This module runs in both environments, so it imports neither ``mxnet`` nor ``trainer_cli``.
"""
import os
import sys
import zlib

import numpy as np

F32 = ("float32",)
FLOATS = ("float32", "float64")
ALL = ("float32", "float64", "float16")  # MXNet 1.9.1's CPU has no float16 gemm, dot or sort

# Relative / absolute tolerances per dtype: float32 agrees with MXNet to a few ulp; float16 to
# about one ulp (2**-10) of the result, since both sides round each op to half precision.
TOL = {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-12), "float16": (2e-3, 2e-3)}
GRAD_TOL = {"float32": (1e-5, 1e-5), "float64": (1e-11, 1e-11), "float16": (4e-3, 4e-3)}


# For these ops MXNet 1.9.1 holds a constant or a scalar parameter (180/pi, 2/sqrt(pi), slope,
# alpha, beta, the norms' eps, SELU's and GELU's constants) in float32 also when computing in
# float64: float64 agrees to ~1e-7 only.
F64_CONST = {"float64": (1e-6, 1e-9)}


class U:
    """A floating input of ``shape``, uniform in [lo, hi), in the sample's dtype."""

    def __init__(self, *shape, lo=-2.0, hi=2.0, away=0.0):
        self.shape, self.lo, self.hi, self.away = shape, lo, hi, away

    def make(self, rng, dtype):
        a = rng.uniform(self.lo, self.hi, size=self.shape)
        if self.away:  # keep |a| >= away (kinks, poles, ties of rounding at .5)
            a = np.where(np.abs(a) < self.away, np.sign(a + 1e-9) * self.away, a)
        return a.astype(dtype)


class C:
    """A fixed input (indices, lengths, masks): in ``dtype`` if given, else the sample's (MXNet
    wants an op's floating inputs in one dtype)."""

    def __init__(self, values, dtype=None):
        self.values, self.dtype = values, dtype

    def make(self, rng, dtype):
        return np.array(self.values, dtype=self.dtype or dtype)


class Sample:
    """One call of ``op``: ``call(nd, *inputs)``; ``mx_call`` where MXNet spells it otherwise."""

    def __init__(self, name, op, call, inputs, dtypes=None, wrt=None, mx_call=None, tol=None,
                 grad_tol=None, train=True):
        self.name, self.op, self.call, self.inputs = name, op, call, inputs
        # float64 too wherever a floating input follows the dtype
        self.dtypes = dtypes or (FLOATS if any(isinstance(s, U) for s in inputs) else F32)
        self.wrt = [i for i, s in enumerate(inputs) if isinstance(s, U)] if wrt is None else wrt
        self.mx_call = mx_call or call
        self.tol, self.grad_tol, self.train = tol or {}, grad_tol or {}, train

    def make(self, dtype):
        rng = np.random.RandomState(zlib.crc32(("%s/%s" % (self.name, dtype)).encode()) % 2**31)
        return [spec.make(rng, dtype) for spec in self.inputs]

    def key(self, dtype):
        return "%s/%s" % (self.name, dtype)


SAMPLES = {}


def op(name, call, inputs, op_name=None, **kw):
    """Register a sample; ``op_name`` defaults to ``name`` up to its first ``.``."""
    assert name not in SAMPLES, name
    SAMPLES[name] = Sample(name, op_name or name.split(".")[0], call, inputs, **kw)


# ---- elementwise, one input -------------------------------------------------------------------
_UNARY = {
    "abs": U(2, 3, away=0.05), "arccos": U(2, 3, lo=-0.9, hi=0.9), "arccosh": U(2, 3, lo=1.1, hi=3),
    "arcsin": U(2, 3, lo=-0.9, hi=0.9), "arcsinh": U(2, 3), "arctan": U(2, 3),
    "arctanh": U(2, 3, lo=-0.9, hi=0.9), "cbrt": U(2, 3, away=0.1), "ceil": U(2, 3, away=0.05),
    "cos": U(2, 3), "cosh": U(2, 3), "degrees": U(2, 3), "erf": U(2, 3), "exp": U(2, 3),
    "erfinv": U(2, 3, lo=-0.95, hi=0.95), "gamma": U(2, 3, lo=0.1, hi=5),
    "gammaln": U(2, 3, lo=0.1, hi=8),
    "expm1": U(2, 3), "fix": U(2, 3, away=0.05), "floor": U(2, 3, away=0.05),
    "log": U(2, 3, lo=0.2, hi=3), "log10": U(2, 3, lo=0.2, hi=3), "log1p": U(2, 3, lo=-0.5, hi=3),
    "log2": U(2, 3, lo=0.2, hi=3), "negative": U(2, 3), "radians": U(2, 3),
    "rcbrt": U(2, 3, lo=0.2, hi=3), "reciprocal": U(2, 3, away=0.3), "relu": U(2, 3, away=0.05),
    "rint": U(2, 3, away=0.05), "round": U(2, 3, away=0.05), "rsqrt": U(2, 3, lo=0.2, hi=3),
    "sigmoid": U(2, 3), "sign": U(2, 3, away=0.05), "sin": U(2, 3), "sinh": U(2, 3),
    "softsign": U(2, 3), "sqrt": U(2, 3, lo=0.2, hi=3), "square": U(2, 3),
    "tan": U(2, 3, lo=-1.2, hi=1.2), "tanh": U(2, 3), "trunc": U(2, 3, away=0.05),
}
for _n, _spec in _UNARY.items():
    _tol = F64_CONST if _n in ("degrees", "radians", "erf") else None
    op(_n, (lambda n: lambda nd, x: getattr(nd, n)(x))(_n), [_spec], dtypes=ALL, tol=_tol,
       grad_tol=_tol)
op("softrelu", lambda nd, x: nd.softrelu(x), [U(2, 3)], dtypes=ALL,
   mx_call=lambda nd, x: nd.Activation(x, act_type="softrelu"))
op("hard_sigmoid", lambda nd, x: nd.hard_sigmoid(x), [U(2, 3, lo=-4, hi=4)], dtypes=ALL,
   tol=F64_CONST, grad_tol=F64_CONST)
op("hard_sigmoid.params", lambda nd, x: nd.hard_sigmoid(x, alpha=0.3, beta=0.4), [U(2, 3)],
   tol=F64_CONST, grad_tol=F64_CONST)
op("identity", lambda nd, x: nd.identity(x), [U(2, 3)], dtypes=ALL)
op("BlockGrad", lambda nd, x: nd.BlockGrad(x), [U(2, 3)])
op("stop_gradient", lambda nd, x: nd.stop_gradient(x), [U(2, 3)])
op("make_loss", lambda nd, x: nd.make_loss(x), [U(2, 3)])
op("MakeLoss", lambda nd, x: nd.MakeLoss(x, grad_scale=2.0), [U(2, 3)])
op("MakeLoss.valid", lambda nd, x: nd.MakeLoss(x, normalization="valid", valid_thresh=0.5),
   [U(2, 3, lo=0, hi=1)])
op("LRN", lambda nd, x: nd.LRN(x, alpha=0.01, beta=0.75, knorm=2.0, nsize=3),
   [U(2, 5, 3, 3)], dtypes=F32)
op("LRN.wide", lambda nd, x: nd.LRN(x, nsize=5, knorm=1.5), [U(1, 4, 2, 3)], dtypes=F32)
op("im2col", lambda nd, x: nd.im2col(x, kernel=(2, 3), stride=(1, 2), pad=(1, 0)),
   [U(2, 2, 4, 5)])
op("im2col.dilate", lambda nd, x: nd.im2col(x, kernel=(3, 3), dilate=(2, 1), pad=(2, 1)),
   [U(1, 3, 7, 6)])
op("col2im", lambda nd, x: nd.col2im(x, output_size=(4, 5), kernel=(2, 3), stride=(1, 2),
                                     pad=(1, 0)), [U(2, 12, 10)])
op("smooth_l1", lambda nd, x: nd.smooth_l1(x, scalar=1.5), [U(2, 4, lo=-3, hi=3)], dtypes=ALL)
op("clip", lambda nd, x: nd.clip(x, -0.5, 1.0), [U(2, 4, away=0.05)], dtypes=ALL)
op("cast", lambda nd, x: nd.cast(x, dtype="float64"), [U(2, 3)], dtypes=ALL)
op("Cast", lambda nd, x: nd.Cast(x, dtype="float16"), [U(2, 3)])
op("cast.int", lambda nd, x: nd.cast(x, dtype="int32"), [U(2, 3, lo=-5, hi=5)], wrt=[])
op("zeros_like", lambda nd, x: nd.zeros_like(x), [U(2, 3)], dtypes=ALL)
op("ones_like", lambda nd, x: nd.ones_like(x), [U(2, 3)], dtypes=ALL)
op("full_like", lambda nd, x: nd.full_like(x, 2.5), [U(2, 3)], dtypes=FLOATS,
   mx_call=lambda nd, x: nd.zeros_like(x) + 2.5)  # MXNet has no full_like
op("logical_not.float", lambda nd, x: nd.logical_not(x), [U(2, 3, away=0.1)], op_name="logical_not")

# ---- elementwise, two inputs ------------------------------------------------------------------
_POS = dict(lo=0.5, hi=2.0)
for _n in ("add", "subtract", "multiply", "elemwise_add", "elemwise_sub", "elemwise_mul",
           "maximum", "minimum"):
    op(_n, (lambda n: lambda nd, a, b: getattr(nd, n)(a, b))(_n), [U(2, 3), U(2, 3)], dtypes=ALL)
for _n in ("divide", "elemwise_div"):
    op(_n, (lambda n: lambda nd, a, b: getattr(nd, n)(a, b))(_n), [U(2, 3), U(2, 3, **_POS)],
       dtypes=ALL)
op("power", lambda nd, a, b: nd.power(a, b), [U(2, 3, **_POS), U(2, 3)], dtypes=ALL)
for _n in ("equal", "not_equal", "greater", "greater_equal", "lesser", "lesser_equal",
           "logical_and", "logical_or", "logical_xor"):
    # every other entry of b copies a, so equality and the "or equal" cases are exercised
    op(_n + ".float", (lambda n: lambda nd, a, b: getattr(nd, n)(a, b))(_n),
       [U(2, 4, away=0.1), C([[0.5, -1.0, 0.0, 1.5], [2.0, 0.0, -0.5, -2.0]])], dtypes=F32,
       wrt=[0])
for _n in ("broadcast_add", "broadcast_sub", "broadcast_mul", "broadcast_maximum",
           "broadcast_minimum"):
    op(_n, (lambda n: lambda nd, a, b: getattr(nd, n)(a, b))(_n), [U(2, 3), U(1, 3)], dtypes=ALL)
op("broadcast_div", lambda nd, a, b: nd.broadcast_div(a, b), [U(2, 3), U(2, 1, **_POS)],
   dtypes=ALL)
op("broadcast_power", lambda nd, a, b: nd.broadcast_power(a, b), [U(2, 3, **_POS), U(1, 3)],
   dtypes=ALL)
for _n in ("broadcast_equal", "broadcast_not_equal", "broadcast_greater",
           "broadcast_greater_equal", "broadcast_lesser", "broadcast_lesser_equal",
           "broadcast_logical_and"):
    op(_n, (lambda n: lambda nd, a, b: getattr(nd, n)(a, b))(_n),
       [U(2, 3, away=0.1), C([[0.5, 0.0, -1.0]])], wrt=[0])
op("add.scalar", lambda nd, a: a + 1.5, [U(2, 3)], op_name="add", dtypes=ALL)
op("power.scalar", lambda nd, a: a ** 2.5, [U(2, 3, **_POS)], op_name="power", dtypes=FLOATS)
op("rpower.scalar", lambda nd, a: 2.0 ** a, [U(2, 3)], op_name="power", dtypes=FLOATS)
op("divide.rscalar", lambda nd, a: 3.0 / a, [U(2, 3, **_POS)], op_name="divide", dtypes=ALL)
op("modulo.rscalar", lambda nd, a: 5.0 % a, [U(2, 3, **_POS)], op_name="modulo")
op("modulo.scalar", lambda nd, a: a % 1.5, [U(2, 3, lo=-4, hi=4)], op_name="modulo",
   dtypes=FLOATS)
op("where", lambda nd, c, a, b: nd.where(c, a, b), [C([[1, 0, 1], [0, 0, 1]]), U(2, 3), U(2, 3)],
   dtypes=ALL)
op("add_n", lambda nd, a, b, c: nd.add_n(a, b, c), [U(2, 3), U(2, 3), U(2, 3)], dtypes=ALL)
op("ElementWiseSum", lambda nd, a, b: nd.ElementWiseSum(a, b), [U(2, 3), U(2, 3)])

# ---- reductions -------------------------------------------------------------------------------
for _n in ("sum", "mean", "prod", "max", "min", "nansum", "nanprod", "sum_axis", "max_axis",
           "min_axis"):
    _f = (lambda n: lambda nd, x: getattr(nd, n)(x, axis=1))(_n)
    op(_n + ".axis", _f, [U(2, 3, 4, lo=0.5, hi=2.0)], op_name=_n, dtypes=ALL)
op("sum", lambda nd, x: nd.sum(x), [U(2, 3)], dtypes=ALL)
op("sum.keepdims_exclude", lambda nd, x: nd.sum(x, axis=(0, 2), keepdims=True, exclude=True),
   [U(2, 3, 4)])
op("mean.tuple", lambda nd, x: nd.mean(x, axis=(0, 2), keepdims=True), [U(2, 3, 4)], dtypes=ALL)
op("max.all", lambda nd, x: nd.max(x), [U(3, 4)], op_name="max")
op("norm", lambda nd, x: nd.norm(x), [U(2, 3)], dtypes=ALL)
op("norm.l1_axis", lambda nd, x: nd.norm(x, ord=1, axis=1, keepdims=True), [U(2, 3, away=0.05)])
op("norm.l2_axis", lambda nd, x: nd.norm(x, ord=2, axis=(0, 1)), [U(2, 3, 2)])
op("argmax", lambda nd, x: nd.argmax(x, axis=1), [U(3, 4)], dtypes=ALL)
op("argmin", lambda nd, x: nd.argmin(x, axis=0, keepdims=True), [U(3, 4)], dtypes=FLOATS)
op("argmax.all", lambda nd, x: nd.argmax(x), [U(3, 4)], op_name="argmax")
op("argsort", lambda nd, x: nd.argsort(x, axis=1), [U(3, 4)], dtypes=FLOATS)
op("argsort.desc", lambda nd, x: nd.argsort(x, axis=0, is_ascend=False, dtype="int32"), [U(3, 4)])
op("sort", lambda nd, x: nd.sort(x), [U(3, 4)], dtypes=FLOATS)
op("sort.axis1", lambda nd, x: nd.sort(x, axis=1), [U(3, 4)], dtypes=FLOATS)
op("sort.desc_axis0", lambda nd, x: nd.sort(x, axis=0, is_ascend=False), [U(3, 4)])
op("topk", lambda nd, x: nd.topk(x, k=2), [U(3, 4)])
op("topk.value", lambda nd, x: nd.topk(x, k=2, ret_typ="value", axis=0), [U(3, 4)],
   dtypes=ALL)
op("topk.both", lambda nd, x: nd.topk(x, k=3, ret_typ="both", is_ascend=True), [U(2, 5)])
op("topk.mask", lambda nd, x: nd.topk(x, k=2, ret_typ="mask"), [U(2, 5)])
op("cumsum.flat", lambda nd, x: nd.cumsum(x), [U(2, 3)], op_name="cumsum")
op("softmax", lambda nd, x: nd.softmax(x), [U(2, 5)], dtypes=ALL)
op("softmax.axis_temperature", lambda nd, x: nd.softmax(x, axis=0, temperature=2.0), [U(3, 4)])
op("log_softmax", lambda nd, x: nd.log_softmax(x), [U(2, 5)], dtypes=ALL)
op("log_softmax.axis", lambda nd, x: nd.log_softmax(x, axis=1), [U(2, 3, 4)])
op("softmin", lambda nd, x: nd.softmin(x, axis=-1), [U(2, 5)], dtypes=ALL)
op("moments.keepdims", lambda nd, x: nd.moments(x, axes=(0, 2), keepdims=True), [U(2, 3, 4)],
   op_name="moments")

# ---- shapes and indexing ----------------------------------------------------------------------
op("reshape", lambda nd, x: nd.reshape(x, shape=(3, -1)), [U(2, 3, 2)], dtypes=ALL)
op("reshape.special", lambda nd, x: nd.reshape(x, shape=(0, -3, -2)), [U(2, 3, 2, 1)],
   op_name="reshape")
op("Reshape", lambda nd, x: nd.Reshape(x, shape=(-1, 2), reverse=True), [U(2, 3, 2)])
op("reshape_like", lambda nd, a, b: nd.reshape_like(a, b), [U(2, 3), U(3, 2)], wrt=[0])
op("flatten", lambda nd, x: nd.flatten(x), [U(2, 3, 2)])
op("Flatten", lambda nd, x: nd.Flatten(x), [U(2, 3, 2)])
op("expand_dims", lambda nd, x: nd.expand_dims(x, axis=1), [U(2, 3)], dtypes=ALL)
op("squeeze", lambda nd, x: nd.squeeze(x, axis=2), [U(2, 3, 1)])
op("squeeze.all", lambda nd, x: nd.squeeze(x), [U(1, 3, 1)], op_name="squeeze")
op("transpose", lambda nd, x: nd.transpose(x, axes=(2, 0, 1)), [U(2, 3, 4)], dtypes=ALL)
op("transpose.default", lambda nd, x: nd.transpose(x), [U(2, 3, 4)], op_name="transpose")
op("swapaxes", lambda nd, x: nd.swapaxes(x, 0, 2), [U(2, 3, 4)])
op("SwapAxis", lambda nd, x: nd.SwapAxis(x, dim1=1, dim2=2), [U(2, 3, 4)])
op("flip", lambda nd, x: nd.flip(x, axis=0), [U(2, 3)])
op("tile", lambda nd, x: nd.tile(x, reps=(2, 1, 2)), [U(2, 3)])
op("repeat", lambda nd, x: nd.repeat(x, repeats=2, axis=1), [U(2, 3)])
op("repeat.flat", lambda nd, x: nd.repeat(x, repeats=3), [U(2, 2)], op_name="repeat")
op("broadcast_to", lambda nd, x: nd.broadcast_to(x, shape=(2, 3, 4)), [U(1, 3, 1)])
op("broadcast_axis", lambda nd, x: nd.broadcast_axis(x, axis=(0, 2), size=(2, 3)), [U(1, 3, 1)])
op("broadcast_axes", lambda nd, x: nd.broadcast_axes(x, axis=1, size=4), [U(2, 1)])
op("broadcast_like", lambda nd, a, b: nd.broadcast_like(a, b), [U(2, 1), U(2, 3)], wrt=[0])
op("concat", lambda nd, a, b: nd.concat(a, b, dim=0), [U(2, 3), U(1, 3)], dtypes=ALL)
op("Concat", lambda nd, a, b: nd.Concat(a, b, dim=1), [U(2, 3), U(2, 1)])
op("concatenate", lambda nd, a, b: nd.concatenate([a, b], axis=1), [U(2, 3), U(2, 2)],
   mx_call=lambda nd, a, b: nd.concat(a, b, dim=1))
op("stack", lambda nd, a, b: nd.stack(a, b, axis=1), [U(2, 3), U(2, 3)], dtypes=ALL)
op("split", lambda nd, x: nd.split(x, num_outputs=3, axis=1), [U(2, 3, 2)])
op("split.squeeze", lambda nd, x: nd.split(x, num_outputs=2, axis=0, squeeze_axis=True),
   [U(2, 3)], op_name="split")
op("SliceChannel", lambda nd, x: nd.SliceChannel(x, num_outputs=2), [U(2, 4)])
op("slice", lambda nd, x: nd.slice(x, begin=(0, 1), end=(2, 3)), [U(3, 4)], dtypes=ALL)
op("slice.step", lambda nd, x: nd.slice(x, begin=(None, 3), end=(None, 0), step=(1, -2)),
   [U(2, 5)], op_name="slice")
op("crop", lambda nd, x: nd.crop(x, begin=(1, 0), end=(3, 2)), [U(3, 4)])
op("slice_axis", lambda nd, x: nd.slice_axis(x, axis=1, begin=1, end=-1), [U(2, 5)])
op("take", lambda nd, a, i: nd.take(a, i), [U(4, 3), C([[0, 3], [3, 1]])], dtypes=ALL)
op("take.wrap_axis1", lambda nd, a, i: nd.take(a, i, axis=1, mode="wrap"),
   [U(2, 3), C([4, -1, 0])], op_name="take")
op("pick", lambda nd, a, i: nd.pick(a, i, axis=1), [U(3, 4), C([0, 3, 1])], dtypes=ALL)
op("pick.keepdims_wrap", lambda nd, a, i: nd.pick(a, i, axis=0, keepdims=True, mode="wrap"),
   [U(3, 4), C([0, 5, -1, 2])], op_name="pick")
op("one_hot", lambda nd, i: nd.one_hot(i, 4), [C([1, 0, 3])])
op("one_hot.values", lambda nd, i: nd.one_hot(i, 3, on_value=2.0, off_value=-1.0,
                                              dtype="float64"), [C([[1, 0], [2, 2]])],
   op_name="one_hot")
op("onehot_encode", lambda nd, i, o: nd.onehot_encode(i, o), [C([1, 0, 3]), C(np.zeros((3, 4)))])
op("dot", lambda nd, a, b: nd.dot(a, b), [U(2, 3), U(3, 4)], dtypes=FLOATS)
op("dot.transposed", lambda nd, a, b: nd.dot(a, b, transpose_a=True, transpose_b=True),
   [U(3, 2), U(4, 3)], op_name="dot")
op("dot.vectors", lambda nd, a, b: nd.dot(a, b), [U(3), U(3)], op_name="dot")
op("batch_dot", lambda nd, a, b: nd.batch_dot(a, b), [U(2, 2, 3), U(2, 3, 2)], dtypes=FLOATS)
op("batch_dot.transposed", lambda nd, a, b: nd.batch_dot(a, b, transpose_a=True,
                                                         transpose_b=True),
   [U(2, 3, 2), U(2, 4, 3)], op_name="batch_dot")
op("pad.constant", lambda nd, x: nd.pad(x, mode="constant", pad_width=(0, 0, 0, 0, 1, 2, 0, 1),
                                        constant_value=0.5), [U(1, 2, 3, 3)], op_name="pad")
op("pad.edge", lambda nd, x: nd.pad(x, mode="edge", pad_width=(0, 0, 0, 0, 2, 1, 1, 2)),
   [U(1, 2, 3, 3)], op_name="pad")
op("Pad.reflect", lambda nd, x: nd.Pad(x, mode="reflect", pad_width=(0, 0, 0, 0, 1, 2, 2, 1)),
   [U(1, 2, 3, 4)], op_name="Pad")

# ---- neural-network ops -----------------------------------------------------------------------
for _a in ("relu", "sigmoid", "tanh", "softrelu", "softsign"):
    op("Activation." + _a, (lambda a: lambda nd, x: nd.Activation(x, act_type=a))(_a),
       [U(2, 4, away=0.05)], op_name="Activation", dtypes=ALL)
op("LeakyReLU.leaky", lambda nd, x: nd.LeakyReLU(x, slope=0.1), [U(2, 4, away=0.05)],
   op_name="LeakyReLU", dtypes=FLOATS, tol=F64_CONST, grad_tol=F64_CONST)
op("LeakyReLU.elu", lambda nd, x: nd.LeakyReLU(x, act_type="elu", slope=0.7),
   [U(2, 4, away=0.05)], op_name="LeakyReLU", dtypes=FLOATS, tol=F64_CONST, grad_tol=F64_CONST)
op("LeakyReLU.selu", lambda nd, x: nd.LeakyReLU(x, act_type="selu"), [U(2, 4, away=0.05)],
   op_name="LeakyReLU", tol=F64_CONST, grad_tol=F64_CONST)
op("LeakyReLU.gelu", lambda nd, x: nd.LeakyReLU(x, act_type="gelu"), [U(2, 4)],
   op_name="LeakyReLU", tol=F64_CONST, grad_tol=F64_CONST)
op("LeakyReLU.prelu", lambda nd, x, g: nd.LeakyReLU(x, g, act_type="prelu"),
   [U(2, 3, 2, away=0.05), U(3)], op_name="LeakyReLU", tol=F64_CONST, grad_tol=F64_CONST)
op("FullyConnected", lambda nd, x, w, b: nd.FullyConnected(x, w, b, num_hidden=4),
   [U(2, 3), U(4, 3), U(4)], dtypes=FLOATS)
op("FullyConnected.noflatten", lambda nd, x, w: nd.FullyConnected(x, w, num_hidden=2,
                                                                  no_bias=True, flatten=False),
   [U(2, 3, 3), U(2, 3)], op_name="FullyConnected")
op("FullyConnected.flatten", lambda nd, x, w, b: nd.FullyConnected(x, w, b, num_hidden=2),
   [U(2, 2, 3), U(2, 6), U(2)], op_name="FullyConnected")
op("Convolution.1d", lambda nd, x, w, b: nd.Convolution(x, w, b, kernel=(3,), num_filter=2,
                                                        pad=(1,), stride=(2,)),
   [U(2, 3, 7), U(2, 3, 3), U(2)], op_name="Convolution")
op("Convolution.2d", lambda nd, x, w, b: nd.Convolution(x, w, b, kernel=(3, 2), num_filter=4,
                                                        stride=(1, 2), pad=(1, 0),
                                                        dilate=(2, 1), num_group=2),
   [U(2, 4, 5, 6), U(4, 2, 3, 2), U(4)], op_name="Convolution", dtypes=FLOATS)
op("Convolution.3d", lambda nd, x, w: nd.Convolution(x, w, kernel=(2, 2, 2), num_filter=2,
                                                     no_bias=True),
   [U(1, 2, 3, 3, 3), U(2, 2, 2, 2, 2)], op_name="Convolution")
op("Deconvolution.1d", lambda nd, x, w, b: nd.Deconvolution(x, w, b, kernel=(3,), num_filter=2,
                                                            stride=(2,), pad=(1,), adj=(1,),
                                                            no_bias=False),
   [U(2, 3, 4), U(3, 2, 3), U(2)], op_name="Deconvolution")
op("Deconvolution.2d", lambda nd, x, w: nd.Deconvolution(x, w, kernel=(2, 3), num_filter=4,
                                                         stride=(2, 1), num_group=2,
                                                         no_bias=True),
   [U(1, 4, 3, 3), U(4, 2, 2, 3)], op_name="Deconvolution", dtypes=FLOATS)
op("Pooling.max2d", lambda nd, x: nd.Pooling(x, kernel=(2, 2), stride=(2, 1), pool_type="max"),
   [U(2, 2, 4, 5)], op_name="Pooling", dtypes=ALL)
op("Pooling.avg2d_full", lambda nd, x: nd.Pooling(x, kernel=(3, 2), stride=(2, 2), pad=(1, 1),
                                                  pool_type="avg",
                                                  pooling_convention="full"),
   [U(1, 2, 5, 5)], op_name="Pooling")
op("Pooling.avg_exclude_pad", lambda nd, x: nd.Pooling(x, kernel=(3,), stride=(2,), pad=(1,),
                                                       pool_type="avg",
                                                       count_include_pad=False),
   [U(2, 2, 6)], op_name="Pooling")
op("Pooling.sum3d", lambda nd, x: nd.Pooling(x, kernel=(2, 2, 2), pool_type="sum"),
   [U(1, 2, 3, 3, 3)], op_name="Pooling")
op("Pooling.lp2", lambda nd, x: nd.Pooling(x, kernel=(2, 2), pool_type="lp", p_value=2),
   [U(1, 2, 4, 4)], op_name="Pooling")
op("Pooling.lp3", lambda nd, x: nd.Pooling(x, kernel=(2,), stride=(1,), pad=(1,),
                                           pool_type="lp", p_value=3), [U(2, 2, 5)],
   op_name="Pooling")
op("Pooling.lp1_global", lambda nd, x: nd.Pooling(x, kernel=(1, 1), global_pool=True,
                                                  pool_type="lp", p_value=1), [U(2, 2, 3, 2)],
   op_name="Pooling")
op("Pooling.global_max", lambda nd, x: nd.Pooling(x, kernel=(1, 1), global_pool=True),
   [U(2, 3, 3, 4)], op_name="Pooling")
op("Pooling.global_avg", lambda nd, x: nd.Pooling(x, kernel=(1,), global_pool=True,
                                                  pool_type="avg"),
   [U(2, 3, 5)], op_name="Pooling")
op("BatchNorm.train", lambda nd, x, g, b, m, v: nd.BatchNorm(x, g, b, m, v, fix_gamma=False),
   [U(4, 3, 2), U(3, lo=0.5, hi=1.5), U(3), U(3), U(3, lo=0.5, hi=1.5)], wrt=[0, 1, 2],
   op_name="BatchNorm", tol=F64_CONST, grad_tol=F64_CONST)
op("BatchNorm.global_stats",
   lambda nd, x, g, b, m, v: nd.BatchNorm(x, g, b, m, v, fix_gamma=False, use_global_stats=True,
                                          eps=1e-3),
   [U(2, 3, 2, 2), U(3, lo=0.5, hi=1.5), U(3), U(3), U(3, lo=0.5, hi=1.5)], wrt=[0, 1, 2],
   op_name="BatchNorm", tol=F64_CONST, grad_tol=F64_CONST)
op("BatchNorm.eval_axis", lambda nd, x, g, b, m, v: nd.BatchNorm(x, g, b, m, v, axis=-1),
   [U(3, 2, 4), U(4, lo=0.5, hi=1.5), U(4), U(4), U(4, lo=0.5, hi=1.5)], wrt=[0, 2],
   op_name="BatchNorm", train=False, tol=F64_CONST, grad_tol=F64_CONST)
op("LayerNorm", lambda nd, x, g, b: nd.LayerNorm(x, g, b), [U(2, 3, 4), U(4), U(4)], dtypes=ALL,
   tol=F64_CONST, grad_tol=F64_CONST)
op("LayerNorm.axis", lambda nd, x, g, b: nd.LayerNorm(x, g, b, axis=1, eps=1e-3),
   [U(2, 3, 4), U(3), U(3)], op_name="LayerNorm", tol=F64_CONST, grad_tol=F64_CONST)
# MXNet 1.9.1's CPU runs InstanceNorm, instance-mode SoftmaxActivation on more than two axes and
# CTC in float32 only
op("InstanceNorm", lambda nd, x, g, b: nd.InstanceNorm(x, g, b), [U(2, 3, 4), U(3), U(3)],
   dtypes=F32)
op("GroupNorm", lambda nd, x, g, b: nd.GroupNorm(x, g, b, num_groups=2),
   [U(2, 4, 3), U(2), U(2)], tol=F64_CONST, grad_tol=F64_CONST)
op("Embedding", lambda nd, i, w: nd.Embedding(i, w, input_dim=5, output_dim=3),
   [C([[0, 4], [2, 2]]), U(5, 3)])
op("Dropout.eval", lambda nd, x: nd.Dropout(x, p=0.5), [U(2, 3)], op_name="Dropout", train=False)
op("Dropout.p0", lambda nd, x: nd.Dropout(x, p=0.0), [U(2, 3)], op_name="Dropout")
op("batch_take.grad", lambda nd, a, i: nd.batch_take(a, i), [U(3, 4), C([0, 3, 5], "int32")],
   wrt=[0], op_name="batch_take")
op("SoftmaxActivation.instance3d", lambda nd, x: nd.SoftmaxActivation(x), [U(2, 3, 2)],
   op_name="SoftmaxActivation", dtypes=F32)
op("CTCLoss", lambda nd, x, y: nd.CTCLoss(x, y), [U(4, 2, 5), C([[1, 2], [3, 0]])], wrt=[0],
   dtypes=F32)
op("ctc_loss.lengths", lambda nd, x, y, xl, yl: nd.ctc_loss(x, y, xl, yl, use_data_lengths=True,
                                                            use_label_lengths=True,
                                                            blank_label="last"),
   [U(5, 2, 4), C([[0, 1], [2, 0]]), C([5, 3]), C([2, 1])], wrt=[0], op_name="ctc_loss",
   dtypes=F32)

# ---- edges: ties, zeros, halves, bounds (where implementations part) ---------------------------
_TIES = [[1.0, 3.0, 3.0, -1.0], [2.0, 2.0, 0.0, 2.0]]
op("round.halves", lambda nd, x: nd.round(x), [C([[-2.5, -1.5, -0.5], [0.5, 1.5, 2.5]])],
   op_name="round", wrt=[0])
op("rint.halves", lambda nd, x: nd.rint(x), [C([[-2.5, -1.5, -0.5], [0.5, 1.5, 2.5]])],
   op_name="rint", wrt=[0])
_NEAR_HALVES = [-0.49999997, 0.49999997, -2.5000002, 2.4999998, 0.5000001, -0.5000001,
                8388607.5, -8388607.5, 3.5, -3.5]
op("round.near_halves", lambda nd, x: nd.round(x), [C(_NEAR_HALVES)], op_name="round")
op("rint.near_halves", lambda nd, x: nd.rint(x), [C(_NEAR_HALVES)], op_name="rint")
op("fix.negative", lambda nd, x: nd.fix(x), [C([-2.5, -0.5, 0.5, 1.7])], op_name="fix", wrt=[0])
op("relu.zero", lambda nd, x: nd.relu(x), [C([-1.0, 0.0, 1.0])], op_name="relu", wrt=[0])
op("abs.zero", lambda nd, x: nd.abs(x), [C([-1.0, 0.0, 1.0])], op_name="abs", wrt=[0])
op("sign.zero", lambda nd, x: nd.sign(x), [C([-1.0, 0.0, 1.0])], op_name="sign", wrt=[0])
op("sqrt.zero", lambda nd, x: nd.sqrt(x), [C([0.0, 1.0, 4.0])], op_name="sqrt", wrt=[0])
op("log.zero", lambda nd, x: nd.log(x), [C([0.0, 1.0])], op_name="log", wrt=[0])
op("clip.bounds", lambda nd, x: nd.clip(x, -0.5, 1.0), [C([-0.5, 1.0, 0.2, 2.0, -3.0])],
   op_name="clip", wrt=[0])
op("maximum.ties", lambda nd, a, b: nd.maximum(a, b), [C([1.0, 2.0, 3.0]), C([1.0, 0.0, 3.0])],
   op_name="maximum", wrt=[0, 1])
op("minimum.ties", lambda nd, a, b: nd.minimum(a, b), [C([1.0, 2.0, 3.0]), C([1.0, 0.0, 3.0])],
   op_name="minimum", wrt=[0, 1])
op("maximum.scalar_tie", lambda nd, a: nd.maximum(a, 2.0), [C([1.0, 2.0, 3.0])],
   op_name="maximum", wrt=[0])
op("max.ties", lambda nd, x: nd.max(x, axis=1), [C(_TIES)], op_name="max", wrt=[0])
op("min.ties", lambda nd, x: nd.min(x, axis=0), [C(_TIES)], op_name="min", wrt=[0])
op("argmax.ties", lambda nd, x: nd.argmax(x, axis=1), [C(_TIES)], op_name="argmax", wrt=[0])
op("argmin.ties", lambda nd, x: nd.argmin(x, axis=1), [C(_TIES)], op_name="argmin", wrt=[0])
op("sort.ties", lambda nd, x: nd.sort(x, axis=1, is_ascend=False), [C(_TIES)], op_name="sort",
   wrt=[0])
op("argsort.ties", lambda nd, x: nd.argsort(x, axis=1), [C(_TIES)], op_name="argsort")
op("argsort.ties_desc", lambda nd, x: nd.argsort(x, axis=0, is_ascend=False), [C(_TIES)],
   op_name="argsort")
op("topk.ties_indices", lambda nd, x: nd.topk(x, axis=0, k=2), [C(_TIES)], op_name="topk")
op("topk.ties", lambda nd, x: nd.topk(x, axis=1, k=2, ret_typ="both"), [C(_TIES)],
   op_name="topk", wrt=[0])
op("Pooling.max_ties", lambda nd, x: nd.Pooling(x, kernel=(2,), stride=(1,)),
   [C([[[1.0, 1.0, 0.0, 2.0, 2.0]]])], op_name="Pooling", wrt=[0])
op("prod.zero", lambda nd, x: nd.prod(x, axis=1), [C([[1.0, 0.0, 3.0], [2.0, 0.0, 0.0]])],
   op_name="prod", wrt=[0])
op("norm.zero", lambda nd, x: nd.norm(x, axis=1), [C([[0.0, 0.0], [3.0, 4.0]])], op_name="norm",
   wrt=[0])
op("cast.truncates", lambda nd, x: nd.cast(x, dtype="int32"), [C([-1.7, -0.5, 0.5, 2.9])],
   op_name="cast")
op("cast.uint8", lambda nd, x: nd.cast(x, dtype="uint8"), [C([0.0, 1.9, 255.0, 7.5])],
   op_name="cast")
op("softmax.large", lambda nd, x: nd.softmax(x), [C([[1000.0, 0.0, -1000.0]])],
   op_name="softmax", wrt=[0])
# MXNet's float32 log-sum-exp leaves 1.4e-6 where the exact result is 0
op("log_softmax.large", lambda nd, x: nd.log_softmax(x), [C([[1000.0, 0.0, -1000.0]])],
   op_name="log_softmax", wrt=[0], tol={"float32": (1e-5, 2e-6)})
op("modulo.signs", lambda nd, a, b: nd.modulo(a, b), [C([-3.0, 3.0, -3.5, 4.0]),
                                                      C([2.0, -2.0, 2.0, 2.0])],
   op_name="modulo", wrt=[0, 1])
op("power.negative_base", lambda nd, a, b: nd.power(a, b), [C([-2.0, -1.5, 0.0]),
                                                            C([2.0, 3.0, 2.0])],
   op_name="power", wrt=[0])
op("sigmoid.large", lambda nd, x: nd.sigmoid(x), [C([-100.0, 0.0, 100.0])], op_name="sigmoid",
   wrt=[0])
op("softrelu.large", lambda nd, x: nd.softrelu(x), [C([-100.0, 0.0, 100.0])], op_name="softrelu",
   wrt=[0], mx_call=lambda nd, x: nd.Activation(x, act_type="softrelu"))

# ---- the cases of tests/nd_cases.py (float32, their own seeded inputs) ------------------------
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nd_cases  # noqa: E402

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_nd",
                       "mxnet_nd_names.txt")) as _f:
    MXNET_ND_NAMES = set(_f.read().split())


def _fixed(arrays):
    return [C(a, a.dtype) for a in arrays]


for _name, (_fn, _diff) in sorted(nd_cases.CASES.items()):
    _op = _name
    while _op and _op not in MXNET_ND_NAMES:
        _op = _op.rpartition("_")[0]
    op("case." + _name, _fn, _fixed(nd_cases.inputs(_name)), op_name=_op or "NDArray.tostype",
       wrt=_diff)

# ---- what this registry leaves out, and why ---------------------------------------------------
_CREATION = "makes an array from a shape or a value, not from arrays (tests/test_ndarray.py)"
_RANDOM = ("draws random numbers: the values follow this library's generator, not MXNet's "
           "(moments checked in tests/test_nd_names.py)")
EXCLUDED = {
    "array": _CREATION, "empty": _CREATION, "zeros": _CREATION, "ones": _CREATION,
    "full": _CREATION, "arange": _CREATION, "linspace": _CREATION, "eye": _CREATION,
    "from_numpy": "wraps a NumPy array (tests/test_nd_names.py)",
    "load": "reads a file (tests/test_mxnet_files.py)",
    "save": "writes a file (tests/test_mxnet_files.py)",
    "waitall": "waits for pending work; takes no array",
    "reset_arrays": "zeroes its arguments in place (tests/test_nd_names.py)",
    "RNN": "the fused recurrent op: checked against MXNet's golden data in tests/test_gluon_rnn.py",
    "BilinearSampler": "MXNet's bits forward and for both gradients, and finite differences, in "
                       "tests/test_rotate.py (its grids need positions away from cell edges)",
    "GridGenerator": "MXNet's bits (affine and warp) and finite differences in tests/test_rotate.py",
    "SpatialTransformer": "MXNet's bits and finite differences in tests/test_rotate.py",
    "Custom": "runs a registered Python operator: MXNet's calls and values in "
              "tests/test_custom_op.py",
    "histogram": "counts values into bins: MXNet's counts and edges in tests/test_histogram.py",
    "khatri_rao": "MXNet's values in tests/test_histogram.py (MXNet's has no gradient; here "
                  "the product's)",
    "ROIPooling": "MXNet's bits forward and for the gradient, every dtype, in tests/test_nd_roi.py "
                  "(its ROIs need corners that round away from ties)",
    "normal": _RANDOM, "uniform": _RANDOM, "shuffle": _RANDOM,
}
for _n in ("exponential", "gamma", "generalized_negative_binomial", "negative_binomial",
           "normal", "poisson", "randint", "uniform"):
    EXCLUDED["random_" + _n] = _RANDOM
for _n in ("gemm", "gemm2", "potrf", "potri", "trmm", "trsm", "sumlogdiag", "syrk", "gelqf",
           "inverse", "det", "slogdet", "extractdiag", "makediag", "extracttrian", "maketrian"):
    EXCLUDED["linalg_" + _n] = ("nd.linalg." + _n + ": MXNet's values and gradients in "
                                "tests/test_nd_linalg.py")
for _n in ("exponential", "gamma", "generalized_negative_binomial", "multinomial",
           "negative_binomial", "normal", "poisson", "uniform"):
    EXCLUDED["sample_" + _n] = _RANDOM


# ---- where we differ from MXNet on purpose ----------------------------------------------------
class Deviation:
    """``op`` differs from MXNet 1.9.1 in ``what``, because ``why``. ``samples`` are the registry
    samples it shows in (none where MXNet cannot run the case); ``ours_grad(inputs, heads)``
    (NumPy, one array per ``wrt`` input) is the gradient we give, which the test checks in place
    of MXNet's."""

    def __init__(self, op, what, why, samples=(), ours_grad=None):
        self.op, self.what, self.why = op, what, why
        self.samples, self.ours_grad = tuple(samples), ours_grad


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _selu_grad(inputs, heads):
    x = inputs[0].astype(np.float64)
    d = np.where(x > 0, _SELU_SCALE, _SELU_SCALE * _SELU_ALPHA * np.exp(x))
    return [(heads[0] * d).astype(inputs[0].dtype)]


DEVIATIONS = [
    Deviation("LeakyReLU(act_type='selu')",
              "for x < 0 the gradient is the derivative of the forward, "
              "y + scale*alpha (y the output); MXNet's is scale*(y + alpha), which differs from "
              "it by (scale-1)*y: up to 0.089 as x goes to minus infinity",
              "MXNet 1.9.1 applies the scale to the already scaled output a second time; "
              "training needs the gradient of the function computed",
              samples=["LeakyReLU.selu"], ours_grad=_selu_grad),
]


DEVIATIONS.append(Deviation(
    "elemwise_add / elemwise_sub / elemwise_mul / elemwise_div (and nd._internal's _plus, "
    "_minus, _mul, _div)", "operands of different shapes broadcast, as with broadcast_add and "
    "the others; MXNet 1.9.1 refuses them (its shapes must be equal)",
    "one element-wise rule for both names; code that runs on MXNet gives the same values here"))


def _sort_grad(inputs, heads):
    g = np.zeros_like(heads[0])
    np.put_along_axis(g, np.argsort(inputs[0], axis=-1, kind="stable"), heads[0], axis=-1)
    return [g]


DEVIATIONS.append(Deviation(
    "sort", "recorded with its default axis, sort gives its gradient; MXNet 1.9.1 raises "
    "(\"Invalid Parameter format for axis ... in operator _backward_topk\")",
    "MXNet's backward node loses the default axis; with an explicit axis both agree",
    samples=["sort"], ours_grad=_sort_grad))


def _batch_take_grad(inputs, heads):
    a, idx = inputs[0], np.clip(np.array([0, 3, 5]), 0, inputs[0].shape[1] - 1)
    g = np.zeros_like(a)
    g[np.arange(a.shape[0]), idx] = heads[0]
    return [g]


def _softmax_instance_grad(inputs, heads):
    x = inputs[0].astype(np.float64)
    y = np.exp(x - x.max(axis=-1, keepdims=True))
    y /= y.sum(axis=-1, keepdims=True)
    g = y * (heads[0] - (heads[0] * y).sum(axis=-1, keepdims=True))
    return [g.astype(inputs[0].dtype)]


def _norm_rows_grad(inputs, heads):
    x = inputs[0]
    n = np.sqrt((x.astype(np.float64) ** 2).sum(axis=1, keepdims=True))
    return [np.where(n > 0, heads[0][:, None] * x / np.where(n > 0, n, 1), 0).astype(x.dtype)]


DEVIATIONS += [
    Deviation("norm", "the gradient of the 2-norm at a zero vector is 0",
              "MXNet 1.9.1 gives NaN there (0/0), which poisons every weight it reaches; 0 is "
              "a subgradient", samples=["norm.zero"], ours_grad=_norm_rows_grad),
    Deviation("SoftmaxActivation(mode='instance')",
              "on more than two axes the gradient is that of its forward, a softmax over the "
              "last axis",
              "MXNet 1.9.1 sums over axis 1 there (the channel mode's rule), which is not the "
              "gradient of its own forward",
              samples=["SoftmaxActivation.instance3d"], ours_grad=_softmax_instance_grad),
    Deviation("batch_take", "differentiable: the gradient goes to the picked entries",
              "MXNet 1.9.1 has no gradient for it (backward raises); `pick` computes the same "
              "and is differentiable in both", samples=["batch_take.grad"],
              ours_grad=_batch_take_grad),
    Deviation("SequenceLast", "without `sequence_length` it records a gradient",
              "MXNet 1.9.1 crashes when recording it (not sampled here for that reason)"),
    Deviation("UpSampling", "`sample_type='bilinear'` raises `NotImplementedError`",
              "only nearest-neighbour upsampling is implemented"),
    Deviation("scatter_nd", "with a repeated index the last write wins",
              "MXNet 1.9.1 leaves it unspecified"),
    Deviation("broadcast_to", "also broadcasts to more axes than the input has (NumPy's rule)",
              "MXNet 1.9.1 requires as many axes as the target shape; everything MXNet accepts "
              "gives MXNet's result"),
    Deviation("reshape",
              "`nd.reshape(x, shape)` (and `nd.Reshape`) to a shape of another size than the "
              "input's (after `0`, `-1`, ... are resolved) raises `ShapeError`, as the method "
              "`x.reshape()` does in both",
              "MXNet 1.9.1 compiles its size check out and returns an array of the other size: "
              "the input's first elements when smaller, memory past the input's end when larger "
              "(garbage values, then heap corruption or a segmentation fault)"),
]


def deviation_of(sample_name):
    for dev in DEVIATIONS:
        if sample_name in dev.samples:
            return dev
    return None


# ---- Gluon layers ------------------------------------------------------------------------------
# name -> (gluon.nn class, keyword arguments, input shape, golden directory under tests/data).
# The cases of tests/data/mxnet_layers (made by its make_layer_cases.py, checked by
# tests/test_gluon_layers_mxnet.py) are listed by reading its cases.json; the ones below are made
# by tests/data/mxnet_ops/make_op_reference.py and checked by tests/test_op_registry.py.
LAYERS = {
    "dense": ("Dense", dict(units=4, in_units=6), (2, 6)),
    "dense_act_noflatten": ("Dense", dict(units=3, activation="tanh", flatten=False, in_units=4),
                            (2, 2, 4)),
    "dense_nobias": ("Dense", dict(units=2, use_bias=False, in_units=3), (3, 3)),
    "conv1d": ("Conv1D", dict(channels=3, kernel_size=3, strides=2, padding=1, in_channels=2),
               (2, 2, 7)),
    "conv2d": ("Conv2D", dict(channels=4, kernel_size=(3, 2), padding=(1, 0), dilation=(1, 2),
                              groups=2, in_channels=2, activation="relu"), (2, 2, 5, 6)),
    "conv3d": ("Conv3D", dict(channels=2, kernel_size=2, strides=(1, 2, 1), in_channels=2),
               (1, 2, 3, 4, 3)),
    "conv2d_transpose_nchw": ("Conv2DTranspose", dict(channels=3, kernel_size=3, strides=2,
                                                      padding=1, output_padding=1,
                                                      in_channels=2), (1, 2, 3, 3)),
    "maxpool1d": ("MaxPool1D", dict(pool_size=2), (2, 3, 6)),
    "maxpool2d": ("MaxPool2D", dict(pool_size=3, strides=2, padding=1), (2, 2, 5, 5)),
    "avgpool2d": ("AvgPool2D", dict(pool_size=2, ceil_mode=True), (1, 2, 5, 5)),
    "avgpool1d": ("AvgPool1D", dict(pool_size=3, strides=1, padding=1), (2, 2, 5)),
    "maxpool3d": ("MaxPool3D", dict(pool_size=2), (1, 2, 4, 4, 4)),
    "avgpool3d": ("AvgPool3D", dict(pool_size=2, strides=1), (1, 2, 3, 3, 3)),
    "globalavgpool1d": ("GlobalAvgPool1D", dict(), (2, 3, 5)),
    "globalmaxpool2d": ("GlobalMaxPool2D", dict(), (2, 3, 3, 4)),
    "globalavgpool3d": ("GlobalAvgPool3D", dict(), (1, 2, 2, 3, 2)),
    "batchnorm": ("BatchNorm", dict(in_channels=3), (4, 3, 2)),
    "batchnorm_axis_last": ("BatchNorm", dict(axis=-1, in_channels=3, center=False), (4, 2, 3)),
    "layernorm": ("LayerNorm", dict(in_channels=4), (2, 3, 4)),
    "instancenorm": ("InstanceNorm", dict(in_channels=2), (2, 2, 5)),
    "groupnorm": ("GroupNorm", dict(num_groups=2), (2, 4, 3)),
    "embedding": ("Embedding", dict(input_dim=6, output_dim=3), None),
    "dropout_eval": ("Dropout", dict(rate=0.5), (2, 5)),
    "activation_relu": ("Activation", dict(activation="relu"), (2, 5)),
    "activation_softrelu": ("Activation", dict(activation="softrelu"), (2, 5)),
    "leakyrelu": ("LeakyReLU", dict(alpha=0.2), (2, 5)),
    "prelu": ("PReLU", dict(), (2, 5)),
    "elu": ("ELU", dict(alpha=0.8), (2, 5)),
    "gelu": ("GELU", dict(), (2, 5)),
    "swish": ("Swish", dict(beta=1.5), (2, 5)),
    "flatten": ("Flatten", dict(), (2, 3, 2)),
}
# The Embedding layer's input: indices, not a uniform draw.
EMBEDDING_INDICES = np.array([[0, 5, 2], [2, 1, 3]], dtype=np.float32)
# Layers not compared with MXNet here, and why.
LAYERS_EXCLUDED = {
    "Block": "a base class", "HybridBlock": "a base class",
    "Sequential": "a container (tests/test_gluon_block.py)",
    "HybridSequential": "a container (tests/test_gluon_block.py)",
    "Lambda": "wraps a user function", "HybridLambda": "wraps a user function",
    "Identity": "returns its input",
    "SELU": "the op's sample LeakyReLU.selu (a listed deviation)",
    "BatchNormReLU": "compared with MXNet's in tests/test_nd_contrib.py (4-D inputs: MXNet's "
                     "fused operator runs through oneDNN only)",
    "SymbolBlock": "runs an exported graph (tests/test_hybrid_export.py)",
}


# ---- the reference file's layout ---------------------------------------------------------------
def pack(arrays):
    """{key: array} as one flat array per dtype plus an index {key: [dtype, offset, shape]}:
    thousands of tiny arrays as separate .npy members would cost more in headers than data."""
    flat, index = {}, {}
    for key in sorted(arrays):
        a = np.ascontiguousarray(arrays[key])
        parts = flat.setdefault(a.dtype.str, [])
        offset = sum(p.size for p in parts)
        parts.append(a.ravel())
        index[key] = [a.dtype.str, offset, list(a.shape)]
    return {dt: np.concatenate(parts) for dt, parts in flat.items()}, index


def unpack(flat, index):
    out = {}
    for key, (dt, offset, shape) in index.items():
        size = int(np.prod(shape, dtype=np.int64))
        out[key] = flat[dt][offset:offset + size].reshape(shape)
    return out


# ---- docs/compat.md's generated section --------------------------------------------------------
COMPAT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "compat.md")
START, END = "<!-- op-deviations:start -->", "<!-- op-deviations:end -->"


def render_deviations():
    lines = [START,
             "<!-- generated from DEVIATIONS in tests/op_registry.py by "
             "`python tests/op_registry.py --write-compat`; edit that list, not this table -->",
             "", "| Op | What differs | Why |", "| --- | --- | --- |"]
    for dev in DEVIATIONS:
        lines.append("| `%s` | %s | %s |" % (dev.op, dev.what, dev.why))
    lines.append(END)
    return "\n".join(lines)


def compat_with_deviations(text):
    """``text`` (compat.md) with the generated section replaced, or appended under its own
    heading when it has no markers yet."""
    if START in text:
        head, rest = text.split(START, 1)
        tail = rest.split(END, 1)[1]
        return head + render_deviations() + tail
    return (text.rstrip("\n") + "\n\n## Ops that differ from MXNet\n\n"
            "Every public `nd` op is compared with MXNet 1.9.1 (values and gradients; see "
            "docs/testing.md). Where the result differs on purpose:\n\n"
            + render_deviations() + "\n")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-compat"]:
        with open(COMPAT) as f:
            old = f.read()
        new = compat_with_deviations(old)
        if new != old:
            with open(COMPAT, "w") as f:
                f.write(new)
        print("docs/compat.md: %s" % ("updated" if new != old else "up to date"))
    else:
        sys.exit("usage: python tests/op_registry.py --write-compat")
