"""How to call every public ``nd`` name on a sparse input, shared by the MXNet generator
(``tests/data/sparse/gen_sparse_sweep.py``) and the sweep test (``tests/test_sparse_dispatch.py``).

``CASES[name] = (shape, call)``: ``call(nd, x, dense)`` runs the operator with ``x`` (a row_sparse
or csr array of ``shape``, or its dense twin) where an array goes; ``dense(shape)`` makes a fixed
dense operand. A name not listed is called as ``f(x)`` on a (4, 5) array. csr arrays are 2-D, so a
name whose shape is not 2-D runs with row_sparse only.

``EXCLUDED``: the public names that take no array to store sparsely, each with the reason.
"""
import numpy as np

SHAPE = (4, 5)

EXCLUDED = {
    "NDArray": "the array class itself, not an operator",
    "sparse": "the nd.sparse module (its functions have their own tests)",
    "contrib": "the nd.contrib module (its operators take sparse inputs densified: "
               "tests/test_nd_contrib.py)",
    "random": "the nd.random module: samplers take shapes and scalars",
    "Custom": "runs a registered Python operator, whose prop decides the storage "
              "(tests/test_custom_op.py)",
    "image": "the nd.image module (its operators take sparse inputs densified: "
             "tests/test_nd_image.py)",
    "linalg": "the nd.linalg module (its operators take sparse inputs densified: "
              "tests/test_nd_linalg.py)",
    "arange": "makes an array from scalars", "empty": "makes an array from a shape",
    "eye": "makes an array from a shape", "full": "makes an array from a shape",
    "linspace": "makes an array from scalars", "ones": "makes an array from a shape",
    "zeros": "makes an array from a shape", "from_numpy": "takes a NumPy array",
    "load": "reads a file (sparse records: test_sparse_files.py)",
    "save": "writes a file (sparse records: test_sparse_files.py)",
    "waitall": "takes no argument",
    "normal": "sampler: takes scalars and a shape", "uniform": "sampler: takes scalars and a shape",
    "random_uniform": "sampler: takes scalars and a shape",
    "random_normal": "sampler: takes scalars and a shape",
    "random_exponential": "sampler: takes scalars and a shape",
    "random_gamma": "sampler: takes scalars and a shape",
    "random_poisson": "sampler: takes scalars and a shape",
    "random_randint": "sampler: takes scalars and a shape",
    "random_negative_binomial": "sampler: takes scalars and a shape",
    "random_generalized_negative_binomial": "sampler: takes scalars and a shape",
    "shuffle": "random permutation: no value to compare",
    "sample_uniform": "random: no value to compare", "sample_normal": "random: no value to compare",
    "sample_exponential": "random: no value to compare", "sample_gamma": "random: no value to compare",
    "sample_poisson": "random: no value to compare",
    "sample_negative_binomial": "random: no value to compare",
    "sample_generalized_negative_binomial": "random: no value to compare",
    "sample_multinomial": "random: no value to compare",
    "Dropout": "random in training; identity otherwise (covered by identity)",
    "onehot_encode": "writes into a preallocated dense out (one_hot covers the operator)",
    "reset_arrays": "writes zeros in place: covered by the in-place tests",
    "CTCLoss": "takes a (T, N, C) activation and labels: a 3-D dense sequence op",
    "ctc_loss": "takes a (T, N, C) activation and labels: a 3-D dense sequence op",
}
# nd.linalg's operators under their top-level names: as in MXNet, every sparse input falls back
# to the dense operator (tests/test_nd_linalg.py checks each on csr and row_sparse inputs; its
# matrices must be positive definite, triangular or square, which the sweep's inputs are not).
for _n in ("gemm", "gemm2", "potrf", "potri", "trmm", "trsm", "sumlogdiag", "syrk", "gelqf",
           "inverse", "det", "slogdet", "extractdiag", "makediag", "extracttrian", "maketrian"):
    EXCLUDED["linalg_" + _n] = "nd.linalg." + _n + " (dense fallback: tests/test_nd_linalg.py)"


