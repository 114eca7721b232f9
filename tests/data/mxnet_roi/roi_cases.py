"""ROI pooling and bilinear resizing as MXNet 1.9.1 computes them, written once against MXNet's
API: ``record_roi(mx)`` (``ROIPooling``, ``contrib.ROIAlign``, ``contrib.PSROIPooling``) and
``record_resize(mx)`` (``contrib.BilinearResize2D``) return each case's output (values, dtype,
shape) and the gradients of a weighted sum of it under ``autograd.record()``.

    /work/mxvenv/bin/python tests/data/mxnet_roi/make_roi_records.py

records ``roi.npz``; tests/test_nd_roi.py and tests/test_nd_resize.py replay these with
trainer_cli. Only cases where MXNet is well defined are here (no batch index outside the batch
for ROIAlign/PSROIPooling, no ROI list of length 0, ``like`` of the data's dtype and batch)."""
import numpy as np

DTYPES = ("float32", "float64", "float16")


def _data(shape, seed):
    return np.random.RandomState(seed).randn(*shape).astype(np.float32)


# batch index, x1, y1, x2, y2: inside, partly outside, past the image, degenerate (a point),
# inverted, halves (C's round goes away from zero), fractional batch indices (truncated).
ROIS = np.array([[0, 0, 0, 8, 6],
                 [1, 2.4, 3.6, 20, 30],
                 [0, -5, -3, 4, 2],
                 [1, 7.5, 1.5, 7.5, 1.5],
                 [0, 10, 8, 3, 2],
                 [1, 30, 30, 40, 40],
                 [0, 0.5, 0.5, 10.49, 8.5],
                 [1.9, -2.5, -0.5, 2.5, 0.5],
                 [0.7, 3, 1, 9, 7.5],
                 [-0.5, 1, 2, 5, 5]], np.float32)
# ROIPooling also zeroes a batch index outside the batch (MXNet checks it there).
POOL_ROIS = np.concatenate([ROIS, np.array([[-1, 0, 0, 4, 4], [2, 0, 0, 4, 4],
                                            [7, 1, 1, 3, 3]], np.float32)])
# aligned=True needs x2 > x1 and y2 > y1 after scaling (MXNet aborts otherwise).
ALIGNED_ROIS = ROIS[[0, 1, 2, 5, 6, 7, 8, 9]]


def _run(mx, out, name, fn, inputs, grads=(0,), weights_seed=0):
    """``fn(*inputs)`` recorded: its output and each listed input's gradient of a weighted
    sum (weights in the output's dtype)."""
    arrays = [mx.nd.array(x, dtype=x.dtype) for x in inputs]
    for k in grads:
        arrays[k].attach_grad()
    with mx.autograd.record():
        y = fn(*arrays)
        w = np.random.RandomState(weights_seed).randn(*y.shape).astype(y.dtype)
        (y * mx.nd.array(w, dtype=w.dtype)).sum().backward()
    out[name] = y.asnumpy()
    for k in grads:
        out["%s/grad%d" % (name, k)] = arrays[k].grad.asnumpy()


