"""Fused GPU kernels for the optimizer rules: one CuPy ElementwiseKernel launch per tensor.

Each kernel does, per element, the operations of the rule's NumPy body (which on CuPy arrays
launches one kernel per operation), in the same order and precision. ``--fmad=false`` keeps the
compiler from contracting a multiply and an add into one FMA, which would round once where the
separate CuPy operations round twice; division and square root are IEEE-exact by default
(NVRTC's ``--prec-div``/``--prec-sqrt``), as in CuPy's own ``divide`` and ``sqrt``. So the
kernels give the bits of the unfused path (``tests/test_fused_kernels.py``, GPU cases).

The kernels are built on first use, so importing this module costs nothing without CuPy.
"""
from __future__ import annotations

from ..context import array_module_of

__all__ = ["handles", "sgd", "sgd_mom", "adam", "adamw"]

_OPTIONS = ("--fmad=false",)

# numpy.clip as the CPU kernels write it: max with lo, then min with hi, a NaN kept.
_CLIP = """
    if (x == x) {
        x = x > lo ? x : lo;
        x = x < hi ? x : hi;
    }
"""

# Adam's moments from the clipped gradient x, as adam._moments rounds them.
_MOMENTS = """
        T m = mean * beta1;
        m = m + x * ((T)1 - beta1);
        mean = m;
        T v = var * beta2;
        v = v + (x * ((T)1 - beta2)) * x;
        var = v;
"""

_SOURCES = {
    "sgd": ("T g, T lr, T wd, T rescale, T lo, T hi, bool clipping, bool decay", "T w", """
        T x = g * (clipping ? rescale : lr * rescale);
        if (clipping) {""" + _CLIP + """
            x = x * lr;
        }
        if (decay) x = x + w * (lr * wd);
        w = w - x;
    """),
    "sgd_mom": ("T g, T lr, T wd, T rescale, T lo, T hi, T momentum, bool clipping, bool decay",
                "T w, T mom", """
        T x = g * (clipping ? rescale : lr * rescale);
        if (clipping) {""" + _CLIP + """
            x = x * lr;
        }
        T m = mom * momentum;
        if (decay) m = m - w * (lr * wd);
        m = m - x;
        mom = m;
        w = w + m;
    """),
    "adam": ("T g, T rescale, T wd, T lo, T hi, T beta1, T beta2, T epsilon, T lr, bool decay, "
             "bool clipping", "T w, T mean, T var", """
        T x = g * rescale;
        if (decay) x = x + w * wd;
        if (clipping) {""" + _CLIP + """
        }""" + _MOMENTS + """
        w = w - (m * lr) / (sqrt(v) + epsilon);
    """),
    "adamw": ("T g, T rescale, T wd, T lo, T hi, T beta1, T beta2, T epsilon, T eta, "
              "bool clipping", "T w, T mean, T var", """
        T x = g * rescale;
        if (clipping) {""" + _CLIP + """
        }""" + _MOMENTS + """
        T wi = w;
        w = wi - (m / (sqrt(v) + epsilon) + wi * wd) * eta;
    """),
}

_kernels = {}


def _kernel(name):
    kernel = _kernels.get(name)
    if kernel is None:
        import cupy
        in_params, out_params, body = _SOURCES[name]
        kernel = _kernels[name] = cupy.ElementwiseKernel(
            in_params, out_params, body, "trainer_cli_" + name, options=_OPTIONS)
    return kernel


def handles(w, *others) -> bool:
    """CuPy arrays of one float32/float64 dtype and shape, on one device, not overlapping
    other than exactly (an elementwise kernel reads and writes each element once)."""
    xp = array_module_of(w)
    if xp.__name__ != "cupy" or w.dtype.char not in "fd":
        return False
    for a in others:
        if type(a) is not type(w) or a.dtype != w.dtype or a.shape != w.shape \
                or a.device != w.device:
            return False
    arrays = (w,) + others
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            if a is not b and xp.shares_memory(a, b):
                return False
    return True


def _scalars(w, values):
    t = w.dtype.type
    return [t(v) for v in values]


def sgd(w, g, *, lr, wd, rescale, clip):
    clipping = clip is not None
    _kernel("sgd")(g, *_scalars(w, (lr, wd, rescale, -clip if clipping else 0,
                                    clip if clipping else 0)),
                   clipping, bool(w.dtype.type(wd)), w)


def sgd_mom(w, g, mom, *, lr, wd, momentum, rescale, clip):
    clipping = clip is not None
    _kernel("sgd_mom")(g, *_scalars(w, (lr, wd, rescale, -clip if clipping else 0,
                                        clip if clipping else 0, momentum)),
                       clipping, bool(w.dtype.type(wd)), w, mom)


def adam(w, g, mean, var, *, lr, wd, beta1, beta2, epsilon, rescale, clip):
    clipping = clip is not None
    _kernel("adam")(g, *_scalars(w, (rescale, wd, -clip if clipping else 0,
                                     clip if clipping else 0, beta1, beta2, epsilon, lr)),
                    bool(wd), clipping, w, mean, var)


def adamw(w, g, mean, var, *, eta, wd, beta1, beta2, epsilon, rescale, clip):
    clipping = clip is not None
    _kernel("adamw")(g, *_scalars(w, (rescale, wd, -clip if clipping else 0,
                                      clip if clipping else 0, beta1, beta2, epsilon, eta)),
                     clipping, w, mean, var)