def values(shape):
    """Fixed values with whole zero rows and scattered zeros, in (0.1, 2]."""
    n = int(np.prod(shape))
    out = (np.arange(n, dtype=np.float32) % 19 + 1) / 10
    out = out.reshape(shape)
    out[1] = 0
    flat = out.reshape(-1)
    flat[3::7] = 0
    return out


def _dense(nd):
    def make(shape, low=0.5):
        n = int(np.prod(shape))
        return nd.array((np.arange(n, dtype=np.float32) % 7 + low * 10) / 10).reshape(shape)
    return make


S = SHAPE
CASES = {
    # shapes other than (4, 5)
    "BatchNorm": ((2, 3, 2, 2), lambda nd, x, d: nd.BatchNorm(x, d((3,)), d((3,)), d((3,)), d((3,)))),
    "Convolution": ((2, 3, 4, 4), lambda nd, x, d: nd.Convolution(x, d((2, 3, 3, 3)), d((2,)), kernel=(3, 3), num_filter=2)),
    "BilinearSampler": ((2, 3, 4, 5), lambda nd, x, d: nd.BilinearSampler(
        x, nd.array(np.linspace(-1.2, 1.2, 36).reshape(2, 2, 3, 3).astype(np.float32)))),
    "GridGenerator": ((2, 2, 4, 5), lambda nd, x, d: nd.GridGenerator(x, transform_type="warp")),
    "SpatialTransformer": ((2, 3, 4, 5), lambda nd, x, d: nd.SpatialTransformer(
        x, nd.array([[0.9, 0.1, 0.0, -0.2, 1.1, 0.1]] * 2), target_shape=(3, 4),
        transform_type="affine", sampler_type="bilinear")),
    "LRN": ((2, 3, 4, 5), lambda nd, x, d: nd.LRN(x, nsize=3)),
    "histogram": ((4, 5), lambda nd, x, d: nd.histogram(x, bins=3, range=(0.0, 1.5))),
    "khatri_rao": ((4, 5), lambda nd, x, d: nd.khatri_rao(x, d((3, 5)))),
    "im2col": ((2, 3, 4, 5), lambda nd, x, d: nd.im2col(x, kernel=(2, 2))),
    "col2im": ((2, 12, 12), lambda nd, x, d: nd.col2im(x, output_size=(4, 5), kernel=(2, 2))),
    "ROIPooling": ((2, 3, 4, 5), lambda nd, x, d: nd.ROIPooling(
        x, nd.array([[0, 0, 0, 3, 2], [1, 1, 1, 4, 3]]), pooled_size=(2, 2), spatial_scale=1.0)),
    "Deconvolution": ((2, 3, 4, 4), lambda nd, x, d: nd.Deconvolution(x, d((3, 2, 3, 3)), d((2,)), kernel=(3, 3), num_filter=2)),
    "Pooling": ((2, 3, 4, 4), lambda nd, x, d: nd.Pooling(x, kernel=(2, 2), stride=(2, 2))),
    "UpSampling": ((2, 3, 2, 2), lambda nd, x, d: nd.UpSampling(x, scale=2, sample_type="nearest")),
    "GroupNorm": ((2, 4, 3), lambda nd, x, d: nd.GroupNorm(x, d((2,)), d((2,)), num_groups=2)),
    "InstanceNorm": ((2, 3, 4), lambda nd, x, d: nd.InstanceNorm(x, d((3,)), d((3,)))),
    "Pad": ((2, 3, 4, 4), lambda nd, x, d: nd.Pad(x, mode="constant", pad_width=(0, 0, 0, 0, 1, 1, 1, 1))),
    "pad": ((2, 3, 4, 4), lambda nd, x, d: nd.pad(x, mode="constant", pad_width=(0, 0, 0, 0, 1, 1, 1, 1))),
    "depth_to_space": ((2, 4, 2, 2), lambda nd, x, d: nd.depth_to_space(x, 2)),
    "space_to_depth": ((2, 1, 4, 4), lambda nd, x, d: nd.space_to_depth(x, 2)),
    "batch_dot": ((2, 4, 5), lambda nd, x, d: nd.batch_dot(x, d((2, 5, 3)))),
    "SequenceLast": ((4, 5, 2), lambda nd, x, d: nd.SequenceLast(x)),
    "SequenceMask": ((4, 5, 2), lambda nd, x, d: nd.SequenceMask(x, d((5,), 1.5), use_sequence_length=True)),
    "SequenceReverse": ((4, 5, 2), lambda nd, x, d: nd.SequenceReverse(x)),
    "SoftmaxActivation": (S, lambda nd, x, d: nd.SoftmaxActivation(x)),
    "RNN": ((4, 5, 3), lambda nd, x, d: nd.RNN(x, d((14,)), d((1, 5, 2)), state_size=2,
                                               num_layers=1, mode="rnn_tanh")),
    # arguments besides the array
    "Activation": (S, lambda nd, x, d: nd.Activation(x, act_type="relu")),
    "Cast": (S, lambda nd, x, d: nd.Cast(x, dtype="float64")),
    "cast": (S, lambda nd, x, d: nd.cast(x, dtype="float64")),
    "Concat": (S, lambda nd, x, d: nd.Concat(x, x, dim=1)),
    "concat": (S, lambda nd, x, d: nd.concat(x, x, dim=1)),
    "concatenate": (S, lambda nd, x, d: nd.concatenate([x, x], axis=0)),
    "stack": (S, lambda nd, x, d: nd.stack(x, x)),
    "ElementWiseSum": (S, lambda nd, x, d: nd.ElementWiseSum(x, x)),
    "add_n": (S, lambda nd, x, d: nd.add_n(x, x)),
    "Embedding": (S, lambda nd, x, d: nd.Embedding(nd.array([0, 1, 3]), x, input_dim=4, output_dim=5)),
    "FullyConnected": (S, lambda nd, x, d: nd.FullyConnected(x, d((3, 5)), d((3,)), num_hidden=3)),
    "LayerNorm": (S, lambda nd, x, d: nd.LayerNorm(x, d((5,)), d((5,)))),
    "LeakyReLU": (S, lambda nd, x, d: nd.LeakyReLU(x, slope=0.1)),
    "Reshape": (S, lambda nd, x, d: nd.Reshape(x, shape=(5, 4))),
    "reshape": (S, lambda nd, x, d: nd.reshape(x, shape=(5, 4))),
    "SliceChannel": (S, lambda nd, x, d: nd.SliceChannel(x, num_outputs=5, axis=1)),
    "split": (S, lambda nd, x, d: nd.split(x, num_outputs=5, axis=1)),
    "split_v2": (S, lambda nd, x, d: nd.split_v2(x, 5, axis=1)),
    "SwapAxis": (S, lambda nd, x, d: nd.SwapAxis(x, dim1=0, dim2=1)),
    "swapaxes": (S, lambda nd, x, d: nd.swapaxes(x, 0, 1)),
    "argmax": (S, lambda nd, x, d: nd.argmax(x, axis=1)),
    "argmin": (S, lambda nd, x, d: nd.argmin(x, axis=1)),
    "argsort": (S, lambda nd, x, d: nd.argsort(x, axis=1)),
    "sort": (S, lambda nd, x, d: nd.sort(x, axis=1)),
    "topk": (S, lambda nd, x, d: nd.topk(x, axis=1, k=2)),
    "batch_take": (S, lambda nd, x, d: nd.batch_take(x, nd.array([0, 1, 2, 4], dtype="int32"))),
    "choose_element_0index": (S, lambda nd, x, d: nd.choose_element_0index(x, nd.array([0, 1, 2, 4]))),
    "fill_element_0index": (S, lambda nd, x, d: nd.fill_element_0index(x, d((4,)), nd.array([0, 1, 2, 4]))),
    "pick": (S, lambda nd, x, d: nd.pick(x, nd.array([0, 1, 2, 4]), axis=1)),
    "take": (S, lambda nd, x, d: nd.take(x, nd.array([0, 3]))),
    "gather_nd": (S, lambda nd, x, d: nd.gather_nd(x, nd.array([[0, 2], [1, 3]]))),
    "scatter_nd": (S, lambda nd, x, d: nd.scatter_nd(nd.array([1.0, 2.0]), nd.array([[0, 2], [1, 3]]), shape=(4, 5))),
    "one_hot": (S, lambda nd, x, d: nd.one_hot(x, 3)),
    "broadcast_axes": ((4, 1), lambda nd, x, d: nd.broadcast_axes(x, axis=1, size=3)),
    "broadcast_axis": ((4, 1), lambda nd, x, d: nd.broadcast_axis(x, axis=1, size=3)),
    "broadcast_to": ((4, 1), lambda nd, x, d: nd.broadcast_to(x, shape=(4, 3))),
    "broadcast_like": ((4, 1), lambda nd, x, d: nd.broadcast_like(x, d((4, 3)))),
    "clip": (S, lambda nd, x, d: nd.clip(x, 0.0, 1.0)),
    "crop": (S, lambda nd, x, d: nd.crop(x, begin=(0, 1), end=(3, 4))),
    "slice": (S, lambda nd, x, d: nd.slice(x, begin=(0, 1), end=(3, 4))),
    "slice_axis": (S, lambda nd, x, d: nd.slice_axis(x, axis=0, begin=1, end=3)),
    "slice_like": (S, lambda nd, x, d: nd.slice_like(x, d((2, 3)))),
    "cumsum": (S, lambda nd, x, d: nd.cumsum(x, axis=1)),
    "diag": (S, lambda nd, x, d: nd.diag(x)),
    "dot": (S, lambda nd, x, d: nd.dot(x, d((5, 3)))),
    "expand_dims": (S, lambda nd, x, d: nd.expand_dims(x, axis=1)),
    "flip": (S, lambda nd, x, d: nd.flip(x, axis=1)),
    "reverse": (S, lambda nd, x, d: nd.reverse(x, axis=1)),
    "full_like": (S, lambda nd, x, d: nd.full_like(x, 3.0)),
    "moveaxis": (S, lambda nd, x, d: nd.moveaxis(x, 0, 1)),
    "repeat": (S, lambda nd, x, d: nd.repeat(x, repeats=2, axis=0)),
    "tile": (S, lambda nd, x, d: nd.tile(x, reps=(2, 1))),
    "reshape_like": (S, lambda nd, x, d: nd.reshape_like(x, d((5, 4)))),
    "where": (S, lambda nd, x, d: nd.where(x, d(S), d(S, 2.0))),
    "multi_all_finite": (S, lambda nd, x, d: nd.multi_all_finite(x, x, num_arrays=2)),
    "multi_sum_sq": (S, lambda nd, x, d: nd.multi_sum_sq(x, x, num_arrays=2)),
    "ravel_multi_index": ((2, 5), lambda nd, x, d: nd.ravel_multi_index(x * 10, shape=(30, 30))),
    "unravel_index": (S, lambda nd, x, d: nd.unravel_index(x * 10, shape=(30, 30))),
    "moments": (S, lambda nd, x, d: nd.moments(x, axes=(0,))),
    "smooth_l1": (S, lambda nd, x, d: nd.smooth_l1(x, scalar=1.0)),
    "softmax_cross_entropy": (S, lambda nd, x, d: nd.softmax_cross_entropy(x, nd.array([0, 1, 2, 4]))),
    "L2Normalization": (S, lambda nd, x, d: nd.L2Normalization(x)),
    "MakeLoss": (S, lambda nd, x, d: nd.MakeLoss(x)),
    "make_loss": (S, lambda nd, x, d: nd.make_loss(x)),
    "hard_sigmoid": (S, lambda nd, x, d: nd.hard_sigmoid(x)),
    "cast_storage": (S, lambda nd, x, d: nd.cast_storage(x, "default")),
    "array": (S, lambda nd, x, d: nd.array(x)),
    "all_finite": (S, lambda nd, x, d: nd.all_finite(x)),
}

