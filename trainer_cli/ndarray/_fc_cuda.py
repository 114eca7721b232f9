"""Dense's element-wise steps on the GPU in one launch each: the bias added and the ReLU taken
together after the product, and the ReLU's mask applied to the output gradient. CuPy would take
two launches for each (``out += b``, ``maximum(out, 0)``; ``out > 0``, the product); on a small
layer a launch costs the host more than the arithmetic. The values are those operations': the
same single rounding of ``out + b``, NaN kept (CuPy's ``maximum`` keeps it too), and the mask's
product ``g * 1`` or ``g * 0`` (so a NaN or infinite gradient under a zero mask is NaN, as
before)."""
from __future__ import annotations

__all__ = ["bias_relu", "relu_mask"]

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
    return type(a).__module__.startswith("cupy") and a.dtype.char in "fd"


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
