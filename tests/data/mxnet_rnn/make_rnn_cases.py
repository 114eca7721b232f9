"""Outputs, final states and gradients of Gluon's recurrent layers and cells from MXNet 1.9.1.

    /work/mxvenv/bin/python tests/data/mxnet_rnn/make_rnn_cases.py

The cases are tests/rnn_cases.py's. Each network is built, its parameters set to seeded values
(in the order of their save_parameters names), and
``sum(output * head) + sum_i sum(state_i * head_i)`` differentiated in training mode. Writes
beside itself ``rnn.npz`` (per case ``x``, ``valid``, begin states ``s:i``, outputs ``y`` or
``y:i`` per step, out states ``o:i``, their heads ``hy``/``hy:i``/``ho:i``, gradients ``dx``,
``ds:i``, and per parameter ``p:<name>``/``g:<name>``), ``cases.json`` (what was generated) and
the parameter files MXNet writes for two of the layers (``<case>.params``), and the losses and
final parameters of ``language_model_flow`` (``lm:``). MXNet 1.9.1
cannot train an LSTM with a projection on the CPU: those cases hold its forward only.
"""
import json
import os
import sys

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
from rnn_cases import CELL_CASES, LAYER_CASES, language_model_flow  # noqa: E402

SAVED = ("lstm_2layer_bi", "gru")
FORWARD_ONLY = ("lstm_projection", "lstm_projection_bi")


def _set_params(net, rng, arrays, name):
    for key, param in net._collect_params_with_prefix().items():
        value = rng.uniform(-0.5, 0.5, size=param.shape).astype(np.float32)
        param.set_data(mx.nd.array(value))
        arrays["%s:p:%s" % (name, key)] = value


def _run(net, name, call, x, begin, rng, arrays, forward_only=False):
    if forward_only:
        with autograd.pause():
            y, out_states = call()
        arrays[name + ":x"] = x.asnumpy()
        arrays[name + ":y"] = y.asnumpy()
        for i, a in enumerate(out_states):
            arrays["%s:o:%d" % (name, i)] = a.asnumpy()
        for i, s in enumerate(begin):
            arrays["%s:s:%d" % (name, i)] = s.asnumpy()
        return
    x.attach_grad()
    for s in begin:
        s.attach_grad()
    with autograd.pause():
        y, out_states = call()
    ys = y if isinstance(y, list) else [y]
    heads = [mx.nd.array(rng.uniform(-1, 1, size=a.shape)) for a in ys]
    state_heads = [mx.nd.array(rng.uniform(-1, 1, size=a.shape)) for a in out_states]
    with autograd.record():
        y, out_states = call()
        ys = y if isinstance(y, list) else [y]
        loss = sum((a * h).sum() for a, h in zip(ys, heads))
        for a, h in zip(out_states, state_heads):
            loss = loss + (a * h).sum()
    loss.backward()
    arrays[name + ":x"] = x.asnumpy()
    if isinstance(y, list):
        for i, (a, h) in enumerate(zip(ys, heads)):
            arrays["%s:y:%d" % (name, i)] = a.asnumpy()
            arrays["%s:hy:%d" % (name, i)] = h.asnumpy()
    else:
        arrays[name + ":y"] = y.asnumpy()
        arrays[name + ":hy"] = heads[0].asnumpy()
    for i, (a, h) in enumerate(zip(out_states, state_heads)):
        arrays["%s:o:%d" % (name, i)] = a.asnumpy()
        arrays["%s:ho:%d" % (name, i)] = h.asnumpy()
    arrays[name + ":dx"] = x.grad.asnumpy()
    for i, s in enumerate(begin):
        arrays["%s:s:%d" % (name, i)] = s.asnumpy()
        arrays["%s:ds:%d" % (name, i)] = s.grad.asnumpy()
    for key, param in net._collect_params_with_prefix().items():
        arrays["%s:g:%s" % (name, key)] = param.grad().asnumpy()