# Two-operand elementwise names: sparse with sparse, with a dense twin, and with a scalar
# where the name takes one.
BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "modulo",
          "equal", "not_equal", "greater", "greater_equal", "lesser", "lesser_equal",
          "logical_and", "logical_or", "logical_xor", "true_divide",
          "elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div",
          "broadcast_add", "broadcast_sub", "broadcast_mul", "broadcast_div", "broadcast_plus",
          "broadcast_minus", "broadcast_mod", "broadcast_power", "broadcast_maximum",
          "broadcast_minimum", "broadcast_equal", "broadcast_not_equal", "broadcast_greater",
          "broadcast_greater_equal", "broadcast_lesser", "broadcast_lesser_equal",
          "broadcast_hypot", "broadcast_logical_and", "broadcast_logical_or",
          "broadcast_logical_xor"]
for _name in BINARY:
    CASES[_name] = (S, (lambda n: lambda nd, x, d: getattr(nd, n)(x, x))(_name))
    CASES[_name + "|dense"] = (S, (lambda n: lambda nd, x, d: getattr(nd, n)(x, d(S)))(_name))
    CASES[_name + "|dense_first"] = (S, (lambda n: lambda nd, x, d: getattr(nd, n)(d(S), x))(_name))
CASES["broadcast_add|column"] = (S, lambda nd, x, d: nd.broadcast_add(x, d((4, 1))))
CASES["broadcast_mul|column"] = (S, lambda nd, x, d: nd.broadcast_mul(x, d((4, 1))))
CASES["broadcast_div|row"] = (S, lambda nd, x, d: nd.broadcast_div(x, d((1, 5))))
CASES["dot|transpose_a"] = (S, lambda nd, x, d: nd.dot(x, d((4, 3)), transpose_a=True))
CASES["dot|dense_first"] = (S, lambda nd, x, d: nd.dot(d((3, 4)), x))
CASES["clip|shifted"] = (S, lambda nd, x, d: nd.clip(x, 0.5, 1.0))

