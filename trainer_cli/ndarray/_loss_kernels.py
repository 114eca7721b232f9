"""SoftmaxCrossEntropyLoss's small array operations in one numba pass each (see ``_jit``).

On a classifier's scores (a batch of tens of rows of tens of classes) the loss is a dozen NumPy
calls forward and as many backward, each costing more in dispatch than in arithmetic. The
kernels do what those calls do, element by element in NumPy's order; the exponential is that of
``_log_softmax_raw`` (Cephes' for float32, ``_act_kernels``; NumPy's for float64), the logarithm
NumPy's. Forward, after NumPy's
``shifted = d - max`` and ``log(sum(exp(shifted)))``: ``logp = shifted - that``, the label's
entry picked (labels cast to int64 and clipped, as ``pick`` does) and negated, summed from +0.0
over the one value per sample. Backward, from ``exp(logp)``: the picked one-hot times the negated
head gradient, its row sums (NumPy's pairwise sum) and ``g - exp(logp) * sum``.

Rows of more than ``_fc_kernels._BLOCK`` classes (a language model's softmax over its
vocabulary) sum as NumPy does through ``_pairwise``' general pairwise summation, and their
passes write in place where NumPy allocates: ``logp`` over ``shifted`` (on 10,000 classes each
such array is tens of megabytes, which glibc maps afresh and the kernel zeroes page by page at
every step). On those rows: the one-hot row's sum is ``0 + (-head)`` exactly for a finite head
(the other terms are zeros of its sign), so it is made and summed only for a non-finite one;
float32 scores stored by columns (``Dense``'s transposed product) are shifted, exponentiated and
summed class by class (NumPy's order on that layout) in one loop; the float32 gradient makes
each row's or column's exponentials into a row of scratch inside its loop, never an array of
them; and the passes over scores by columns whose values are independent (the log-probabilities,
the gradient) run in ranges of classes on the BLAS's threads.

``applies`` says where they do not (no numba, other layouts or dtypes, fewer than ``MIN_SIZE``
scores), and ``backward`` returns None for a head gradient of
another dtype; the caller then runs the NumPy operations. ``tests/test_fused_losses.py`` compares the bits of both.
"""
from __future__ import annotations

import numpy

from .. import _jit
from . import _act_kernels, _fc_kernels
from . import _pairwise as _pw
from . import host_threads as _host_threads

__all__ = ["applies", "log_softmax_parts", "forward", "backward", "MIN_SIZE"]

MIN_SIZE = 512
# Scores stored by columns of this many values or more have their element-wise passes worked in
# ranges of classes on the BLAS's thread count of threads.
SPLIT_SIZE = 1 << 20
_EXP_BLOCK = 1 << 16        # values of exp(shifted) at a time on wide rows (256 KiB of float32)
_FLOATS = (numpy.dtype(numpy.float32), numpy.dtype(numpy.float64))
_INT64_MIN = numpy.iinfo(numpy.int64).min
_np_ndarray = numpy.ndarray


def applies(scores, label) -> bool:
    """Whether ``forward`` takes these raw scores (batch, classes) and labels."""
    return (type(scores) is _np_ndarray and scores.ndim == 2 and scores.size >= MIN_SIZE
            and scores.dtype in _FLOATS and scores.shape[1] >= 1
            and type(label) is _np_ndarray and label.size == scores.shape[0]
            and label.dtype.kind in "fi"
            and _jit._numba is not False and (_jit._numba is not None or _jit.enabled()))


