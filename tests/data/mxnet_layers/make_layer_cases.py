"""Forward values and gradients of Gluon layers from the real MXNet 1.9.1.

    /tmp/mxvenv/bin/python tests/data/mxnet_layers/make_layer_cases.py

For each case in CASES (a gluon.nn class, its arguments and an input shape) the layer is built,
initialized, its parameters set to seeded values, and ``sum(layer(x) * head)`` differentiated.
Writes beside itself ``cases.json`` (the cases) and ``layers.npz`` (per case: ``x``, ``head``,
``y``, ``dx`` and for each parameter ``p:<name>`` and ``g:<name>``, names as save_parameters
gives them), plus ``summary.txt``: what ``Block.summary`` printed for the network in SUMMARY.
"""
import contextlib
import io
import json
import os

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

HERE = os.path.dirname(os.path.abspath(__file__))

CASES = {
    "conv1d_transpose": ("Conv1DTranspose", dict(channels=4, kernel_size=3, strides=2, padding=1,
                                                  output_padding=1, in_channels=3), (2, 3, 5)),
    "conv2d_transpose": ("Conv2DTranspose", dict(channels=6, kernel_size=(3, 2), strides=(2, 1),
                                                  padding=(1, 0), output_padding=(1, 0),
                                                  dilation=(1, 2), groups=2, in_channels=4),
                         (2, 4, 4, 3)),
    "conv2d_transpose_nhwc": ("Conv2DTranspose", dict(channels=5, kernel_size=3, strides=2,
                                                       padding=1, layout="NHWC", in_channels=3),
                              (2, 4, 4, 3)),
    "conv3d_transpose": ("Conv3DTranspose", dict(channels=2, kernel_size=2, strides=2,
                                                  in_channels=3), (1, 3, 2, 3, 2)),
    "conv3d_transpose_ndhwc": ("Conv3DTranspose", dict(channels=4, kernel_size=(2, 3, 2),
                                                        strides=(1, 2, 1), padding=(0, 1, 0),
                                                        layout="NDHWC", in_channels=3),
                               (1, 3, 4, 3, 3)),
    "conv2d_nhwc": ("Conv2D", dict(channels=5, kernel_size=(3, 2), strides=(2, 1), padding=1,
                                   layout="NHWC", in_channels=3), (2, 6, 5, 3)),
    "conv2d_nhwc_groups": ("Conv2D", dict(channels=4, kernel_size=3, groups=2, layout="NHWC",
                                          in_channels=6), (1, 5, 4, 6)),
    "conv3d_ndhwc": ("Conv3D", dict(channels=4, kernel_size=2, padding=1, strides=2,
                                    layout="NDHWC", in_channels=3), (1, 4, 3, 5, 3)),
    "maxpool1d_nwc": ("MaxPool1D", dict(pool_size=3, strides=2, padding=1, layout="NWC"),
                      (2, 7, 3)),
    "avgpool1d_nwc": ("AvgPool1D", dict(pool_size=2, layout="NWC"), (2, 6, 3)),
    "avgpool2d_nhwc": ("AvgPool2D", dict(pool_size=(3, 2), strides=2, padding=1, ceil_mode=True,
                                         layout="NHWC", count_include_pad=False), (2, 7, 6, 3)),
    "maxpool2d_nhwc": ("MaxPool2D", dict(pool_size=2, layout="NHWC"), (2, 4, 6, 3)),
    "maxpool3d_ndhwc": ("MaxPool3D", dict(pool_size=2, layout="NDHWC"), (1, 4, 4, 4, 2)),
    "avgpool3d_ndhwc": ("AvgPool3D", dict(pool_size=2, strides=1, layout="NDHWC"), (1, 3, 3, 3, 2)),
    "globalavgpool2d_nhwc": ("GlobalAvgPool2D", dict(layout="NHWC"), (2, 3, 4, 5)),
    "globalmaxpool1d_nwc": ("GlobalMaxPool1D", dict(layout="NWC"), (2, 5, 3)),
    "globalmaxpool3d_ndhwc": ("GlobalMaxPool3D", dict(layout="NDHWC"), (1, 2, 3, 2, 4)),
    "instance_norm": ("InstanceNorm", dict(in_channels=3, scale=True), (2, 3, 4, 5)),
    "instance_norm_last_axis": ("InstanceNorm", dict(axis=-1, in_channels=3), (2, 5, 3)),
    "group_norm": ("GroupNorm", dict(num_groups=2), (2, 4, 3, 3)),
    "group_norm_one_group": ("GroupNorm", dict(), (3, 2, 5)),
    "reflection_pad2d": ("ReflectionPad2D", dict(padding=2), (1, 2, 4, 5)),
    "reflection_pad2d_uneven": ("ReflectionPad2D", dict(padding=(0, 0, 0, 0, 1, 2, 3, 1)),
                                (2, 1, 4, 5)),
}


