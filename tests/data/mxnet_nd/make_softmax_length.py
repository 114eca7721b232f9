"""Real MXNet 1.9.1's masked softmax (``softmax(data, length, use_length=True)``): values and
input gradients, for tests/test_softmax_length.py.

Run in a venv with MXNet 1.9.1:  python make_softmax_length.py  (writes softmax_length.json)
"""
import json
import os

import numpy as np
import mxnet as mx
from mxnet import autograd, nd

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = [  # (data shape, axis, lengths, temperature)
    ((2, 4), -1, [2, 3], None),
    ((2, 4), -1, [2, 3], 2.0),
    ((2, 3, 4), -1, [[1, 2, 3], [4, 0, 2]], None),
    ((2, 3, 4), 1, [[1, 2, 3, 1], [3, 0, 2, 1]], None),
    ((2, 3, 4), 0, [[1, 2, 0, 1], [2, 1, 2, 1], [0, 0, 1, 2]], None),
]


def main():
    out = []
    for shape, axis, lengths, temperature in CASES:
        x = nd.array(np.arange(np.prod(shape)).reshape(shape) / 4 - 1)
        head = nd.array(np.cos(np.arange(np.prod(shape))).reshape(shape))
        x.attach_grad()
        kwargs = {} if temperature is None else {"temperature": temperature}
        with autograd.record():
            y = nd.softmax(x, nd.array(lengths, dtype="int32"), axis=axis, use_length=True,
                           **kwargs)
        y.backward(head)
        out.append({"shape": list(shape), "axis": axis, "lengths": lengths,
                    "temperature": temperature, "value": y.asnumpy().tolist(),
                    "grad": x.grad.asnumpy().tolist()})
    with open(os.path.join(HERE, "softmax_length.json"), "w") as f:
        json.dump({"mxnet": mx.__version__, "cases": out}, f, indent=1)


if __name__ == "__main__":
    main()
