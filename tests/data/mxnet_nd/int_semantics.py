"""Integer arrays as MXNet 1.9.1 computes them, written once against MXNet's API
(``run_all(mx)``): an operator on an integer array keeps its dtype. A scalar is converted to
that dtype first (C's conversion: 0.5 -> 0, 300 -> 44 in uint8), division truncates towards
zero, sums and means wrap and truncate in the dtype, and a floating function (sqrt, exp, ...)
is computed in float32 and converted back (NaN and out-of-range values become the type's
minimum through a 32-bit integer, as x86 converts).

    /tmp/mxvenv/bin/python tests/data/mxnet_nd/make_records.py

records ``int_semantics.json``; tests/test_int_semantics.py replays the cases with trainer_cli.
No case divides by zero (MXNet's process dies of SIGFPE there)."""
import numpy as np

DTYPES = ("uint8", "int8", "int32", "int64")
VALUES = {"uint8": [0, 1, 2, 200, 255, 7, 128, 99],
          "int8": [0, 1, -2, 100, 127, 7, -128, -99],
          "int32": [0, 1, -2, 100, 2147483647, 7, -2147483648, -99999],
          "int64": [0, 1, -2, 100, 2 ** 40 + 3, 7, -(2 ** 40), -99999]}
DIVISORS = [1, 2, 3, 4, 5, 6, 7, 9]
POSITIVE = [1, 2, 3, 100, 120, 7, 50, 9]

CASES = {
    "x + 300": lambda nd, x: x + 300,
    "x + 0.5": lambda nd, x: x + 0.5,
    "x - 1.7": lambda nd, x: x - 1.7,
    "x * 0.5": lambda nd, x: x * 0.5,
    "x * 3": lambda nd, x: x * 3,
    "x / 2": lambda nd, x: x / 2,
    "x / 255": lambda nd, x: x / 255,
    "x / 2.9": lambda nd, x: x / 2.9,
    "x % 3": lambda nd, x: x % 3,
    "x ** 2": lambda nd, x: x ** 2,
    "300 - x": lambda nd, x: 300 - x,
    "2.5 * x": lambda nd, x: 2.5 * x,
    "-x": lambda nd, x: -x,
    "x / d": lambda nd, x: x / nd.array(DIVISORS, dtype=x.dtype),
    "x * d": lambda nd, x: x * nd.array(DIVISORS, dtype=x.dtype),
    "x - d": lambda nd, x: x - nd.array(DIVISORS, dtype=x.dtype),
    "1000 / d": lambda nd, x: 1000 / nd.array(DIVISORS, dtype=x.dtype),
    "x.sum()": lambda nd, x: x.sum(),
    "x.mean()": lambda nd, x: x.mean(),
    "x.prod()": lambda nd, x: nd.array(DIVISORS, dtype=x.dtype).prod(),
    "x.reshape(2,4).sum(axis=1)": lambda nd, x: x.reshape((2, 4)).sum(axis=1),
    "x.reshape(2,4).mean(axis=0)": lambda nd, x: x.reshape((2, 4)).mean(axis=0),
    "sqrt(p)": lambda nd, x: nd.sqrt(nd.array(POSITIVE, dtype=x.dtype)),
    "sqrt(x)": lambda nd, x: nd.sqrt(x),
    "exp(d)": lambda nd, x: nd.exp(nd.array(DIVISORS, dtype=x.dtype)),
    "log(p)": lambda nd, x: nd.log(nd.array(POSITIVE, dtype=x.dtype)),
    "sin(x)": lambda nd, x: nd.sin(x),
    "tanh(x)": lambda nd, x: nd.tanh(x),
    "sigmoid(x)": lambda nd, x: nd.sigmoid(x),
    "square(d)": lambda nd, x: nd.square(nd.array(DIVISORS, dtype=x.dtype)),
    "abs(x)": lambda nd, x: nd.abs(x),
    "relu(x)": lambda nd, x: nd.relu(x),
    "x += 0.5": lambda nd, x: _inplace(x, "__iadd__", 0.5),
    "x *= 2": lambda nd, x: _inplace(x, "__imul__", 2),
    "x /= 2": lambda nd, x: _inplace(x, "__itruediv__", 2),
}


def _inplace(x, method, value):
    y = getattr(x, method)(value)
    return x if y is None else y


def run_all(mx):
    out = {}
    for dtype in DTYPES:
        for name, case in CASES.items():
            x = mx.nd.array(np.array(VALUES[dtype], dtype=dtype), dtype=dtype)
            r = case(mx.nd, x)
            out["%s %s" % (dtype, name)] = {"dtype": np.dtype(r.dtype).name,
                                           "values": [int(v) for v in r.asnumpy().ravel()]}
    return out
