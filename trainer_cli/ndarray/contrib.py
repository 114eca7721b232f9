"""``nd.contrib``: MXNet 1.9.1's contributed operators that Gluon code commonly calls: the
imperative control flow (``foreach``, ``while_loop``, ``cond``), ``arange_like``,
``boolean_mask``, ``index_copy``, ``index_array``, ``allclose``, ``div_sqrt_dim``,
``quadratic``, the straight-through ``round_ste``/``sign_ste``, ``gradientmultiplier``,
``getnnz``, ``isinf``/``isnan``/``isfinite``, ``AdaptiveAvgPooling2D``, the interleaved
attention products of fused multi-head attention (``interleaved_matmul_selfatt_qk``/``_valatt``,
``..._encdec_qk``/``_valatt``), ``rand_zipfian``, ``BatchNormWithReLU``, and
``CTCLoss``/``ctc_loss``/``SparseEmbedding`` under their contrib names; beside them, from their
own modules, the detection operators (``boxes``, ``multibox``, ``roi``), ``BilinearResize2D``
(``resize``), the deformable convolutions (``deformable``), the AdamW update operators
(``adamw``) and ``SyncBatchNorm`` on one device (``sync_batch_norm``). Values and gradients are
MXNet's. Any other MXNet ``nd.contrib`` name raises ``NotInTrainerCLIError`` saying so
(docs/compat.md lists what exists).
"""
from __future__ import annotations

import math

import numpy

from ..base import NotInTrainerCLIError, absent_message
from ..context import current_context
from . import _libm
from . import ops as _ops
from .creation import zeros
from .ctc import CTCLoss, ctc_loss
from .more_ops import logical_and
from .ndarray import NDArray, _result, _wrap, _xp_of
from .nn import Embedding, batch_norm
from .random import uniform
from . import adamw as _adamw, boxes as _boxes, deformable as _deformable
from . import multibox as _multibox, resize as _resize, roi as _roi
from . import sync_batch_norm as _sync_batch_norm
from .adamw import *  # noqa: F401,F403
from .boxes import *  # noqa: F401,F403
from .deformable import *  # noqa: F401,F403
from .multibox import *  # noqa: F401,F403
from .resize import *  # noqa: F401,F403
from .roi import *  # noqa: F401,F403
from .sync_batch_norm import *  # noqa: F401,F403

__all__ = ["foreach", "while_loop", "cond", "arange_like", "boolean_mask", "index_copy",
           "index_array", "allclose", "div_sqrt_dim", "quadratic", "round_ste", "sign_ste",
           "gradientmultiplier", "getnnz", "isinf", "isnan", "isfinite", "AdaptiveAvgPooling2D",
           "interleaved_matmul_selfatt_qk", "interleaved_matmul_selfatt_valatt",
           "interleaved_matmul_encdec_qk", "interleaved_matmul_encdec_valatt", "CTCLoss",
           "ctc_loss", "SparseEmbedding", "rand_zipfian", "BatchNormWithReLU"] + [
               name for module in (_adamw, _boxes, _deformable, _multibox, _resize, _roi,
                                   _sync_batch_norm)
               for name in module.__all__ if name != "ROIPooling"]


# ----------------------------------------------------------------------------- control flow
def _flatten(args, what):
    """A (nested) list of NDArrays as a flat list and the format to regroup it."""
    if isinstance(args, NDArray):
        return [args], 0
    if not isinstance(args, (list, tuple)):
        raise TypeError("%s must be an NDArray or a (nested) list of NDArrays, got %s"
                        % (what, type(args).__name__))
    flat, formats = [], []
    for item in args:
        part, fmt = _flatten(item, what)
        flat.extend(part)
        formats.append(fmt)
    return flat, formats


def _regroup(args, fmt):
    if isinstance(fmt, int):
        return (args[0], args[1:]) if fmt == 0 else (args[:fmt], args[fmt:])
    grouped = []
    for part in fmt:
        item, args = _regroup(args, part)
        grouped.append(item)
    return grouped, args


