"""Cases of ``nd.image`` written once against MXNet 1.9.1's API: ``record(mx)`` runs them with
``mx`` (the real MXNet, or trainer_cli) and returns a dict of NumPy arrays: each operator's
values for several dtypes, layouts and options, and the gradients of a weighted sum of the
outputs where the operator has one. The random operators are recorded where their draw is
fixed (``min_factor == max_factor``); their distributions are tested in tests/test_nd_image.py.
"""
import numpy as np

DTYPES = ("uint8", "int8", "int32", "float16", "float32", "float64")


def _inputs():
    rng = np.random.RandomState(7)
    u8 = rng.randint(0, 256, size=(6, 7, 3))
    frac = rng.uniform(0, 1, size=(6, 7, 3))
    return {
        "u8": u8.astype("uint8"),
        "i8": (u8 // 2).astype("int8"),
        "i32": (u8 * 3 - 100).astype("int32"),
        "f16": (u8 + frac).astype("float16"),
        "f32": (u8 + frac).astype("float32"),
        "f64": (u8 + frac).astype("float64"),
        "gray": rng.randint(0, 256, size=(5, 4, 1)).astype("uint8"),
        "grayf": rng.uniform(0, 255, size=(5, 4, 1)).astype("float32"),
        "batch": rng.randint(0, 256, size=(2, 5, 6, 3)).astype("uint8"),
        "batchf": rng.uniform(0, 255, size=(2, 5, 6, 3)).astype("float32"),
        "big": rng.randint(0, 256, size=(13, 17, 3)).astype("uint8"),
        "bigf": rng.uniform(0, 255, size=(13, 17, 3)).astype("float32"),
        "bigd": rng.uniform(0, 255, size=(13, 17, 3)).astype("float64"),
        "even": rng.randint(0, 256, size=(12, 18, 3)).astype("uint8"),
        "evenf": rng.uniform(0, 255, size=(12, 18, 3)).astype("float32"),
        "evend": rng.uniform(0, 255, size=(12, 18, 3)).astype("float64"),
        "chw": rng.uniform(0, 1, size=(3, 4, 5)).astype("float32"),
        "nchw": rng.uniform(0, 1, size=(2, 3, 4, 5)).astype("float32"),
        "c1hw": rng.uniform(0, 1, size=(1, 4, 5)).astype("float32"),
        "chw64": rng.uniform(0, 1, size=(3, 4, 5)).astype("float64"),
        "chw16": rng.uniform(0, 1, size=(3, 4, 5)).astype("float16"),
        "chw_u8": rng.randint(0, 256, size=(3, 4, 5)).astype("uint8"),
        "chw_i32": rng.randint(-300, 300, size=(3, 4, 5)).astype("int32"),
    }


def _grad(mx, fn, x):
    """(value, gradient of sum(w * fn(x))) with fixed weights w."""
    data = mx.nd.array(x, dtype=x.dtype)
    data.attach_grad()
    with mx.autograd.record():
        out = fn(data)
        w = np.linspace(-1.5, 2.0, out.size).reshape(out.shape).astype(x.dtype)
        loss = (out * mx.nd.array(w, dtype=x.dtype)).sum()
    loss.backward()
    return out.asnumpy(), data.grad.asnumpy()


def record(mx):
    I = mx.nd.image
    X = _inputs()
    nd = lambda k: mx.nd.array(X[k], dtype=X[k].dtype)  # noqa: E731
    out = {}
    short = {"uint8": "u8", "int8": "i8", "int32": "i32", "float16": "f16", "float32": "f32",
             "float64": "f64"}

    # to_tensor (MXNet's backward fails on its own shape check: values only)
    for dt, k in short.items():
        out["to_tensor_" + k] = I.to_tensor(nd(k)).asnumpy()
    for k in ("gray", "batch", "batchf"):
        out["to_tensor_" + k] = I.to_tensor(nd(k)).asnumpy()

    # normalize
    m3, s3 = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    out["normalize_chw"] = I.normalize(nd("chw"), mean=m3, std=s3).asnumpy()
    out["normalize_chw_scalar"] = I.normalize(nd("chw"), mean=0.3, std=0.7).asnumpy()
    out["normalize_nchw"] = I.normalize(nd("nchw"), mean=m3, std=s3).asnumpy()
    out["normalize_c1hw"] = I.normalize(nd("c1hw"), mean=0.25, std=1.5).asnumpy()
    out["normalize_chw64"] = I.normalize(nd("chw64"), mean=m3, std=s3).asnumpy()
    out["normalize_chw16"] = I.normalize(nd("chw16"), mean=m3, std=s3).asnumpy()
    # in range of uint8 (out of it MXNet's cast is undefined: tested apart)
    out["normalize_chw_u8"] = I.normalize(nd("chw_u8"), mean=(0, 0.5, 0),
                                          std=(1.5, 2, 3)).asnumpy()
    out["normalize_chw_i32"] = I.normalize(nd("chw_i32"), mean=(1.5, -2, 3),
                                           std=(0.25, 3, 7)).asnumpy()
    for k in ("chw", "nchw", "chw64", "chw16"):
        v, g = _grad(mx, lambda d: I.normalize(d, mean=m3, std=s3), X[k])
        out["normalize_grad_" + k] = g
    v, g = _grad(mx, lambda d: I.normalize(d, mean=0.25, std=1.5), X["c1hw"])
    out["normalize_grad_c1hw"] = g

    # resize
    sizes = [("8x5", dict(size=(8, 5))), ("4", dict(size=4)), ("3x9", dict(size=(3, 9))),
             ("keep4", dict(size=4, keep_ratio=True)), ("keep9", dict(size=9, keep_ratio=True)),
             ("same", dict(size=(17, 13))), ("half", dict(size=(8, 6)))]
    for name, kw in sizes:
        for k in ("big", "bigf", "bigd"):
            out["resize_%s_%s" % (k, name)] = I.resize(nd(k), **kw).asnumpy()
    for interp in range(5):
        for k in ("big", "bigf", "bigd"):
            out["resize_%s_interp%d" % (k, interp)] = I.resize(nd(k), (7, 10),
                                                                interp=interp).asnumpy()
            out["resize_%s_up_interp%d" % (k, interp)] = I.resize(nd(k), (25, 19),
                                                                   interp=interp).asnumpy()
    for k in ("even", "evenf", "evend"):
        out["resize_%s_half" % k] = I.resize(nd(k), (9, 6)).asnumpy()
        out["resize_%s_area3" % k] = I.resize(nd(k), (6, 4), interp=3).asnumpy()
        out["resize_%s_area1.5" % k] = I.resize(nd(k), (12, 8), interp=3).asnumpy()
    out["resize_batch"] = I.resize(nd("batch"), (4, 3)).asnumpy()
    out["resize_batchf_keep"] = I.resize(nd("batchf"), 3, True).asnumpy()
    out["resize_gray"] = I.resize(nd("gray"), (3, 7)).asnumpy()

    # crop
    for k in ("u8", "f16", "f64", "gray"):
        out["crop_" + k] = I.crop(nd(k), 1, 2, 3, 2).asnumpy()
    out["crop_batch"] = I.crop(nd("batch"), 2, 1, 4, 3).asnumpy()
    out["crop_whole"] = I.crop(nd("u8"), 0, 0, 7, 6).asnumpy()
    for k in ("f32", "batchf", "f64"):
        v, g = _grad(mx, lambda d: I.crop(d, 2, 1, 3, 2), X[k])
        out["crop_grad_" + k] = g

    # flips (MXNet passes the gradient through unflipped: recorded, compared flipped)
    for k in ("u8", "f16", "f64", "gray"):
        out["flip_left_right_" + k] = I.flip_left_right(nd(k)).asnumpy()
        out["flip_top_bottom_" + k] = I.flip_top_bottom(nd(k)).asnumpy()
    for op in ("flip_left_right", "flip_top_bottom"):
        v, g = _grad(mx, getattr(I, op), X["f32"])
        out["%s_grad_f32" % op] = g

    # colour operators with their draw fixed (min_factor == max_factor)
    for dt, k in short.items():
        for f in (0.0, 0.45, 1.7):
            out["brightness_%s_%g" % (k, f)] = I.random_brightness(nd(k), f, f).asnumpy()
        for f in (0.0, 0.6, 1.8):
            out["contrast_%s_%g" % (k, f)] = I.random_contrast(nd(k), f, f).asnumpy()
        for f in (0.0, 0.3, 1.6):
            out["saturation_%s_%g" % (k, f)] = I.random_saturation(nd(k), f, f).asnumpy()
        for f in (0.25, 0.8, 1.15, 2.6):
            out["hue_%s_%g" % (k, f)] = I.random_hue(nd(k), f, f).asnumpy()
        out["lighting_" + k] = I.adjust_lighting(nd(k), alpha=(0.05, -0.1, 0.2)).asnumpy()
        out["lighting_big_" + k] = I.adjust_lighting(nd(k), alpha=(-3, 2.5, 1)).asnumpy()
    for k in ("gray", "grayf"):
        out["brightness_%s" % k] = I.random_brightness(nd(k), 1.3, 1.3).asnumpy()
        out["contrast_%s" % k] = I.random_contrast(nd(k), 0.7, 0.7).asnumpy()
        out["saturation_%s" % k] = I.random_saturation(nd(k), 0.7, 0.7).asnumpy()
    for name, fn in (("brightness", lambda d: I.random_brightness(d, 1.3, 1.3)),
                     ("contrast", lambda d: I.random_contrast(d, 0.7, 0.7)),
                     ("lighting", lambda d: I.adjust_lighting(d, alpha=(0.1, 0.2, 0.3)))):
        v, g = _grad(mx, fn, X["f32"])
        out["%s_grad_f32" % name] = g
    return out