# Python operators and NDArray methods on the sparse array itself.
OPERATORS = {
    "x+1": lambda x, d: x + 1, "1+x": lambda x, d: 1 + x, "x-1": lambda x, d: x - 1,
    "1-x": lambda x, d: 1 - x, "x*2": lambda x, d: x * 2, "2*x": lambda x, d: 2 * x,
    "x/2": lambda x, d: x / 2, "1/x": lambda x, d: 1 / x, "x**2": lambda x, d: x ** 2,
    "2**x": lambda x, d: 2 ** x, "x%2": lambda x, d: x % 2, "-x": lambda x, d: -x,
    "abs(x)": lambda x, d: abs(x),
    "x>1": lambda x, d: x > 1, "x>=1": lambda x, d: x >= 1, "x<1": lambda x, d: x < 1,
    "x<=1": lambda x, d: x <= 1, "x==0": lambda x, d: x == 0, "x!=0": lambda x, d: x != 0,
    "x==1": lambda x, d: x == 1, "x>-1": lambda x, d: x > -1,
    "x+x": lambda x, d: x + x, "x-x": lambda x, d: x - x, "x*x": lambda x, d: x * x,
    "x/x": lambda x, d: x / x, "x+d": lambda x, d: x + d, "d+x": lambda x, d: d + x,
    "x*d": lambda x, d: x * d, "d*x": lambda x, d: d * x, "x-d": lambda x, d: x - d,
    "x/d": lambda x, d: x / d, "x>d": lambda x, d: x > d, "x.T": lambda x, d: x.T,
    "x.copy()": lambda x, d: x.copy(), "x.astype(f64)": lambda x, d: x.astype("float64"),
    "x.detach()": lambda x, d: x.detach(),
}
METHODS = ["exp", "log", "sqrt", "square", "abs", "sign", "relu", "sigmoid", "tanh", "sin",
           "cos", "floor", "ceil", "round", "rint", "fix", "trunc", "log1p", "expm1", "sum",
           "mean", "max", "min", "norm", "argmax", "transpose", "flatten", "softmax",
           "log_softmax", "zeros_like", "ones_like", "reciprocal", "rsqrt", "arcsin", "arctan",
           "sinh", "arcsinh", "arctanh", "degrees", "radians", "cbrt", "prod", "tan"]