def layer_case(name, rng, arrays):
    cls, kwargs, shape, with_states = LAYER_CASES[name]
    layer = getattr(gluon.rnn, cls)(**kwargs)
    layer.initialize()
    x = mx.nd.array(rng.uniform(-1, 1, size=shape))
    with autograd.pause():
        layer(x)        # deferred shapes become known
    _set_params(layer, rng, arrays, name)
    batch = shape[kwargs.get("layout", "TNC").find("N")]
    begin = []
    if with_states:
        begin = [mx.nd.array(rng.uniform(-1, 1, size=info["shape"]))
                 for info in layer.state_info(batch)]

    def call():
        if with_states:
            return layer(x, begin)
        return layer(x), []
    # MXNet 1.9.1 has no CPU backward for the LSTM's projection: its forward only.
    _run(layer, name, call, x, begin, rng, arrays, forward_only=name in FORWARD_ONLY)
    if name in SAVED:
        layer.save_parameters(os.path.join(HERE, name + ".params"))


def cell_case(name, rng, arrays):
    build, length, shape, layout, merge, valid, with_states = CELL_CASES[name]
    cell = build(gluon.rnn)
    cell.initialize()
    x = mx.nd.array(rng.uniform(-1, 1, size=shape))
    valid_nd = mx.nd.array(valid) if valid is not None else None
    with autograd.pause():
        cell.unroll(length, x, layout=layout, merge_outputs=merge, valid_length=valid_nd)
    _set_params(cell, rng, arrays, name)
    batch = shape[layout.find("N")]
    begin = []
    if with_states:
        begin = [mx.nd.array(rng.uniform(-1, 1, size=info["shape"]))
                 for info in cell.state_info(batch)]
    if valid is not None:
        arrays[name + ":valid"] = np.asarray(valid, dtype=np.float32)

    def call():
        return cell.unroll(length, x, begin_state=begin if with_states else None,
                           layout=layout, merge_outputs=merge, valid_length=valid_nd)
    _run(cell, name, call, x, begin, rng, arrays)


def lm_flow(rng, arrays):
    tokens = rng.randint(0, 7, size=(4, 6, 3))
    shapes = {"rnn._unfused.0.i2h_weight": (24, 7), "rnn._unfused.0.h2h_weight": (24, 6),
              "rnn._unfused.0.i2h_bias": (24,), "rnn._unfused.0.h2h_bias": (24,),
              "rnn._unfused.1.i2h_weight": (24, 6), "rnn._unfused.1.h2h_weight": (24, 6),
              "rnn._unfused.1.i2h_bias": (24,), "rnn._unfused.1.h2h_bias": (24,),
              "dense.weight": (7, 6), "dense.bias": (7,)}
    init = {k: rng.uniform(-0.5, 0.5, size=s).astype(np.float32) for k, s in shapes.items()}
    losses, final = language_model_flow(mx, tokens, init)
    arrays["lm:tokens"] = tokens.astype(np.int64)
    arrays["lm:losses"] = np.asarray(losses, dtype=np.float32)
    for key in init:
        arrays["lm:init:" + key] = init[key]
        arrays["lm:final:" + key] = final[key]


def main():
    rng = np.random.RandomState(7)
    arrays = {}
    for name in LAYER_CASES:
        layer_case(name, rng, arrays)
    for name in CELL_CASES:
        cell_case(name, rng, arrays)
    lm_flow(rng, arrays)
    np.savez_compressed(os.path.join(HERE, "rnn.npz"), **arrays)
    with open(os.path.join(HERE, "cases.json"), "w") as f:
        json.dump({"generated_by": "mxnet %s" % mx.__version__,
                   "layers": sorted(LAYER_CASES), "cells": sorted(CELL_CASES),
                   "params_files": ["%s.params" % n for n in SAVED],
                   "forward_only": list(FORWARD_ONLY)}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
