"""Cases for ``nd.gamma``, ``nd.gammaln`` and ``nd.erfinv``, written once against MXNet's API:
``record(mx)`` runs them with ``mx`` (MXNet 1.9.1 or trainer_cli) and returns numpy arrays.

* ``special/<op>/<dtype>/{x,y,g,dx}``: special values (zeros, poles, overflow, infinities, NaN,
  +-1 and beyond for erfinv, psi's branch thresholds), their results, a head gradient and the
  input gradient, per floating dtype; ``int/<op>/<dtype>/{x,y}`` for integer inputs.
* ``sweep/<op>/<dtype>/...``: a dense sweep (every float16 bit pattern; 20000 seeded values in
  float32 and float64) of the value and the gradient under a seeded head gradient, stored
  compactly: one 8-byte digest of the bits per block of ``BLOCK`` elements (``*_digest``) and
  every ``STRIDE``-th element in full (``*_some``) to show what differs. The inputs are
  regenerated from the seed; their digest is stored to catch a change of generator.
"""
import hashlib
import zlib

import numpy as np

OPS = ("gamma", "gammaln", "erfinv")
FLOATS = ("float16", "float32", "float64")
INTS = ("int8", "uint8", "int32", "int64")
N = 20000
BLOCK = 200
STRIDE = 20

_COMMON = [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -0.5, np.inf, -np.inf, np.nan]
SPECIAL = {
    "gamma": _COMMON + [
        -2.0, -100.0, -2.5, -1e-30, 1e-30, 1e-45, 1e-38, 1.5, 3.0, 9.0, 9.9, 10.0, 11.0, 35.0,
        35.05, 36.0, 171.6, 171.7, 172.0, 1e30, -1e30, -170.5, -185.5, -33.7, 7.3e-6, 4.2],
    "gammaln": _COMMON + [
        -2.5, -0.3, -10.5, -1e-8, 1e-8, -1e-30, 1e-30, 1e-45, 3.0, 9.999, 10.0, 10.001, 11.0,
        1e8, 1.1e8, 1e17, 1.1e17, 1e30, 4e36, 3e38, 2.5e305, 1e308, -1e30, -1e8 - 0.5,
        -33.25, 0.75, 7.5],
    "erfinv": _COMMON + [
        -2.0, 1.0000001, 0.3, -0.7, 1e-7, -1e-7, 9.99e-8, 1.01e-7, 1e-300, 1e-45,
        0.72932943352677462, 0.7293294, 0.7293295, -0.7293294, 0.99, -0.99, 0.999999,
        1 - 1e-10, 1 - 2.0 ** -53, -(1 - 2.0 ** -53), 1 - 2.0 ** -24, 1 - 2.0 ** -11,
        0.9999999999999, 1 - 1.2664165549e-14 * 2, 65504.0],
}
INT_VALUES = [-3, -2, -1, 0, 1, 2, 3, 5, 10, 13, 20, 21, 35, 100, 127]


def _seed(*parts):
    return zlib.crc32("/".join(parts).encode()) % 2 ** 31


def sweep_inputs(op, dtype):
    """The sweep's inputs: every float16 bit pattern, or ``N`` seeded values of ``dtype``."""
    if dtype == "float16":
        return np.arange(2 ** 16, dtype=np.uint16).view(np.float16)
    rng = np.random.RandomState(_seed("sweep", op, dtype))
    q = N // 4
    sign = np.where(rng.uniform(size=q) < 0.5, -1.0, 1.0)

    def log_uniform(lo, hi):
        # 2**k exactly (ldexp), not 10**u: NumPy's power differs between versions in the last bit
        return np.ldexp(rng.uniform(1, 2, q), rng.randint(lo, hi, q))
    if op == "erfinv":
        parts = [rng.uniform(-1, 1, q), rng.uniform(-1.05, 1.05, q),
                 sign * (1 - log_uniform(-54, -1)), sign * log_uniform(-30, -17)]
    else:
        top = 40 if dtype == "float32" else 180
        k = rng.randint(1, 60, q)
        parts = [rng.uniform(-top, top, q), rng.uniform(0, 12, q),
                 -k + rng.uniform(-0.5, 0.5, q),
                 sign * log_uniform(-34, 66 if op == "gammaln" else 8)]
    return np.concatenate(parts).astype(dtype)


def head(shape, dtype, *seed):
    return np.random.RandomState(_seed("head", *seed)).uniform(0.5, 2.0, shape).astype(dtype)


def digest(a):
    """One 8-byte digest (as uint64) of the bits of each block of ``BLOCK`` elements."""
    raw = np.ascontiguousarray(a).reshape(-1)
    out = [hashlib.blake2b(raw[i:i + BLOCK].tobytes(), digest_size=8).digest()
           for i in range(0, raw.size, BLOCK)]
    return np.frombuffer(b"".join(out), dtype=np.uint64)


def _forward_backward(mx, op, x_np, g_np):
    x = mx.nd.array(x_np, dtype=x_np.dtype)
    x.attach_grad()
    with mx.autograd.record():
        y = getattr(mx.nd, op)(x)
    y.backward(mx.nd.array(g_np, dtype=g_np.dtype))
    return y.asnumpy(), x.grad.asnumpy()


def record(mx):
    out = {}
    for op in OPS:
        for dtype in FLOATS:
            x = np.array(SPECIAL[op], dtype=dtype)
            g = head(x.shape, dtype, "special", op, dtype)
            y, dx = _forward_backward(mx, op, x, g)
            key = "special/%s/%s/" % (op, dtype)
            out.update({key + "x": x, key + "y": y, key + "g": g, key + "dx": dx})
        for dtype in INTS:
            vals = INT_VALUES if dtype != "uint8" else [v for v in INT_VALUES if v >= 0] + [255]
            x = np.array(vals, dtype=dtype)
            if dtype == "int64":
                x = np.concatenate([x, np.array([2 ** 40, -2 ** 40], dtype=dtype)])
            key = "int/%s/%s/" % (op, dtype)
            out[key + "x"] = x
            out[key + "y"] = getattr(mx.nd, op)(mx.nd.array(x, dtype=dtype)).asnumpy()
        for dtype in FLOATS:
            x = sweep_inputs(op, dtype)
            g = head(x.shape, dtype, "sweep", op, dtype)
            y, dx = _forward_backward(mx, op, x, g)
            key = "sweep/%s/%s/" % (op, dtype)
            out[key + "x_digest"] = digest(x)
            for name, a in (("y", y), ("dx", dx)):
                out[key + name + "_digest"] = digest(a)
                out[key + name + "_some"] = a[::STRIDE]
    return out