for _name in METHODS:
    OPERATORS["x.%s()" % _name] = (lambda n: lambda x, d: getattr(x, n)())(_name)
OPERATORS["x.clip(0,1)"] = lambda x, d: x.clip(0.0, 1.0)
for _name in ("arccos", "arccosh", "argmin", "argsort", "cosh", "log10", "log2", "rcbrt",
              "softmin", "sort", "squeeze", "topk", "broadcast_axes", "broadcast_axis"):
    OPERATORS["x.%s()" % _name] = (lambda n: lambda x, d: getattr(x, n)())(_name)
# The methods that take arguments (every NDArray method is here: test_sparse_dispatch.py).
OPERATORS.update({
    "x.slice_axis(0,1,3)": lambda x, d: x.slice_axis(axis=0, begin=1, end=3),
    "x.slice_axis(1,1,3)": lambda x, d: x.slice_axis(1, 1, 3),
    "x.split(5,1)": lambda x, d: x.split(num_outputs=5, axis=1),
    "x.slice((1,1),(3,4))": lambda x, d: x.slice(begin=(1, 1), end=(3, 4)),
    "x.expand_dims(0)": lambda x, d: x.expand_dims(axis=0),
    "x.swapaxes(0,1)": lambda x, d: x.swapaxes(0, 1),
    "x.flip(0)": lambda x, d: x.flip(axis=0),
    "x.broadcast_to((4,5))": lambda x, d: x.broadcast_to((4, 5)),
    "x.broadcast_like(d)": lambda x, d: x.broadcast_like(d),
    "x.reshape_like(d)": lambda x, d: x.reshape_like(d),
    "x.tile((2,1))": lambda x, d: x.tile(reps=(2, 1)),
    "x.repeat(2)": lambda x, d: x.repeat(repeats=2, axis=0),
    "x.pick(d[:,0]*0)": lambda x, d: x.pick(d[:, 0] * 0, axis=1),
    "x.take(d[0]*0)": lambda x, d: x.take(d[0] * 0),
    "x.one_hot(3)": lambda x, d: x.one_hot(3),
    "x.dot(d.T)": lambda x, d: x.dot(d.T),
})
OPERATORS["x.reshape(5,4)"] = lambda x, d: x.reshape((5, 4))
OPERATORS["x[1:3]"] = lambda x, d: x[1:3]
OPERATORS["x[:]"] = lambda x, d: x[:]