def record_roi(mx, roi_pooling=None):
    """``roi_pooling``: the ROIPooling to call (default ``mx.nd.ROIPooling``)."""
    nd = mx.nd
    pool = roi_pooling or nd.ROIPooling
    align, psroi = nd.contrib.ROIAlign, nd.contrib.PSROIPooling
    out = {}
    x = _data((2, 8, 9, 11), 0)

    # ---- ROIPooling
    doc = np.arange(48, dtype=np.float32).reshape(1, 1, 8, 6)      # MXNet's docstring example
    for scale in (1.0, 0.7):
        out["ROIPooling/doc_%g" % scale] = pool(
            nd.array(doc), nd.array([[0, 0, 0, 4, 4]]), pooled_size=(2, 2),
            spatial_scale=scale).asnumpy()
    for dt in DTYPES:
        _run(mx, out, "ROIPooling/basic_" + dt,
             lambda d, r: pool(d, r, pooled_size=(3, 2), spatial_scale=1.0),
             [x.astype(dt), POOL_ROIS.astype(dt)], grads=(0, 1) if dt == "float32" else (0,))
    for name, kw in {"scale": dict(pooled_size=(2, 4), spatial_scale=0.7),
                     "one_bin": dict(pooled_size=(1, 1), spatial_scale=0.5),
                     "fine_bins": dict(pooled_size=(7, 5), spatial_scale=1.0),
                     "tall": dict(pooled_size=(4, 1), spatial_scale=0.0625 * 8)}.items():
        _run(mx, out, "ROIPooling/" + name, lambda d, r, kw=kw: pool(d, r, **kw),
             [x, POOL_ROIS])
    ties = np.random.RandomState(1).randint(0, 3, (2, 3, 6, 7)).astype(np.float32)
    _run(mx, out, "ROIPooling/ties", lambda d, r: pool(d, r, pooled_size=(2, 3),
                                                       spatial_scale=1.0),
         [ties, POOL_ROIS[:9]])
    special = _data((1, 2, 5, 5), 2)
    special[0, 0, :2, :2] = np.nan                # a bin of NaN only: -FLT_MAX
    special[0, 0, 3, 3] = np.nan                  # NaN among numbers: never the maximum
    special[0, 1, :2, :2] = -np.inf               # -inf only: -FLT_MAX too
    special[0, 1, 4, 4] = np.inf
    for dt in ("float32", "float16"):
        _run(mx, out, "ROIPooling/special_" + dt,
             lambda d, r: pool(d, r, pooled_size=(2, 2), spatial_scale=1.0),
             [special.astype(dt), np.array([[0, 0, 0, 3, 3], [0, 0, 0, 4, 4]], dt)])

    # ---- ROIAlign
    for dt in DTYPES:
        _run(mx, out, "ROIAlign/adaptive_" + dt,
             lambda d, r: align(d, r, pooled_size=(3, 2), spatial_scale=0.8),
             [x.astype(dt), ROIS.astype(dt)], grads=(0, 1) if dt == "float32" else (0,))
        _run(mx, out, "ROIAlign/aligned_" + dt,
             lambda d, r: align(d, r, pooled_size=(2, 3), spatial_scale=0.9, aligned=True),
             [x.astype(dt), ALIGNED_ROIS.astype(dt)])
    for name, kw, rois in (
            ("ratio1", dict(pooled_size=(2, 2), spatial_scale=1.0, sample_ratio=1), ROIS),
            ("ratio2", dict(pooled_size=(3, 2), spatial_scale=0.8, sample_ratio=2), ROIS),
            ("ratio3", dict(pooled_size=(1, 4), spatial_scale=0.5, sample_ratio=3), ROIS),
            ("ratio0", dict(pooled_size=(2, 2), spatial_scale=0.6, sample_ratio=0), ROIS),
            ("whole_image", dict(pooled_size=(1, 1), spatial_scale=1.0), ROIS[:3]),
            ("position_sensitive", dict(pooled_size=(2, 2), spatial_scale=0.5,
                                        position_sensitive=True), ROIS),
            ("position_sensitive_aligned", dict(pooled_size=(2, 2), spatial_scale=0.7,
                                                position_sensitive=True, aligned=True,
                                                sample_ratio=2), ALIGNED_ROIS),
            ("aligned_ratio2", dict(pooled_size=(2, 2), spatial_scale=1.0, aligned=True,
                                    sample_ratio=2), ALIGNED_ROIS)):
        _run(mx, out, "ROIAlign/" + name, lambda d, r, kw=kw: align(d, r, **kw), [x, rois])
    # Samples exactly on x = W, y = H and x, y = -1 are inside (clamped to the edge cell);
    # just past them, outside (they read nothing).
    edges = np.array([[0, 10, 8, 12, 10], [1, -2, -2, 0, 0], [0, 10, 0, 12.5, 2],
                      [1, -2.25, 3, 0, 5], [0, 3, 8, 5, 10.25]], np.float32)
    for name, kw in {"edge_samples": dict(pooled_size=(1, 1), spatial_scale=1.0, sample_ratio=1),
                     "edge_samples_grid": dict(pooled_size=(2, 1), spatial_scale=1.0,
                                               sample_ratio=2)}.items():
        _run(mx, out, "ROIAlign/" + name, lambda d, r, kw=kw: align(d, r, **kw), [x, edges])
    nan_corner = x.copy()
    nan_corner[1, :, 0, 0] = np.nan       # samples far outside read cell 0 with weight 0
    _run(mx, out, "ROIAlign/nan_corner", lambda d, r: align(d, r, pooled_size=(2, 2),
                                                            spatial_scale=1.0),
         [nan_corner, ROIS[[1, 5, 3]]])

    # ---- PSROIPooling
    for dt in DTYPES:
        _run(mx, out, "PSROIPooling/basic_" + dt,
             lambda d, r: psroi(d, r, spatial_scale=0.6, output_dim=2, pooled_size=2),
             [x.astype(dt), ROIS.astype(dt)], grads=(0, 1) if dt == "float32" else (0,))
    for name, kw in {"groups": dict(spatial_scale=1.0, output_dim=2, pooled_size=3,
                                    group_size=2),
                     "one_bin": dict(spatial_scale=0.5, output_dim=8, pooled_size=1),
                     "fine_bins": dict(spatial_scale=0.3, output_dim=1, pooled_size=4,
                                       group_size=2),
                     "extra_channels": dict(spatial_scale=1.0, output_dim=1, pooled_size=2)
                     }.items():
        _run(mx, out, "PSROIPooling/" + name, lambda d, r, kw=kw: psroi(d, r, **kw), [x, ROIS])
    return out


