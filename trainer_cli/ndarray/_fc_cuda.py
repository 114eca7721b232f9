"""Dense's element-wise steps on the GPU in one launch each: the bias added and the ReLU taken
together after the product; backward, the ReLU's mask applied to the output gradient and the
bias's gradient summed over the batch. CuPy would take two launches for the first
(``out += b``, ``maximum(out, 0)``) and three for the second (``out > 0``, the product, a
reduction); on a small layer a launch costs the host more than the arithmetic, a reduction the
most. The values are those operations': the same single rounding of ``out + b``, NaN kept
(CuPy's ``maximum`` keeps it too), the mask's product ``g * 1`` or ``g * 0`` (so a NaN or
infinite gradient under a zero mask is NaN, as before). The bias's gradient adds each unit's
batch in order from +0.0, the first sample to the last (one thread a unit), where CuPy's
reduction adds in a tree: the sums differ from it in rounding; the eager op and a hybridized
block's plan both run this, so they give the same bits."""
from __future__ import annotations

from ..context import is_cupy_array

__all__ = ["bias_relu", "relu_mask", "relu_bias_grad", "MAX_BATCH"]

MAX_BATCH = 4096        # a longer batch is summed by CuPy's reduction, over many threads
_THREADS = 128

BIAS_GRAD_SOURCE = """
typedef %(ctype)s T;
extern "C" __global__ void trainer_cli_fc_bias_grad(const T *g, const T *out, long long rows,
        long long cols, int relu, T *masked, T *sums) {
    const long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    T acc = T(0);
    for (long long i = 0; i < rows; ++i) {
        T v = g[i * cols + j];
        if (relu) {
            v = v * (out[i * cols + j] > T(0) ? T(1) : T(0));
            masked[i * cols + j] = v;
        }
        acc = acc + v;
    }
    if (sums) sums[j] = acc;
}
"""

_kernels: dict = {}

_BIAS_RELU = ("T b", "T out", "T v = out + b; out = v != v ? v : max(v, T(0));")
_MASK = ("T g, T out", "T r", "r = g * (out > T(0) ? T(1) : T(0));")


def _kernel(name, spec):
    kernel = _kernels.get(name)
    if kernel is None:
        import cupy
        in_params, out_params, body = spec
        kernel = _kernels[name] = cupy.ElementwiseKernel(
            in_params, out_params, body, "trainer_cli_fc_" + name, options=("--fmad=false",))
    return kernel


def _takes(a):
    return is_cupy_array(a) and a.dtype.char in "fd"


def bias_relu(out, b, relu) -> bool:
    """``out += b`` then, with ``relu``, ``maximum(out, 0)``, in place, in one launch, for a CuPy
    float ``out`` and a bias ``b`` of its dtype and device; False (nothing done) otherwise."""
    if not _takes(out) or b is None:
        return False
    if type(b) is not type(out) or b.dtype != out.dtype or b.device != out.device:
        return False
    if not relu:
        out += b
        return True
    _kernel("bias_relu", _BIAS_RELU)(b, out)
    return True


def relu_mask(g, out):
    """``g * (out > 0)`` in one launch for CuPy float arrays of one dtype and shape, else None."""
    if not _takes(g) or type(out) is not type(g) or out.dtype != g.dtype or out.shape != g.shape:
        return None
    return _kernel("mask", _MASK)(g, out)


def relu_bias_grad(g, out, relu, bias, sums=None):
    """``(g * (out > 0) if relu else g, its sum over the batch if bias else None)`` in one
    launch, for a 2-D C-contiguous CuPy float ``g`` (batch first, at most ``MAX_BATCH`` rows)
    and ``out`` of its shape; the sum into ``sums`` where that is a fitting buffer (the bias's
    gradient). None where the kernel does not apply."""
    if not bias or not _takes(g) or g.ndim != 2 or not g.flags.c_contiguous \
            or g.shape[0] > MAX_BATCH or not g.size:
        return None
    if relu and (type(out) is not type(g) or out.dtype != g.dtype or out.shape != g.shape
                 or not out.flags.c_contiguous):
        return None
    import cupy
    import numpy
    rows, cols = g.shape
    masked = cupy.empty_like(g) if relu else g
    if sums is None or type(sums) is not type(g) or sums.dtype != g.dtype \
            or sums.shape != (cols,) or not sums.flags.c_contiguous or sums.device != g.device:
        sums = cupy.empty(cols, g.dtype)
    kernel = _kernels.get(("bias_grad", g.dtype.char))
    if kernel is None:
        kernel = _kernels[("bias_grad", g.dtype.char)] = cupy.RawKernel(
            BIAS_GRAD_SOURCE % {"ctype": "float" if g.dtype.char == "f" else "double"},
            "trainer_cli_fc_bias_grad", options=("--fmad=false",))
    kernel((-(-cols // _THREADS),), (_THREADS,), (g, out if relu else g, numpy.int64(rows),
                                                  numpy.int64(cols), numpy.int32(bool(relu)),
                                                  masked, sums))
    return masked, sums