def case(name):
    """``(shape, call)`` for a swept name (``f(x)`` on a (4, 5) array when not listed)."""
    if name in CASES:
        return CASES[name]
    return SHAPE, lambda nd, x, d: getattr(nd, name)(x)


def make_inputs(nd, shape):
    """``{stype: array}`` for the dense twin and each sparse storage that fits ``shape``."""
    dense = nd.array(values(shape))
    out = {"default": dense, "row_sparse": dense.tostype("row_sparse")}
    if len(shape) == 2:
        out["csr"] = dense.tostype("csr")
    return out


def run(nd, call, x):
    """``[(stype, numpy values)]`` of a call's outputs, or ``("error", message)``."""
    try:
        res = call(nd, x, _dense(nd))
        outs = list(res) if isinstance(res, (list, tuple)) else [res]
        return [(getattr(o, "stype", "default"), o.asnumpy()) for o in outs]
    except Exception as exc:  # noqa: BLE001 - any failure is the recorded outcome
        return ("error", "%s: %s" % (type(exc).__name__, str(exc).split("\n")[0][:200]))


def run_operator(nd, fn, x):
    d = nd.array(values(SHAPE)[::-1].copy() + 0.5)
    try:
        res = fn(x, d)
        outs = list(res) if isinstance(res, (list, tuple)) else [res]
        return [(getattr(o, "stype", "default"), o.asnumpy()) for o in outs]
    except Exception as exc:  # noqa: BLE001
        return ("error", "%s: %s" % (type(exc).__name__, str(exc).split("\n")[0][:200]))
