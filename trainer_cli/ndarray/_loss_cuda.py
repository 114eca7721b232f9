"""SoftmaxCrossEntropyLoss on the GPU in one launch forward and one backward.

On a classifier's scores (tens of rows of tens of classes) the generic path is two dozen CuPy
launches (max, subtract, exp, sum, log, subtract, the label's clip and pick, the mean; then the
one-hot, its sums and the softmax's gradient), each costing the host ten-odd microseconds for
nanoseconds of work: a small model's whole step is bound by them. Here one thread takes one row
and does what the CPU's fused loss (``_loss_kernels``) does, in the same order: the row's max,
``shifted = d - max``, the sum of ``exp(shifted)`` from the first class to the last,
``logp = shifted - log(sum)``, the label cast to int64 and clipped (NaN and values out of range
to class 0, as ``astype`` then ``clip`` make them), the picked entry negated (``+0.0 + v``);
backward, the one-hot times the negated head gradient, its row sum and
``onehot - exp(logp) * sum``. CUDA's ``exp`` and ``log`` round as CuPy's do, not as NumPy's, so a
GPU loss matches the CPU's to float rounding; the eager op and a hybridized block's plan both
run this, so they give the same bits. Rows wider than ``MAX_CLASSES`` (a language model's
vocabulary) take the generic path, whose reductions spread a row over many threads.
"""
from __future__ import annotations

import numpy

from ..context import is_cupy_array

__all__ = ["applies", "forward", "backward", "MAX_CLASSES"]

MAX_CLASSES = 1024
_THREADS = 128
_LABEL_TYPES = {"f": "float", "d": "double", "i": "int", "l": "long long", "q": "long long"}
_SCORE_TYPES = {"f": "float", "d": "double"}

FORWARD_SOURCE = """
typedef %(ctype)s T;
typedef %(ltype)s L;
extern "C" __global__ void trainer_cli_softmax_ce_forward(const T *scores, const L *labels,
        long long rows, long long classes, T *logp, T *loss, long long *idx) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    const T *x = scores + i * classes;
    T *lp = logp + i * classes;
    T m = x[0];
    for (long long j = 1; j < classes; ++j) {
        const T v = x[j];
        if (v != v) { m = v; break; }       // NumPy's max: a NaN anywhere is the max
        if (v > m) m = v;
    }
    for (long long j = 0; j < classes; ++j) lp[j] = x[j] - m;
    T total = exp(lp[0]);
    for (long long j = 1; j < classes; ++j) total = total + exp(lp[j]);
    const T log_sum = log(total);
    for (long long j = 0; j < classes; ++j) lp[j] = lp[j] - log_sum;
    long long k;
    %(label)s
    k = k > 0 ? k : 0;
    k = k < classes - 1 ? k : classes - 1;
    idx[i] = k;
    const T v = -lp[k];
    loss[i] = v == 0 ? T(0) : v;            // +0.0 + v: the mean over one value
}
"""

# A label of a float type as ``astype(int64)`` makes it on x86: truncated, and NaN or a value
# outside int64's range gives INT64_MIN (which the clip takes to 0).
_FLOAT_LABEL = """{
        const double lab = (double)labels[i];
        k = (lab != lab || !(lab >= -9.223372036854775808e18 && lab < 9.223372036854775808e18))
            ? (long long)(-9223372036854775807LL - 1) : (long long)lab;
    }"""
_INT_LABEL = "k = (long long)labels[i];"

BACKWARD_SOURCE = """
typedef %(ctype)s T;
extern "C" __global__ void trainer_cli_softmax_ce_backward(const T *head, const T *logp,
        const long long *idx, long long rows, long long classes, T *grad) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) return;
    const T neg = -head[i];
    const long long k = idx[i];
    const T *lp = logp + i * classes;
    T *g = grad + i * classes;
    T total = (k == 0 ? T(1) : T(0)) * neg;
    for (long long j = 1; j < classes; ++j) total = total + (j == k ? T(1) : T(0)) * neg;
    for (long long j = 0; j < classes; ++j)
        g[j] = (j == k ? T(1) : T(0)) * neg - exp(lp[j]) * total;
}
"""

_kernels: dict = {}


def applies(scores, label) -> bool:
    """Whether ``forward`` takes these raw scores (a CuPy (batch, classes) array, C order,
    float32/float64, 1 to ``MAX_CLASSES`` classes) and labels (one per row, contiguous)."""
    return (is_cupy_array(scores) and scores.ndim == 2 and scores.dtype.char in _SCORE_TYPES
            and 1 <= scores.shape[1] <= MAX_CLASSES and scores.shape[0] > 0
            and scores.flags.c_contiguous
            and type(label) is type(scores) and label.size == scores.shape[0]
            and label.dtype.char in _LABEL_TYPES and label.flags.c_contiguous
            and label.device == scores.device)


def _kernel(kind, dtype, label_dtype=None):
    import cupy
    key = (kind, dtype.char, None if label_dtype is None else label_dtype.char)
    kernel = _kernels.get(key)
    if kernel is None:
        ctype = _SCORE_TYPES[dtype.char]
        if kind == "forward":
            source = forward_source(dtype, label_dtype)
        else:
            source = BACKWARD_SOURCE % {"ctype": ctype}
        kernel = _kernels[key] = cupy.RawKernel(source, "trainer_cli_softmax_ce_" + kind,
                                                options=("--fmad=false",))
    return kernel


def forward_source(dtype, label_dtype):
    """The forward kernel's CUDA source for scores of ``dtype`` and labels of ``label_dtype``."""
    return FORWARD_SOURCE % {
        "ctype": _SCORE_TYPES[dtype.char], "ltype": _LABEL_TYPES[label_dtype.char],
        "label": _FLOAT_LABEL if label_dtype.kind == "f" else _INT_LABEL}


def _blocks(rows):
    return (-(-rows // _THREADS),)


def forward(scores, label):
    """``(loss per sample, logp, label indices)`` for scores and labels ``applies`` took."""
    import cupy
    rows, classes = scores.shape
    logp = cupy.empty_like(scores)
    loss = cupy.empty(rows, scores.dtype)
    idx = cupy.empty(rows, numpy.int64)
    _kernel("forward", scores.dtype, label.dtype)(
        _blocks(rows), (_THREADS,), (scores, label, numpy.int64(rows), numpy.int64(classes),
                                     logp, loss, idx))
    return loss, logp, idx


def backward(head, logp, idx):
    """The scores' gradient from the per-sample ``head`` gradient, or None where the kernel does
    not take it (another array type or dtype, another size)."""
    if type(head) is not type(logp) or head.dtype != logp.dtype \
            or head.size != logp.shape[0] or head.device != logp.device:
        return None
    import cupy
    rows, classes = logp.shape
    grad = cupy.empty_like(logp)
    _kernel("backward", logp.dtype)(
        _blocks(rows), (_THREADS,), (cupy.ascontiguousarray(head), logp, idx,
                                     numpy.int64(rows), numpy.int64(classes), grad))
    return grad
