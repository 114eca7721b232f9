"""Golden data for ``trainer export --format mxnet``, made by real MXNet 1.9.1.

For the built-in ``mlp`` and ``cnn`` models, built here layer for layer in MXNet Gluon, this
writes seeded weights (``<model>_weights.npz``, structural names), the ``.params`` file MXNet's own
``save_parameters`` writes for them (``<model>_mxnet.params``), fixed inputs, and MXNet's outputs
for those inputs after ``load_parameters`` of that file into a fresh network
(``<model>_outputs.npz``). tests/test_export.py exports the same weights from a run directory and
checks that the file is byte for byte MXNet's, and that this package's network, loading it,
gives MXNet's outputs.

Run in a venv with mxnet==1.9.1 (numpy<1.24):  python make_mxnet_export.py
"""
import hashlib
import json
import os

import mxnet as mx
import numpy as np
from mxnet.gluon import nn

HERE = os.path.dirname(os.path.abspath(__file__))

# The arguments tests/test_export.py gives the built-in models.
MODELS = {
    "mlp": {"args": {"hidden": [8, 6], "classes": 3}, "features": 5},
    "cnn": {"args": {"classes": 3, "channels": [2, 3], "image_size": 8}, "features": 64},
}


def mlp(hidden=(128, 64), classes=10, activation="relu", dropout=0.0):
    # trainer_cli/builtin_models/mlp.py
    net = nn.HybridSequential()
    with net.name_scope():
        for units in hidden:
            net.add(nn.Dense(units, activation=activation))
            if dropout:
                net.add(nn.Dropout(dropout))
        net.add(nn.Dense(classes))
    return net


def cnn(classes=10, channels=(16, 32), image_size=8, in_channels=1):
    # trainer_cli/builtin_models/cnn.py
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.HybridLambda(lambda F, x: x.reshape((-1, in_channels, image_size, image_size))))
        for c in channels:
            net.add(nn.Conv2D(c, kernel_size=3, padding=1, activation="relu"))
            net.add(nn.MaxPool2D(pool_size=2, strides=2))
        net.add(nn.Flatten())
        net.add(nn.Dense(64, activation="relu"))
        net.add(nn.Dense(classes))
    return net


def main():
    manifest = {}
    for seed, (name, spec) in enumerate(sorted(MODELS.items())):
        rng = np.random.RandomState(100 + seed)
        x = rng.uniform(-1, 1, size=(7, spec["features"])).astype(np.float32)
        net = globals()[name](**spec["args"])
        net.initialize()
        net(mx.nd.array(x))   # shapes the deferred parameters
        params = net._collect_params_with_prefix()
        weights = {key: rng.normal(0, 0.5, size=p.shape).astype(np.float32)
                   for key, p in sorted(params.items())}
        for key, value in weights.items():
            params[key].set_data(mx.nd.array(value))
        params_file = os.path.join(HERE, "%s_mxnet.params" % name)
        net.save_parameters(params_file)
        fresh = globals()[name](**spec["args"])
        fresh.load_parameters(params_file)
        out = fresh(mx.nd.array(x)).asnumpy()
        np.savez(os.path.join(HERE, "%s_weights.npz" % name), **weights)
        np.savez(os.path.join(HERE, "%s_outputs.npz" % name), x=x, out=out)
        with open(params_file, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        manifest[name] = {"args": spec["args"], "features": spec["features"],
                          "params_sha256": digest, "names": sorted(weights)}
    manifest["mxnet"] = mx.__version__
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
