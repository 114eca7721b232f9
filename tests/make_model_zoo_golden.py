"""Writes tests/data/model_zoo_golden.{json,npz} with real MXNet 1.9.1 (never run by the tests).

    python -m venv /tmp/mxvenv && /tmp/mxvenv/bin/pip install mxnet==1.9.1 'numpy<1.24'
    /tmp/mxvenv/bin/python tests/make_model_zoo_golden.py

For every architecture of the model zoo: each parameter's name (as collect_params gives it) and
shape, built with classes=10 at the input size the tests run it at (the first Dense layer's
shape depends on it; every other shape is that of MXNet's pretrained files); for the FORWARD cases, the output of one forward
(inference mode) at the test size, on the weights model_zoo_cases.weight gives each parameter by
its structural name (the names save_parameters writes).
"""
import json
import os
import sys

import mxnet as mx
import numpy as np
from mxnet.gluon.model_zoo import vision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_zoo_cases import ALL_MODELS, CLASSES, FORWARD, image, input_size, weight  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def _built(name, size):
    net = vision.get_model(name, classes=CLASSES)
    net.initialize()
    net(mx.nd.zeros((1, 3, size, size)))  # deferred shapes; the first Dense layer's depends on size
    return net


def main():
    tested, outputs = {}, {}
    for name in ALL_MODELS:
        size = input_size(name)
        net = _built(name, size)
        # Without the network's own prefix (resnetv10_, ...): it counts the networks of the
        # class built before in this process.
        tested[name] = [[k[len(net.prefix):], list(p.shape)] for k, p in net.collect_params().items()]
        if name in FORWARD:
            for key, param in net._collect_params_with_prefix().items():
                param.set_data(mx.nd.array(weight(key, param.shape)))
            outputs[name] = net(mx.nd.array(image(name, size))).asnumpy()
        print(name, len(tested[name]), flush=True)
    with open(os.path.join(OUT, "model_zoo_golden.json"), "w") as f:
        json.dump({"mxnet": mx.__version__, "classes": CLASSES, "params_at_input_size": tested},
                  f, separators=(",", ":"))
    np.savez(os.path.join(OUT, "model_zoo_golden.npz"), **outputs)


if __name__ == "__main__":
    main()