def foreach(body, data, init_states):
    """``body(data[i], states) -> (outputs, states)`` for each ``i`` along axis 0 of ``data``
    (an NDArray or a list of them, sliced together); returns ``(outputs stacked along a new
    axis 0, the last states)``, the outputs in the nesting ``body`` returned them."""
    _flatten(data, "foreach's data")
    _flatten(init_states, "foreach's init_states")
    single = isinstance(data, NDArray)
    steps = data.shape[0] if single else data[0].shape[0]
    states, outputs, fmt = init_states, [], 0
    for i in range(steps):
        step_data = data[i] if single else [d[i] for d in data]
        outs, states = body(step_data, states)
        flat, fmt = _flatten(outs, "foreach's output")
        outputs.append(flat)
    stacked = [_ops.stack(*column) for column in zip(*outputs)]
    return _regroup(stacked, fmt)[0] if stacked else [], states


def _python(value, kind, what):
    if isinstance(value, NDArray):
        value = value.asscalar()
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ValueError("Cannot convert %s to python %s" % (what, kind.__name__)) from None


def while_loop(cond, func, loop_vars, max_iterations=None):
    """While ``cond(*loop_vars)`` holds, for at most ``max_iterations`` steps:
    ``func(*loop_vars) -> (step outputs, new loop_vars)``. Returns ``(each step output stacked
    along a new axis 0 and padded with zeros to max_iterations rows, the last loop_vars)``."""
    if max_iterations is None:
        raise ValueError("max_iterations should be specified")
    max_iterations = _python(max_iterations, int, "max_iteration")
    single = isinstance(loop_vars, NDArray)
    loop_vars = [loop_vars] if single else list(loop_vars)
    if not loop_vars:
        raise ValueError("loop_vars should contain at least one element")
    outputs, fmt, steps = [], None, 0
    while steps < max_iterations and _python(cond(*loop_vars), bool, "Return value of cond"):
        step_output, new_vars = func(*loop_vars)
        step_output = [] if step_output is None else step_output
        new_vars = [] if new_vars is None else new_vars
        new_vars = [new_vars] if isinstance(new_vars, NDArray) else list(new_vars)
        if len(new_vars) != len(loop_vars):
            raise ValueError("The length of loop_vars should be consistent during the loop")
        loop_vars = new_vars
        flat, fmt = _flatten(list(step_output) if isinstance(step_output, tuple)
                             else step_output, "while_loop's output")
        if outputs and len(flat) != len(outputs[0]):
            raise ValueError("Number of elements in step_output should be the same in each step")
        outputs.append(flat)
        steps += 1
    stacked = []
    for k, items in enumerate(zip(*outputs), 1):
        rows = [x.expand_dims(0) for x in items]
        if steps != max_iterations:
            # MXNet pads with uninitialised memory; zeros here.
            rows.append(zeros((max_iterations - steps,) + tuple(items[0].shape),
                              ctx=items[0].context, dtype=items[0].dtype))
        try:
            stacked.append(_ops.concat(*rows, dim=0))
        except ValueError:
            raise ValueError("\n".join(
                ["Shapes of %d-th elements in step_outputs are inconsistent, which are:" % k]
                + ["  Step %d, shape is %s" % (i, x.shape) for i, x in enumerate(items)])) \
                from None
    if fmt is not None:
        stacked = _regroup(stacked, fmt)[0]
    return stacked, loop_vars[0] if single else loop_vars


def cond(pred, then_func, else_func):
    """``then_func()`` if ``pred`` (a number or a one-element NDArray) holds, else
    ``else_func()``."""
    return then_func() if _python(pred, bool, "pred") else else_func()


# ----------------------------------------------------------------------------- operators
def arange_like(data, start=0.0, step=1.0, repeat=1, ctx=None, axis=None):
    """``start, start + step, ...`` shaped as ``data`` (or as its axis ``axis``, 1-D), each
    value ``repeat`` times, in ``data``'s dtype; no gradient reaches ``data``."""
    d = data._data
    xp = _xp_of(d)
    count = d.size if axis is None else d.shape[axis]
    positions = xp.arange(count, dtype=numpy.float64) // int(repeat)
    values = (start + step * positions).astype(d.dtype)
    shape = d.shape if axis is None else (count,)
    return _wrap(values.reshape(shape), data._ctx if ctx is None else ctx)


def boolean_mask(data, index, axis=0):
    """The rows (axis 0) of ``data`` whose entry in ``index`` is non-zero; the gradient goes
    back to those rows."""
    if int(axis) != 0:
        raise ValueError("boolean_mask: only axis=0 (MXNet 1.9.1 has no other)")
    if index.ndim != 1 or index.shape[0] != data.shape[0]:
        raise ValueError("boolean_mask: index must be 1-D with one entry per row of data "
                         "(%d), got shape %s" % (data.shape[0], index.shape))
    rows = numpy.flatnonzero(index.asnumpy())
    return _ops.take(data, _wrap(data._xp.asarray(rows), data._ctx), axis=0)