def log_softmax_parts(scores):
    """``(shifted, log_sum)``: ``scores - scores.max(axis=1, keepdims=True)`` and
    ``log(exp(shifted).sum(axis=1, keepdims=True))``, for scores that ``applies`` took.

    On C-contiguous scores the max and the subtraction are one kernel pass and the row sums
    another (NumPy's reductions over ten-odd values per row cost microseconds each); ``exp``
    is ``_exp``'s, ``log`` NumPy's. Other layouts take NumPy's calls, whose order of summation
    depends on the layout. The one difference: where a row's largest value is a zero of both
    signs, NumPy and the kernel may pick a different one as the max, which can only change the
    sign of a zero in ``shifted``. Nothing after it sees that sign: such a row's exponentials
    sum to 2 or more, so ``shifted - log_sum`` rounds the same either way."""
    wide = _wide(scores)
    if not scores.flags.c_contiguous:
        top = scores.max(axis=1, keepdims=True)
        if scores.dtype == numpy.float32 and scores.flags.f_contiguous:
            # A Dense layer's transposed product: NumPy's subtraction, Cephes' exp and NumPy's
            # sum over the classes (class by class, from +0.0, on this layout) in one loop down
            # the columns, without an array of the exponentials.
            shifted = numpy.empty_like(scores)
            sums = numpy.empty((scores.shape[0], 1), scores.dtype)
            _shift_exp_sums_cols(scores.T, top.reshape(-1), shifted.T, sums.reshape(-1),
                                 scores.dtype.type(0))
            return shifted, numpy.log(sums)
        shifted = scores - top
        return shifted, numpy.log(_exp(shifted).sum(axis=1, keepdims=True))
    if wide:        # NumPy's SIMD max and subtraction outrun the scalar loop on long rows
        shifted = scores - scores.max(axis=1, keepdims=True)
    else:
        shifted = numpy.empty_like(scores)
        _shift(scores, shifted)
    sums = numpy.empty((scores.shape[0], 1), scores.dtype)
    if wide:
        # The exponentials a few rows at a time into one small buffer: never a whole array of
        # them (NumPy's exp is element-wise, so the bits do not depend on the blocks).
        tasks, values, _row = _pw.workspace(scores.dtype, 0)
        rows = max(1, _EXP_BLOCK // scores.shape[1])
        block = numpy.empty((min(rows, scores.shape[0]), scores.shape[1]), scores.dtype)
        zero = scores.dtype.type(0)
        for r in range(0, scores.shape[0], rows):
            part = block[:min(rows, scores.shape[0] - r)]
            _exp(shifted[r:r + rows], out=part)
            _row_sums_wide(part, sums[r:r + rows], zero, tasks, values)
    else:
        _row_sums(_exp(shifted), sums)
    return shifted, numpy.log(sums)


def _exp(t, out=None):
    """``exp(t)`` of ``t <= 0`` as ``_log_softmax_raw`` takes it: Cephes' for float32
    (``_act_kernels.exp_or_zero``), NumPy's for float64."""
    if t.dtype != numpy.float32:
        return numpy.exp(t, out=out)
    if out is None:
        out = numpy.empty_like(t)
    # An elementwise loop: the transposes of column-ordered arrays are as good.
    flip = not t.flags.c_contiguous and t.flags.f_contiguous and out.flags.f_contiguous
    if not (_act_kernels.exp_or_zero(t.T, out.T) if flip else
            _act_kernels.exp_or_zero(t, out)):
        out[...] = _act_kernels.np_exp_or_zero(t)
    return out


def _wide(scores):
    return scores.shape[1] > _fc_kernels._BLOCK


def forward(shifted, log_sum, label):
    """``(loss per sample, logp, label indices)`` from the row-wise ``shifted`` scores (C order)
    and ``log_sum`` (``log(sum(exp(shifted)))``, shape (batch, 1)), for scores that
    ``applies`` took. Wide rows' ``logp`` overwrites ``shifted``."""
    logp = shifted if _wide(shifted) else numpy.empty_like(shifted)
    loss = numpy.empty(shifted.shape[0], shifted.dtype)
    idx = numpy.empty(shifted.shape[0], numpy.int64)
    if _by_columns(shifted):
        _by_classes(shifted, lambda j0, j1: _forward_cols(shifted.T, log_sum, logp.T, j0, j1))
        _cols_loss(logp.T, label.reshape(-1), loss, idx)
    else:
        _forward(shifted, log_sum, label.reshape(-1), logp, loss, idx)
    return loss, logp, idx


def _by_classes(scores, work):
    """``work(j0, j1)`` over ranges of the classes covering them, on the BLAS's thread count of
    threads for SPLIT_SIZE scores or more (each value's arithmetic is its own)."""
    _host_threads.in_ranges(scores.shape[1], scores.size, SPLIT_SIZE, work)


def _by_columns(a):
    """Wide rows stored by columns (Dense's transposed product): the loops then run down the
    columns of ``a.T``, C-contiguous, instead of striding across rows."""
    return _wide(a) and a.flags.f_contiguous and not a.flags.c_contiguous


def backward(head, logp, idx):
    """The scores' gradient from the per-sample ``head`` gradient, ``logp`` and the label
    indices of ``forward``, or None."""
    if type(head) is not _np_ndarray or head.dtype != logp.dtype or head.size != logp.shape[0]:
        return None
    if _wide(logp):
        # float32: each row's (or column's) exponentials made in the loop into a row of
        # scratch (Cephes' exp, as ``_exp``), never a whole array of them; float64: NumPy's
        # exp first, its array then taking the gradient.
        dtype = logp.dtype
        fused = dtype == numpy.float32
        src = logp if fused else _exp(logp)
        grad = numpy.empty_like(logp) if fused else src
        tasks, values, row = _pw.workspace(dtype, logp.shape[1])
        if _by_columns(src):
            totals = numpy.empty(logp.shape[0], dtype)
            _cols_totals(head.reshape(-1), idx, logp.shape[1], totals, row, dtype.type(0),
                         tasks, values)
            _by_classes(src, lambda j0, j1: (_backward_cols_exp if fused else _backward_cols)(
                head.reshape(-1), src.T, idx, grad.T, totals, dtype.type(0),
                numpy.empty(logp.shape[0], dtype), j0, j1))
        else:
            (_backward_wide_exp if fused else _backward_wide)(
                head.reshape(-1), src, idx, grad, row, dtype.type(0), tasks, values,
                numpy.empty(logp.shape[1], dtype))
        return grad
    e = _exp(logp)
    grad = numpy.empty_like(logp)
    _backward(head.reshape(-1), e, idx, grad)
    return grad


# ----------------------------------------------------------------------------- the loops
def _label_index_loop(lab, classes):
    # astype(int64): truncation; NaN and values out of range give INT64_MIN (x86), which
    # the clip then takes to 0.
    if lab != lab or not (-9.223372036854775808e18 <= lab < 9.223372036854775808e18):
        k = _INT64_MIN
    else:
        k = numpy.int64(lab)
    return min(max(k, 0), classes - 1)


def _forward_loop(shifted, log_sum, labels, logp, loss, idx):
    classes = shifted.shape[1]
    for i in range(shifted.shape[0]):
        ls = log_sum[i, 0]
        for j in range(classes):
            logp[i, j] = shifted[i, j] - ls
        k = _label_index(labels[i], classes)
        idx[i] = k
        v = -logp[i, k]
        loss[i] = abs(v) if v == 0 else v        # +0.0 + v: add.reduce over one value


def _backward_loop(head, e, idx, grad):
    classes = e.shape[1]
    for i in range(e.shape[0]):
        neg = -head[i]
        row = grad[i]
        for j in range(classes):
            row[j] = (1 if j == idx[i] else 0) * neg
        total = _pairwise_block(row)
        for j in range(classes):
            row[j] = row[j] - e[i, j] * total


def _one_hot_total_loop(neg, k, classes, zero, row, tasks, values):
    """``zero +`` the pairwise sum of the one-hot row ``(1 if j == k else 0) * neg``: for a
    finite ``neg`` that is ``zero + neg`` exactly (the other terms are zeros of its sign), so the
    row is made and summed only where ``neg`` is not finite (``0 * inf`` is NaN) and there is
    more than one class."""
    if neg - neg == 0 or classes == 1:
        return zero + neg
    for j in range(classes):
        row[j] = (1 if j == k else 0) * neg
    return zero + _pairwise(row, 0, classes, zero, tasks, values)


def _backward_wide_loop(head, src, idx, grad, row, zero, tasks, values, scratch):
    # As _backward_loop, each row's exponentials ``line(src, i, scratch)``: ``src``'s row
    # itself, or made from the log-probabilities into ``scratch``. ``grad`` may be ``src``.
    classes = src.shape[1]
    for i in range(src.shape[0]):
        neg = -head[i]
        k = idx[i]
        total = _one_hot_total(neg, k, classes, zero, row, tasks, values)
        e = line(src, i, scratch)       # noqa: F821 - _as_is or _exps
        for j in range(classes):
            hot = neg if j == k else neg * zero        # (1 or 0) * neg, as in the row
            grad[i, j] = hot - e[j] * total


def _cols_totals_loop(head, idx, classes, totals, row, zero, tasks, values):
    for i in range(head.shape[0]):
        totals[i] = _one_hot_total(-head[i], idx[i], classes, zero, row, tasks, values)


def _backward_cols_loop(head, src_t, idx, grad_t, totals, zero, scratch, j0, j1):
    # _backward_wide_loop on the transposes, column by column (classes j0..j1), each row's sum
    # made first (``_cols_totals_loop``).
    batch = src_t.shape[1]
    for j in range(j0, j1):
        e = line(src_t, j, scratch)     # noqa: F821 - _as_is or _exps
        for i in range(batch):
            neg = -head[i]
            hot = neg if j == idx[i] else neg * zero       # (1 or 0) * neg, as in the row
            grad_t[j, i] = hot - e[i] * totals[i]


def _as_is(src, i, scratch):
    return src[i]


def _exps(src, i, scratch):
    for j in range(src.shape[1]):
        scratch[j] = exp_or_zero(src[i, j])        # noqa: F821 - _act_kernels' Cephes exp
    return scratch


def _forward_cols_loop(shifted_t, log_sum, logp_t, j0, j1):
    # _forward_loop on the transposes: the log-probabilities of classes j0..j1, ...
    batch = shifted_t.shape[1]
    for j in range(j0, j1):
        for i in range(batch):
            logp_t[j, i] = shifted_t[j, i] - log_sum[i, 0]


def _cols_loss_loop(logp_t, labels, loss, idx):
    # ... then each sample's loss from them.
    classes, batch = logp_t.shape
    for i in range(batch):
        k = _label_index(labels[i], classes)
        idx[i] = k
        v = -logp_t[k, i]
        loss[i] = abs(v) if v == 0 else v


def _shift_exp_sums_cols_loop(scores_t, top, shifted_t, sums, zero):
    classes, batch = scores_t.shape
    for i in range(batch):
        sums[i] = zero
    for j in range(classes):
        for i in range(batch):
            v = scores_t[j, i] - top[i]
            shifted_t[j, i] = v
            sums[i] = sums[i] + exp_or_zero(v)     # noqa: F821 - _act_kernels' Cephes exp


def _row_sums_wide_loop(e, sums, zero, tasks, values):
    for i in range(e.shape[0]):
        sums[i, 0] = zero + _pairwise(e[i], 0, e.shape[1], zero, tasks, values)


def _shift_loop(scores, shifted):
    for i in range(scores.shape[0]):
        row = scores[i]
        top = row[0]
        for j in range(1, row.shape[0]):
            v = row[j]
            if not top >= v and top == top:        # numpy.maximum: a NaN wins
                top = v
        for j in range(row.shape[0]):
            shifted[i, j] = row[j] - top


def _row_sums_loop(e, sums):
    for i in range(e.shape[0]):
        sums[i, 0] = _pairwise_block(e[i])


# The loops call it by this name; compiled, they call it compiled (``_jit.Kernel``'s helpers).
_pairwise_block = _fc_kernels._pairwise_block_loop

_label_index = _label_index_loop
label_index = _jit.Kernel(_label_index_loop)
_forward = _jit.Kernel(_forward_loop, {"_label_index": label_index})
_backward = _jit.Kernel(_backward_loop, {"_pairwise_block": _fc_kernels.pairwise_block})
_shift = _jit.Kernel(_shift_loop)
_row_sums = _jit.Kernel(_row_sums_loop, {"_pairwise_block": _fc_kernels.pairwise_block})
# Rows of any length: NumPy's pairwise summation with its halving above 128 values.
_pairwise = _pw.pairwise_loop
_one_hot_total = _one_hot_total_loop
line = _as_is
one_hot_total = _jit.Kernel(_one_hot_total_loop, {"_pairwise": _pw.pairwise})
_given = {"_one_hot_total": one_hot_total, "line": _jit.Kernel(_as_is, inline=True)}
_made = {"_one_hot_total": one_hot_total,
         "line": _jit.Kernel(_exps, {"exp_or_zero": _act_kernels._exp_or_zero_kernel},
                             inline=True)}
_backward_wide = _jit.Kernel(_backward_wide_loop, _given)
_backward_wide_exp = _jit.Kernel(_backward_wide_loop, _made)
_row_sums_wide = _jit.Kernel(_row_sums_wide_loop, {"_pairwise": _pw.pairwise})
_backward_cols = _jit.Kernel(_backward_cols_loop, _given)
_backward_cols_exp = _jit.Kernel(_backward_cols_loop, _made)
_cols_totals = _jit.Kernel(_cols_totals_loop, {"_one_hot_total": one_hot_total})
_forward_cols = _jit.Kernel(_forward_cols_loop)
_cols_loss = _jit.Kernel(_cols_loss_loop, {"_label_index": label_index})
_shift_exp_sums_cols = _jit.Kernel(_shift_exp_sums_cols_loop,
                                   {"exp_or_zero": _act_kernels._exp_or_zero_kernel})
