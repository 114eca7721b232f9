"""Records MXNet 1.9.1's values and gradients for every sample of tests/op_registry.py and for its
LAYERS. Run it with the real MXNet (numpy < 1.24), from anywhere:

    /work/mxvenv/bin/python tests/data/mxnet_ops/make_op_reference.py

It writes beside itself ``reference.npz`` (the arrays, packed one flat array per dtype) and
``reference.json`` (where each array lies: ``op_registry.unpack``). Per sample and dtype (key
``NAME/DTYPE``): ``KEY/in<i>`` the inputs, ``KEY/out<k>`` the outputs and, where the sample has
inputs to differentiate and the dtype is not float16, ``KEY/head<k>`` (the head gradients,
uniform in [0.5, 1.5)) and ``KEY/grad<i>`` (the gradient of ``sum(out_k * head_k)`` for each
``wrt`` input, under ``autograd.record()``). reference.json says per key whether MXNet could
differentiate it (``"grad": "ok"`` or MXNet's error). Per layer (key ``layer/NAME``): ``x``,
``head``, ``y``, ``dx``, and per parameter ``p:<name>`` and ``g:<name>``. It also writes the
public names of MXNet's ``nd`` and ``nd.random`` into ../mxnet_nd/.
"""
import json
import os
import sys
import zlib

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon, nd

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
import op_registry  # noqa: E402


def _outputs(res):
    return [res] if isinstance(res, nd.NDArray) else list(res)


def _first_line(err):
    lines = [ln for ln in str(err).strip().splitlines() if "MXNetError:" in ln] or [str(err)]
    return lines[-1].strip()[:300]


def run_sample(sample, dtype, out, meta):
    key = sample.key(dtype)
    raw = sample.make(dtype)
    arrays = [nd.array(a, dtype=a.dtype) for a in raw]
    wrt = sample.wrt if dtype != "float16" else []
    for i in wrt:
        arrays[i].attach_grad()
    info = {}
    res = None
    if wrt:
        try:
            with autograd.record(train_mode=sample.train):
                res = _outputs(sample.mx_call(nd, *arrays))
        except mx.base.MXNetError as err:  # MXNet cannot record this call
            info["grad"] = _first_line(err)
            wrt = []
    if res is None:
        with autograd.train_mode() if sample.train else autograd.predict_mode():
            res = _outputs(sample.mx_call(nd, *arrays))
    for i, a in enumerate(raw):
        out["%s/in%d" % (key, i)] = a
    for k, r in enumerate(res):
        out["%s/out%d" % (key, k)] = r.asnumpy()
    info["outputs"] = len(res)
    if sample.wrt and dtype != "float16":
        rng = np.random.RandomState(zlib.crc32(key.encode()) % 2**31)
        heads = [nd.array(rng.uniform(0.5, 1.5, size=r.shape), dtype=r.dtype) for r in res]
        for k, h in enumerate(heads):
            out["%s/head%d" % (key, k)] = h.asnumpy()
    if wrt:
        try:
            autograd.backward(res, heads, train_mode=sample.train)
            for i in wrt:
                out["%s/grad%d" % (key, i)] = arrays[i].grad.asnumpy()
            info["grad"] = "ok"
        except mx.base.MXNetError as err:
            info["grad"] = _first_line(err)
    meta[key] = info


def run_layer(name, cls, kwargs, shape, out):
    rng = np.random.RandomState(zlib.crc32(name.encode()) % 2**31)
    layer = getattr(gluon.nn, cls)(**kwargs)
    layer.initialize()
    if shape is None:
        x = nd.array(op_registry.EMBEDDING_INDICES)
    else:
        x = nd.array(rng.uniform(-1, 1, size=shape).astype(np.float32))
        x.attach_grad()
    with autograd.pause():
        layer(x)  # deferred shapes
    params = layer._collect_params_with_prefix()
    for key, param in sorted(params.items()):
        lo, hi = (0.5, 1.5) if key.endswith(("gamma", "running_var")) else (-1, 1)
        param.set_data(nd.array(rng.uniform(lo, hi, size=param.shape).astype(np.float32)))
        out["layer/%s/p:%s" % (name, key)] = param.data().asnumpy()
    train = cls != "Dropout"
    with autograd.record(train_mode=train):
        y = layer(x)
    head = nd.array(rng.uniform(0.5, 1.5, size=y.shape).astype(np.float32))
    y.backward(head, train_mode=train)
    out["layer/%s/x" % name] = x.asnumpy()
    out["layer/%s/head" % name] = head.asnumpy()
    out["layer/%s/y" % name] = y.asnumpy()
    if shape is not None:
        out["layer/%s/dx" % name] = x.grad.asnumpy()
    for key, param in params.items():
        if param.grad_req != "null":
            out["layer/%s/g:%s" % (name, key)] = param.grad().asnumpy()


def main():
    out, meta, failed = {}, {}, []
    for name, sample in sorted(op_registry.SAMPLES.items()):
        for dtype in sample.dtypes:
            try:
                run_sample(sample, dtype, out, meta)
            except Exception as err:  # report every sample MXNet cannot run, then stop
                failed.append("%s: %s" % (sample.key(dtype), _first_line(err)))
    for name, (cls, kwargs, shape) in sorted(op_registry.LAYERS.items()):
        try:
            run_layer(name, cls, kwargs, shape, out)
        except Exception as err:
            failed.append("layer %s: %s" % (name, _first_line(err)))
    if failed:
        sys.exit("MXNet could not run:\n" + "\n".join(failed))
    # The public names of MXNet's nd and nd.random (docs/compat.md must account for each one
    # trainer_cli's nd lacks: tests/test_nd_names.py).
    names = os.path.join(HERE, "..", "mxnet_nd")
    with open(os.path.join(names, "mxnet_nd_names.txt"), "w") as f:
        f.write("\n".join(sorted(n for n in dir(nd) if not n.startswith("_"))) + "\n")
    with open(os.path.join(names, "mxnet_nd_random_names.txt"), "w") as f:
        f.write("\n".join(sorted(n for n in dir(nd.random) if not n.startswith("_"))) + "\n")
    flat, index = op_registry.pack(out)
    np.savez_compressed(os.path.join(HERE, "reference.npz"), **flat)
    with open(os.path.join(HERE, "reference.json"), "w") as f:
        json.dump({"generated_by": "mxnet %s" % mx.__version__, "samples": meta,
                   "arrays": index}, f, indent=0, sort_keys=True, separators=(",", ":"))
        f.write("\n")
    print("wrote %d arrays (mxnet %s)" % (len(out), mx.__version__), file=sys.stderr)


if __name__ == "__main__":
    main()