def index_copy(old_tensor, index_vector, new_tensor):
    """A copy of ``old_tensor`` whose rows ``index_vector`` are ``new_tensor``'s rows; the
    gradient goes to ``old_tensor`` outside those rows and to ``new_tensor`` from them."""
    old, new = old_tensor._data, new_tensor._data
    xp = _xp_of(old)
    rows = index_vector._data.astype(numpy.int64)
    if rows.ndim != 1 or new.shape != (rows.shape[0],) + old.shape[1:]:
        raise ValueError("index_copy: new_tensor must be (len(index_vector),) + "
                         "old_tensor.shape[1:] = %s, got %s"
                         % ((rows.shape[0],) + old.shape[1:], new.shape))
    out = old.copy()
    out[rows] = new

    def vjp(g, needs):
        grad_old = None
        if needs[0]:
            grad_old = g.copy()
            grad_old[rows] = 0
        return grad_old, None, (g[rows] if needs[2] else None)
    return _result(out, old_tensor._ctx, (old_tensor, index_vector, new_tensor), vjp)


def index_array(data, axes=None):
    """Each element's coordinates (int64, ``data.shape + (len(axes),)``), along ``axes``
    (default: all axes, in order)."""
    shape = data.shape
    axes = tuple(range(len(shape))) if axes is None else tuple(int(a) % len(shape) for a in axes)
    grids = numpy.indices(shape, dtype=numpy.int64)
    coords = numpy.stack([grids[a] for a in axes], axis=-1)
    return _wrap(data._xp.asarray(coords), data._ctx)


def allclose(a, b, rtol=1e-5, atol=1e-8, equal_nan=True):
    """1 (uint8) when ``|a - b| <= atol + rtol * |b|`` everywhere (NaNs equal with
    ``equal_nan``), else 0."""
    close = numpy.isclose(a.asnumpy(), b.asnumpy(), rtol=rtol, atol=atol,
                          equal_nan=bool(equal_nan)).all()
    return _wrap(a._xp.asarray(numpy.uint8(close)), a._ctx)


def div_sqrt_dim(data):
    """``data`` divided by the square root of its last axis's length (attention scores)."""
    return data / float(numpy.sqrt(numpy.float64(data.shape[-1])))


def quadratic(data, a=0.0, b=0.0, c=0.0):
    """``a * data**2 + b * data + c`` element-wise, as MXNet's kernel rounds it (``(a * x + b)
    * x + c``; the gradient ``(2a * x + b)`` times the head's)."""
    d = data._data
    t = d.dtype.type
    a, b, c = t(a), t(b), t(c)
    out = (a * d + b) * d + c
    return _result(out, data._ctx, (data,), lambda g, needs: (g * (t(2) * a * d + b),))


def _straight_through(data, values):
    """``values`` forward, the identity backward (a straight-through estimator)."""
    return _result(values, data._ctx, (data,), lambda g, needs: (g,))


def round_ste(data):
    """``data`` rounded to the nearest integer (halves away from zero); the gradient passes
    through unchanged."""
    d = data._data
    xp = _xp_of(d)
    whole = xp.trunc(d)
    rest = d - whole
    return _straight_through(data, whole + xp.where(xp.abs(rest) >= 0.5, xp.sign(d), 0)
                             .astype(d.dtype))


def sign_ste(data):
    """``sign(data)``; the gradient passes through unchanged."""
    return _straight_through(data, _xp_of(data._data).sign(data._data))


def gradientmultiplier(data, scalar=1.0, is_int=True):
    """``data`` unchanged forward; its gradient multiplied by ``scalar`` (gradient reversal
    with a negative one)."""
    d = data._data
    factor = d.dtype.type(scalar)
    return _result(d.copy(), data._ctx, (data,), lambda g, needs: (g * factor,))


def getnnz(data, axis=None):
    """The number of stored values of a csr array (int64, shape (1,))."""
    if axis is not None:
        raise ValueError("getnnz with axis = %s is not supported yet" % axis)
    if getattr(data, "stype", "default") != "csr":
        raise TypeError("getnnz takes a csr array, not %s" % getattr(data, "stype", type(data)))
    stored = data.data.size
    return _wrap(_xp_of(data.data._data).asarray([stored], dtype=numpy.int64), data._ctx)