RESIZE_ARGS = [dict(height=11, width=13), dict(height=3, width=4), dict(height=1, width=1),
               dict(height=5, width=7), dict(height=1, width=9), dict(height=37, width=3),
               dict(height=7, width=5), dict(scale_height=1.7, scale_width=0.6),
               dict(scale_width=3.0, height=4, width=6),            # scale_width alone: ignored
               dict(mode="odd_scale", scale_height=2.5, scale_width=1.5),
               dict(mode="odd_scale", scale_height=0.5, scale_width=0.34),
               dict(mode="to_even_up"), dict(mode="to_even_down"), dict(mode="to_odd_up"),
               dict(mode="to_odd_down")]


def _label(kw):
    return ",".join("%s=%s" % kv for kv in sorted(kw.items()))


def record_resize(mx):
    resize = mx.nd.contrib.BilinearResize2D
    out = {}
    x = _data((2, 2, 5, 7), 3)
    for dt in DTYPES:
        for corners in (True, False):
            for kw in RESIZE_ARGS if dt == "float32" else RESIZE_ARGS[:8]:
                kw = dict(kw, align_corners=corners)
                _run(mx, out, "BilinearResize2D/%s/%s" % (dt, _label(kw)),
                     lambda d, kw=kw: resize(d, **kw), [x.astype(dt)])
            like = np.zeros((2, 2, 9, 4), dt)
            _run(mx, out, "BilinearResize2D/%s/like,align_corners=%s" % (dt, corners),
                 lambda d, l: resize(d, l, mode="like", align_corners=corners),
                 [x.astype(dt), like], grads=(0, 1))
    _run(mx, out, "BilinearResize2D/default", lambda d: resize(d, height=6, width=2), [x])
    row = _data((1, 2, 1, 4), 4)                                  # one input row
    _run(mx, out, "BilinearResize2D/one_row", lambda d: resize(d, height=3, width=9), [row])
    _run(mx, out, "BilinearResize2D/one_row_half_pixel",
         lambda d: resize(d, height=3, width=2, align_corners=False), [row])
    big = _data((1, 1, 4, 4), 5)                                  # a 10x upsampling
    _run(mx, out, "BilinearResize2D/upsample10", lambda d: resize(d, scale_height=10.0,
                                                                  scale_width=10.0), [big])
    out["BilinearResize2D/empty"] = resize(mx.nd.array(x), scale_height=0.1,
                                           scale_width=0.1).asnumpy()
    return out


def record(mx, roi_pooling=None):
    out = record_roi(mx, roi_pooling)
    out.update(record_resize(mx))
    return out
