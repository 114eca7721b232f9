"""Cases of results that may share memory with their source, written once against MXNet's API
(``run_all(mx)`` with ``mx`` the mxnet or the trainer_cli module): each builds a source, takes a
result from it, writes into the result, and returns the source's values afterwards (the source
changed exactly where the result is a view of it). make_records.py records views.json."""
import numpy as np


def _source(mx, shape=(4, 3)):
    return mx.nd.array(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape))


def _write(result):
    result[:] = -1


CASES = {
    "getitem int": lambda mx, x: x[1],
    "getitem slice": lambda mx, x: x[1:3],
    "getitem slice of slice": lambda mx, x: x[1:4][0:2],
    "getitem column": lambda mx, x: x[:, 1],
    "getitem step": lambda mx, x: x[::2],
    "getitem all columns": lambda mx, x: x[1:3, :],
    "getitem first columns": lambda mx, x: x[:, 0:2],
    "getitem int then column": lambda mx, x: x[1][0:2],
    "getitem newaxis": lambda mx, x: x[None, 1:3],
    "getitem array index": lambda mx, x: x[mx.nd.array([0, 2])],
    "method reshape": lambda mx, x: x.reshape((3, 4)),
    "method reshape of slice": lambda mx, x: x[1:3].reshape((6,)),
    "method T": lambda mx, x: x.T,
    "method transpose": lambda mx, x: x.transpose(),
    "method flatten": lambda mx, x: x.flatten(),
    "method expand_dims": lambda mx, x: x.expand_dims(0),
    "method squeeze": lambda mx, x: x.expand_dims(0).squeeze(),
    "method swapaxes": lambda mx, x: x.swapaxes(0, 1),
    "method flip": lambda mx, x: x.flip(0),
    "method slice_axis": lambda mx, x: x.slice_axis(axis=0, begin=1, end=3),
    "method split": lambda mx, x: x.split(num_outputs=2, axis=0)[1],
    "method reshape_like": lambda mx, x: x.reshape_like(mx.nd.zeros((3, 4))),
    "method detach": lambda mx, x: x.detach(),
    "method copy": lambda mx, x: x.copy(),
    "method astype same dtype": lambda mx, x: x.astype("float32"),
    "method astype same dtype copy=False": lambda mx, x: x.astype("float32", copy=False),
    "method as_in_context same": lambda mx, x: x.as_in_context(mx.cpu()),
    "nd.reshape": lambda mx, x: mx.nd.reshape(x, (3, 4)),
    "nd.flatten": lambda mx, x: mx.nd.flatten(x),
    "nd.transpose": lambda mx, x: mx.nd.transpose(x),
    "nd.expand_dims": lambda mx, x: mx.nd.expand_dims(x, 0),
    "nd.slice_axis": lambda mx, x: mx.nd.slice_axis(x, axis=0, begin=1, end=3),
    "nd.slice": lambda mx, x: mx.nd.slice(x, begin=(1, None), end=(3, None)),
    "nd.split": lambda mx, x: mx.nd.split(x, num_outputs=2, axis=0)[0],
    "nd.identity": lambda mx, x: mx.nd.identity(x),
    "nd.Cast same dtype": lambda mx, x: mx.nd.Cast(x, dtype="float32"),
}


def run_all(mx):
    out = {}
    for name, take in CASES.items():
        x = _source(mx)
        _write(take(mx, x))
        out[name] = x.asnumpy().ravel().tolist()
    return out