def isinf(data):
    """1 where ``data`` is infinite, else 0 (``data``'s dtype)."""
    return data.abs() == numpy.inf


def isnan(data):
    """1 where ``data`` is NaN, else 0."""
    return data != data


def isfinite(data):
    """1 where ``data`` is neither infinite nor NaN, else 0."""
    return logical_and(data.abs() != numpy.inf, data == data)


def _bins(size, count):
    """Each output cell's input range along an axis of ``size``: MXNet's float32 arithmetic
    (``floor(i * size / count)`` to ``ceil((i + 1) * size / count)``)."""
    f = numpy.float32
    return [(int(numpy.floor(f(i * size) / f(count))),
             int(numpy.ceil(f((i + 1) * size) / f(count)))) for i in range(count)]


def AdaptiveAvgPooling2D(data, output_size=()):  # noqa: N802 (MXNet's name)
    """The mean of each of ``output_size`` (an int or (height, width); default 1) bins of
    (N, C, H, W) ``data``, the bins spread over the input as MXNet (and PyTorch) spread them,
    overlapping where the sizes do not divide. MXNet's rounding: each bin summed in order, then
    divided by its width and its height."""
    d = data._data
    xp = _xp_of(d)
    if d.ndim != 4:
        raise ValueError("AdaptiveAvgPooling2D takes (N, C, H, W) data, got shape %s"
                         % (d.shape,))
    size = (output_size,) if isinstance(output_size, int) else tuple(output_size)
    out_h, out_w = {1: size * 2, 2: size}.get(len(size), (1, 1))    # MXNet: 1x1 otherwise
    rows, cols = _bins(d.shape[2], out_h), _bins(d.shape[3], out_w)
    out = xp.empty(d.shape[:2] + (out_h, out_w), dtype=d.dtype)
    for i, (r0, r1) in enumerate(rows):
        for j, (c0, c1) in enumerate(cols):
            total = xp.zeros(d.shape[:2], dtype=d.dtype)
            for r in range(r0, r1):
                for c in range(c0, c1):
                    total += d[:, :, r, c]
            out[:, :, i, j] = total / d.dtype.type(c1 - c0) / d.dtype.type(r1 - r0)

    def vjp(g, needs):
        grad = xp.zeros_like(d)
        for i, (r0, r1) in enumerate(rows):
            for j, (c0, c1) in enumerate(cols):
                share = g[:, :, i, j] / d.dtype.type(r1 - r0) / d.dtype.type(c1 - c0)
                grad[:, :, r0:r1, c0:c1] += share[:, :, None, None]
        return (grad,)
    return _result(out, data._ctx, (data,), vjp)


# ----------------------------------------------------------------------------- attention
# Fused multi-head attention keeps a layer's projections interleaved per head on the last axis
# of (length, batch, ...) arrays: [q, k, v] (self-attention) or [k, v] (encoder-decoder) for
# each head in turn. These are MXNet's documented equivalents, so the gradients follow.
def _heads(projections, heads, parts, which):
    """Part ``which`` of each head of ``projections`` (length, batch, heads * parts * dim) as
    (batch * heads, length, dim)."""
    length, batch = projections.shape[:2]
    split = _ops.reshape(projections, (length, batch, heads, parts, -1))
    picked = _ops.slice_axis(split, axis=3, begin=which, end=which + 1)
    picked = _ops.transpose(_ops.reshape(picked, (length, batch, heads, -1)), axes=(1, 2, 0, 3))
    return _ops.reshape(picked, (batch * heads, length, -1))


