"""Write the MXNet binary files under tests/data/mxnet_files/ with the real MXNet 1.9.1.

Run with the separate MXNet venv (never a dependency of trainer_cli):

    python -m venv /tmp/mxvenv && /tmp/mxvenv/bin/pip install mxnet==1.9.1 'numpy<1.24'
    /tmp/mxvenv/bin/python tests/data/mxnet_files/make_mxnet_files.py

It writes, beside itself:
- ``*.nd``: files written by ``mx.nd.save`` (lists, dicts, every dtype MXNet's Python side knows,
  bfloat16 apart, a 0-d and a zero-size array in numpy-shape mode, row_sparse and CSR arrays, an
  empty dict);
- ``net.params`` / ``net_full.params`` / ``net_fp64.params``: a small Gluon network's
  ``save_parameters`` / ``collect_params().save`` output after one training-mode forward pass (so
  BatchNorm's running statistics are not their initial values);
- ``manifest.json``: for every file, what MXNet's ``nd.load`` returns (names, shapes, dtype names,
  values as dense lists), and for the networks an input and MXNet's inference output, so the tests
  compare against what MXNet computed rather than against a second copy of this script.
"""
import json
import os

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

HERE = os.path.dirname(os.path.abspath(__file__))
BF16 = np.dtype([("bfloat16", np.uint16)])


def values(shape, dtype, seed):
    """Small exact values (multiples of 1/4) so every dtype holds them without rounding."""
    size = int(np.prod(shape)) if shape else 1
    base = (np.arange(size) * 7 + seed) % 23
    if dtype == "bool":
        return (base % 3 == 0).reshape(shape)
    if dtype in ("uint8",):
        return base.astype(dtype).reshape(shape)
    if dtype in ("int8", "int32", "int64"):
        return (base - 11).astype(dtype).reshape(shape)
    return ((base - 11) * 0.25).astype(dtype).reshape(shape)


def describe(loaded):
    def one(arr):
        dense = arr.tostype("default") if arr.stype != "default" else arr
        if arr.dtype == BF16:
            as_float = dense.astype("float32").asnumpy()
            return {"shape": list(arr.shape), "dtype": "bfloat16", "stype": arr.stype,
                    "values": as_float.ravel().tolist()}
        host = dense.asnumpy()
        return {"shape": list(arr.shape), "dtype": np.dtype(arr.dtype).name, "stype": arr.stype,
                "values": host.ravel().astype(np.float64 if host.dtype != np.bool_ else np.bool_).tolist()}
    if isinstance(loaded, dict):
        return {"kind": "dict", "names": list(loaded), "arrays": [one(v) for v in loaded.values()]}
    return {"kind": "list", "names": None, "arrays": [one(v) for v in loaded]}


def save_nd(manifest, name, data, np_shape=False):
    path = os.path.join(HERE, name)
    with mx.util.np_shape(np_shape):
        mx.nd.save(path, data() if callable(data) else data)
        manifest[name] = describe(mx.nd.load(path))
        manifest[name]["np_shape"] = np_shape


def build_net(prefix=None):
    net = gluon.nn.HybridSequential(prefix=prefix)
    with net.name_scope():
        net.add(gluon.nn.Conv2D(3, kernel_size=3, padding=1, in_channels=2))
        net.add(gluon.nn.BatchNorm(in_channels=3))
        net.add(gluon.nn.Activation("relu"))
        net.add(gluon.nn.Dense(4, in_units=3 * 4 * 4))
    return net


def main():
    mx.random.seed(7)
    np.random.seed(7)
    manifest = {}
    dtypes = ["float32", "float64", "float16", "uint8", "int32", "int8", "int64", "bool"]
    typed = [mx.nd.array(values((2, 3), dt, i), dtype=dt) for i, dt in enumerate(dtypes)]
    save_nd(manifest, "list_dtypes.nd", typed)
    save_nd(manifest, "bfloat16.nd", [mx.nd.array(values((5,), "float32", 3)).astype(BF16)])
    save_nd(manifest, "dict.nd", {"weight": mx.nd.array(values((3, 2, 2), "float32", 1)),
                                  "bias": mx.nd.array(values((3,), "float32", 2)),
                                  "arg:fc_weight": mx.nd.array(values((1, 4), "float64", 5), dtype="float64")})
    save_nd(manifest, "single.nd", mx.nd.array(values((4,), "float32", 9)))
    save_nd(manifest, "empty_dict.nd", {})
    save_nd(manifest, "np_shape.nd", lambda: [mx.nd.array(np.array(3.5, dtype=np.float32)),
                                              mx.nd.zeros((0, 3)),
                                              mx.nd.array(values((2, 2), "float32", 4))],
            np_shape=True)
    row_sparse = mx.nd.sparse.row_sparse_array(
        (values((2, 3), "float32", 6), np.array([1, 3])), shape=(5, 3))
    csr = mx.nd.sparse.csr_matrix(
        (values((4,), "float32", 8), np.array([0, 2, 1, 3]), np.array([0, 2, 2, 4])), shape=(3, 4))
    save_nd(manifest, "sparse.nd", {"rs": row_sparse, "csr": csr})

    x = mx.nd.array(values((2, 2, 4, 4), "float32", 11))
    for name, cast in (("net.params", None), ("net_fp64.params", "float64")):
        net = build_net(prefix="net_")
        net.initialize(mx.init.Xavier(), ctx=mx.cpu())
        with autograd.record():  # moves BatchNorm's running statistics off their initial values
            net(x)
        if cast:
            net.cast(cast)
        net.save_parameters(os.path.join(HERE, name))
        out = net(x.astype(cast) if cast else x)
        manifest[name] = describe(mx.nd.load(os.path.join(HERE, name)))
        manifest[name].update(input=x.asnumpy().ravel().tolist(), input_shape=list(x.shape),
                              output=out.astype("float64").asnumpy().ravel().tolist(),
                              output_shape=list(out.shape))
        if cast is None:
            net.collect_params().save(os.path.join(HERE, "net_full.params"))
            full = describe(mx.nd.load(os.path.join(HERE, "net_full.params")))
            full.update({key: manifest[name][key] for key in
                         ("input", "input_shape", "output", "output_shape")})
            manifest["net_full.params"] = full
    manifest["_generated_by"] = "mxnet %s, numpy %s" % (mx.__version__, np.__version__)
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
