"""``image.copyMakeBorder`` as MXNet 1.9.1 (OpenCV) computes it, written once against MXNet's
API (``record(mx)``): each border type with borders wider than the image, constant borders from
``value`` (rounded and saturated for uint8) and from per-channel ``values`` (fewer than the
channels: the rest 0), on uint8 and float32 images.

    /tmp/mxvenv/bin/python tests/data/mxnet_image/make_border_golden.py

records ``border_golden.npz``; tests/test_image.py replays ``record`` with trainer_cli."""
import numpy as np


def record(mx):
    out = {}
    img = mx.nd.array(np.arange(24).reshape(2, 4, 3), dtype="uint8")
    for kind in range(5):
        out["type%d" % kind] = mx.image.copyMakeBorder(img, 1, 3, 2, 5, type=kind,
                                                       value=7).asnumpy()
    for name, kwargs in (("values_short", {"values": (1, 2)}), ("values", {"values": (9, 8, 7)}),
                         ("saturated", {"value": 300.6}), ("rounded", {"value": 2.5}),
                         ("negative", {"value": -3})):
        out[name] = mx.image.copyMakeBorder(img, 1, 0, 2, 1, type=0, **kwargs).asnumpy()
    floats = mx.nd.array(np.arange(6.).reshape(2, 3, 1))
    out["float_value"] = mx.image.copyMakeBorder(floats, 1, 1, 1, 1, value=-1.5).asnumpy()
    out["float_reflect"] = mx.image.copyMakeBorder(floats, 2, 0, 4, 3, type=4).asnumpy()
    return out