def _merged(attended, heads):
    """(batch * heads, length, dim) back to (length, batch, heads * dim)."""
    rows, length, dim = attended.shape
    split = _ops.reshape(attended, (rows // heads, heads, length, dim))
    return _ops.reshape(_ops.transpose(split, axes=(2, 0, 1, 3)), (length, rows // heads, -1))


def _scaled_products(q, k):
    """``q @ k^T / sqrt(dim)`` per head, the scale applied to the products (a GEMM's alpha, as
    MXNet's kernel applies it), in the forward and the backward pass alike."""
    qd, kd = q._data, k._data
    xp = _xp_of(qd)
    scale = qd.dtype.type(1.0 / numpy.sqrt(qd.shape[-1]))
    out = xp.matmul(qd, xp.swapaxes(kd, 1, 2)) * scale

    def vjp(g, needs):
        return ((xp.matmul(g, kd) * scale) if needs[0] else None,
                (xp.matmul(xp.swapaxes(g, 1, 2), qd) * scale) if needs[1] else None)
    return _result(out, q._ctx, (q, k), vjp)


def interleaved_matmul_selfatt_qk(queries_keys_values, heads):
    """Each head's scaled query-key products, (batch * heads, length, length), from interleaved
    [q, k, v] projections (length, batch, heads * 3 * dim)."""
    return _scaled_products(_heads(queries_keys_values, heads, 3, 0),
                            _heads(queries_keys_values, heads, 3, 1))


def interleaved_matmul_selfatt_valatt(queries_keys_values, attention, heads):
    """The attention weights (batch * heads, length, length) applied to each head's values of
    interleaved [q, k, v] projections: (length, batch, heads * dim)."""
    return _merged(_ops.batch_dot(attention, _heads(queries_keys_values, heads, 3, 2)), heads)


def interleaved_matmul_encdec_qk(queries, keys_values, heads):
    """Each head's scaled products of ``queries`` (q_length, batch, heads * dim) with the keys
    of interleaved [k, v] projections (kv_length, batch, heads * 2 * dim)."""
    return _scaled_products(_heads(queries, heads, 1, 0), _heads(keys_values, heads, 2, 0))


def interleaved_matmul_encdec_valatt(keys_values, attention, heads):
    """The attention weights (batch * heads, q_length, kv_length) applied to each head's values
    of interleaved [k, v] projections: (q_length, batch, heads * dim)."""
    return _merged(_ops.batch_dot(attention, _heads(keys_values, heads, 2, 1)), heads)


def BatchNormWithReLU(data=None, gamma=None, beta=None, moving_mean=None,  # noqa: N802
                      moving_var=None, eps=1e-3, momentum=0.9, fix_gamma=True,
                      use_global_stats=False, output_mean_var=False, axis=1, cudnn_off=False,
                      **kwargs):
    """``relu(BatchNorm(...))`` with BatchNorm's arguments (MXNet's fused operator behind
    ``gluon.nn.BatchNormReLU``); with ``output_mean_var`` the batch mean and variance follow,
    as BatchNorm gives them. On the CPU's kernels both are one pass over the data and, when
    recorded, one node whose backward masks the gradient as the ReLU's does."""
    return batch_norm(data, gamma, beta, moving_mean, moving_var, eps, momentum, fix_gamma,
                      use_global_stats, output_mean_var, axis, True)


def SparseEmbedding(data=None, weight=None, input_dim=None, output_dim=None,  # noqa: N802
                    dtype="float32", deterministic=False, **kwargs):
    """``Embedding`` with a row_sparse gradient (MXNet's contrib name for it)."""
    return Embedding(data, weight, input_dim=input_dim, output_dim=output_dim, dtype=dtype,
                     sparse_grad=True, **kwargs)


def rand_zipfian(true_classes, num_sampled, range_max, ctx=None):
    """``num_sampled`` classes of ``[0, range_max)`` drawn with replacement from the
    log-uniform (Zipfian) distribution ``P(c) = log((c + 2) / (c + 1)) / log(range_max + 1)``
    (sampled softmax's candidates for classes sorted by decreasing frequency): ``(samples``
    (int64), the expected counts of ``true_classes`` and of the samples in ``num_sampled``
    draws (float64)``)``, on ``ctx`` (default: the current context). MXNet's arithmetic, so
    the expected counts of the same classes are its bits; the draws come from this library's
    generator (``mx.random.seed``)."""
    ctx = current_context() if ctx is None else ctx
    log_range = math.log(range_max + 1)
    draws = uniform(0, log_range, shape=(num_sampled,), dtype="float64", ctx=ctx)
    samples = (draws.exp() - 1).astype("int64") % range_max

    def expected_counts(classes):
        ratios = (classes.astype("float64") + 2.0) / (classes.astype("float64") + 1.0)
        r = ratios._data
        # MXNet's CPU takes each logarithm from the C library, which NumPy's vectorised float64
        # log differs from in the last bit for about one value in 3000.
        logs = _libm.call("log", r) if type(r) is numpy.ndarray else _xp_of(r).log(r)
        return _wrap(logs, ratios._ctx) / log_range * num_sampled
    return (samples, expected_counts(true_classes.as_in_context(ctx)),
            expected_counts(samples))


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise NotInTrainerCLIError(absent_message(
        "trainer_cli.nd.contrib." + name, "contributed operator (mxnet.nd.contrib.%s)" % name))