def summary_net():
    """Conv, BatchNorm (non-trainable running statistics), parameterless layers, and a Dense
    sharing another's parameters."""
    net = gluon.nn.HybridSequential()
    with net.name_scope():
        net.add(gluon.nn.Conv2D(3, kernel_size=3, padding=1, in_channels=2))
        net.add(gluon.nn.BatchNorm(in_channels=3))
        net.add(gluon.nn.Activation("relu"))
        net.add(gluon.nn.MaxPool2D())
        net.add(gluon.nn.Dense(4, in_units=18))
        square = gluon.nn.Dense(4, in_units=4)
        net.add(square)
        net.add(gluon.nn.Dense(4, in_units=4, params=square.collect_params()))
    return net


def _channels_first(cls, kwargs):
    """MXNet 1.9.1 on the CPU cannot run channels-last convolutions ('could not create a
    descriptor for a dilated (de)convolution forward propagation primitive', and a shape check
    failure without MKLDNN); it does declare their weights (convolution: (O, *kernel, I/g);
    transposed: (I, *kernel, O/g)). Those cases are computed by the channels-first layer on the
    transposed input and weight, and the results transposed back."""
    layout = kwargs.get("layout", "")
    if not cls.startswith("Conv") or not layout.endswith("C"):
        return None
    first = dict(kwargs)
    del first["layout"]
    return getattr(gluon.nn, cls)(**first)


def _to_first(a):
    return a.transpose((0, a.ndim - 1) + tuple(range(1, a.ndim - 1)))


def _to_last(a):
    return a.transpose((0,) + tuple(range(2, a.ndim)) + (1,))


def main():
    rng = np.random.RandomState(3)
    arrays = {}
    for name, (cls, kwargs, shape) in CASES.items():
        layer = getattr(gluon.nn, cls)(**kwargs)
        layer.initialize()
        first = _channels_first(cls, kwargs)
        x = mx.nd.array(rng.uniform(-1, 1, size=shape))
        params = layer._collect_params_with_prefix()
        for key, param in params.items():
            value = rng.uniform(0.5, 1.5, size=param.shape) if key.endswith("gamma") else \
                rng.uniform(-1, 1, size=param.shape)
            if any(n == 0 for n in param.shape):  # deferred: known after the first forward
                with autograd.pause():
                    layer(x)
                value = rng.uniform(0.5, 1.5, size=param.shape) if key.endswith("gamma") else \
                    rng.uniform(-1, 1, size=param.shape)
            param.set_data(mx.nd.array(value))
        run, run_x = layer, x
        if first is not None:
            first.initialize()
            first.weight.set_data(_to_first(layer.weight.data()))
            first.bias.set_data(layer.bias.data())
            run, run_x = first, _to_first(x)
        run_x.attach_grad()
        with autograd.pause():
            out_shape = run(run_x).shape
        head = mx.nd.array(rng.uniform(-1, 1, size=out_shape))
        with autograd.record():
            y = run(run_x)
            loss = (y * head).sum()
        loss.backward()
        dx = run_x.grad
        grads = {key: p.grad() for key, p in run._collect_params_with_prefix().items()
                 if p.grad_req != "null"}
        if first is not None:
            y, head, dx = _to_last(y), _to_last(head), _to_last(dx)
            grads["weight"] = _to_last(grads["weight"])
        arrays.update({name + ":x": x.asnumpy(), name + ":head": head.asnumpy(),
                       name + ":y": y.asnumpy(), name + ":dx": dx.asnumpy()})
        for key, param in params.items():
            arrays["%s:p:%s" % (name, key)] = param.data().asnumpy()
        for key, grad in grads.items():
            arrays["%s:g:%s" % (name, key)] = grad.asnumpy()
    np.savez(os.path.join(HERE, "layers.npz"), **arrays)
    with open(os.path.join(HERE, "cases.json"), "w") as f:
        json.dump({"generated_by": "mxnet %s" % mx.__version__,
                   "cases": {k: {"cls": c, "kwargs": kw, "shape": s}
                             for k, (c, kw, s) in CASES.items()}}, f, indent=1)
        f.write("\n")

    net = summary_net()
    net.initialize()
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        net.summary(mx.nd.ones((2, 2, 4, 6)))
    with open(os.path.join(HERE, "summary.txt"), "w") as f:
        f.write(text.getvalue())


if __name__ == "__main__":
    main()
