"""OpenCV's ``cv::resize`` (which MXNet's image operators call) for nearest, bilinear, bicubic,
area and Lanczos interpolation, in NumPy on the host, so that ``nd.image.resize``, Gluon's
``Resize``, ``CenterCrop``, ``RandomResizedCrop`` and ``mx.image``'s functions give MXNet's
pixels (they all call this one implementation).

Bilinear follows OpenCV's rules: pixel centres at ``(d + 0.5) * scale - 0.5``, clamped at the
borders; 8-bit images in OpenCV's fixed point (coefficients in units of 1/2048) with its
vectorised vertical pass's rounding; an exact halving in both directions is OpenCV's 2x2
average. Float images are computed in float32 as OpenCV does, float64 images in float64 with
the same float32 weights (OpenCV's ``WT = double`` passes). Bicubic (A = -0.75) and Lanczos
(8 taps) are OpenCV's separable passes in the same fixed point; area is OpenCV's box average
when shrinking (exact for whole factors, weighted cells otherwise) and its area-weighted
bilinear when enlarging.
"""
from __future__ import annotations

import functools

import numpy

from .. import _jit

__all__ = ["resize", "INTERPOLATIONS"]

INTERPOLATIONS = {0: "nearest", 1: "bilinear", 2: "bicubic", 3: "area", 4: "lanczos"}
_COEF_SCALE = 2048


def _linear_taps(src_size, dst_size, clamp_weights):
    """Per output position: the two source indices and the weight of each (float32, as
    OpenCV's ``cbuf``). Past a border OpenCV moves a column onto the edge with weight 1
    (``clamp_weights``, the horizontal pass) but keeps a row's weights and only clamps the rows
    it reads (the vertical pass): both give the edge value, rounded differently."""
    # OpenCV's scale is 1 / (dst / src), which is not always src / dst to the last bit.
    scale = 1.0 / (dst_size / src_size)
    d = numpy.arange(dst_size, dtype=numpy.float64)
    f = ((d + 0.5) * scale - 0.5).astype(numpy.float32)
    s = numpy.floor(f).astype(numpy.int64)
    frac = (f - s.astype(numpy.float32)).astype(numpy.float32)
    if clamp_weights:
        low = s < 0
        frac[low] = 0
        s[low] = 0
        high = s >= src_size - 1
        frac[high] = 0
        s[high] = src_size - 1
    right = numpy.clip(s + 1, 0, src_size - 1)
    s = numpy.clip(s, 0, src_size - 1)
    w0 = (numpy.float32(1) - frac).astype(numpy.float32)
    return s, right, w0, frac


def _fixed(weights):
    # saturate_cast<short>(w * 2048): round half to even, as cvRound does
    return numpy.rint(weights.astype(numpy.float32)
                      * numpy.float32(_COEF_SCALE)).astype(numpy.int64)


@functools.lru_cache(maxsize=4096)
def _fixed_linear_taps(src_size, dst_size, horizontal):
    """``_linear_taps`` in fixed point, shaped to broadcast over a row (horizontal) or an image
    (vertical): a random crop's resize meets the same few sizes again and again."""
    first, second, w0, w1 = _linear_taps(src_size, dst_size, horizontal)
    shape = (-1, 1) if horizontal else (-1, 1, 1)
    out = (first, second, _fixed(w0).astype(numpy.int32).reshape(shape),
           _fixed(w1).astype(numpy.int32).reshape(shape))
    for array in out:
        array.setflags(write=False)
    return out


def _bilinear_u8(src, dh, dw, taps=None):
    h, w = src.shape[:2]
    if taps is None:
        (x0, x1, ax0, ax1), (y0, y1, by0, by1) = (_fixed_linear_taps(w, dw, True),
                                                  _fixed_linear_taps(h, dh, False))
        if src.ndim == 3 and _jit.loaded():
            # One call instead of fifteen NumPy passes over a small image (a 24x28 crop
            # resized to 32x32: 54-78 -> 21-29 us); only where numba is loaded already, so a
            # pipeline that never loads it does not pay for its import.
            out = numpy.empty((dh, dw, src.shape[2]), numpy.uint8)
            _bilinear_u8_kernel(src, x0, x1, ax0.reshape(-1), ax1.reshape(-1), y0, y1,
                                by0.reshape(-1), by1.reshape(-1), out)
            return out
    else:
        (x0, x1, ax0, ax1), (y0, y1, by0, by1) = taps
        ax0, ax1 = (_fixed(a).astype(numpy.int32)[:, None] for a in (ax0, ax1))
        by0, by1 = (_fixed(b).astype(numpy.int32)[:, None, None] for b in (by0, by1))
    # int32 holds every intermediate: a row sum is at most 255 * 2048 and (that >> 4) * 2048
    # is under 2**27. Every term is non-negative, so only the top needs the clip to 255.
    s = src.astype(numpy.int32)
    # horizontal pass: ints in units of 1/2048
    rows = numpy.take(s, x0, axis=1)
    rows *= ax0
    right = numpy.take(s, x1, axis=1)
    right *= ax1
    rows += right
    # OpenCV's vectorised vertical pass: ((r0 >> 4) * b0 >> 16) + ((r1 >> 4) * b1 >> 16), + 2 >> 2
    rows >>= 4
    out = numpy.take(rows, y0, axis=0)
    out *= by0
    out >>= 16
    low = numpy.take(rows, y1, axis=0)
    low *= by1
    low >>= 16
    out += low
    out += 2
    out >>= 2
    return numpy.minimum(out, 255, out=out).astype(numpy.uint8)


def _bilinear_u8_loop(src, x0, x1, ax0, ax1, y0, y1, by0, by1, out):
    # ``_bilinear_u8``'s passes pixel by pixel: the same integer arithmetic (every intermediate
    # fits int32, so numba's int64 gives the same values, and all are non-negative).
    dh, dw, channels = out.shape
    for i in range(dh):
        r0, r1, b0, b1 = y0[i], y1[i], by0[i], by1[i]
        for j in range(dw):
            c0, c1, a0, a1 = x0[j], x1[j], ax0[j], ax1[j]
            for k in range(channels):
                top = (src[r0, c0, k] * a0 + src[r0, c1, k] * a1) >> 4
                low = (src[r1, c0, k] * a0 + src[r1, c1, k] * a1) >> 4
                v = (((top * b0) >> 16) + ((low * b1) >> 16) + 2) >> 2
                out[i, j, k] = min(v, 255)


_bilinear_u8_kernel = _jit.Kernel(_bilinear_u8_loop)


def _work(src):
    """OpenCV's working type for a float image: double for float64, float otherwise."""
    return numpy.float64 if src.dtype == numpy.float64 else numpy.float32


def _bilinear_float(src, dh, dw, taps=None):
    h, w = src.shape[:2]
    if taps is None:
        taps = (_linear_taps(w, dw, True), _linear_taps(h, dh, False))
    (x0, x1, ax0, ax1), (y0, y1, by0, by1) = taps
    s = src.astype(_work(src))
    rows = s[:, x0] * ax0[None, :, None] + s[:, x1] * ax1[None, :, None]
    out = rows[y0] * by0[:, None, None] + rows[y1] * by1[:, None, None]
    return out.astype(src.dtype, copy=False)


def _half(src):
    h, w = src.shape[:2]
    s = src[: h // 2 * 2, : w // 2 * 2]
    if src.dtype == numpy.uint8:
        total = (s[0::2, 0::2].astype(numpy.int32) + s[0::2, 1::2] + s[1::2, 0::2] + s[1::2, 1::2])
        return ((total + 2) >> 2).astype(numpy.uint8)
    s = s.astype(_work(src))
    return ((s[0::2, 0::2] + s[0::2, 1::2] + s[1::2, 0::2] + s[1::2, 1::2])
            * _work(src)(0.25)).astype(src.dtype, copy=False)


def _nearest(src, dh, dw):
    h, w = src.shape[:2]
    xs = numpy.minimum(numpy.floor(numpy.arange(dw) * (w / dw)).astype(numpy.int64), w - 1)
    ys = numpy.minimum(numpy.floor(numpy.arange(dh) * (h / dh)).astype(numpy.int64), h - 1)
    return src[ys][:, xs]


_F = numpy.float32


def _cubic_weights(x):
    a = _F(-0.75)
    one = _F(1)
    x1 = x + one
    c0 = ((a * x1 - _F(5) * a) * x1 + _F(8) * a) * x1 - _F(4) * a
    c1 = ((a + _F(2)) * x - (a + _F(3))) * x * x + one
    y = one - x
    c2 = ((a + _F(2)) * y - (a + _F(3))) * y * y + one
    c3 = one - c0 - c1 - c2
    return numpy.stack([c0, c1, c2, c3], axis=-1).astype(_F)


_S45 = 0.70710678118654752440084436210485
_LANCZOS_CS = numpy.array([[1, 0], [-_S45, -_S45], [0, 1], [_S45, -_S45], [-1, 0], [_S45, _S45],
                           [0, -1], [-_S45, _S45]])


def _lanczos_weights(x):
    out = numpy.zeros(x.shape + (8,), dtype=_F)
    for n, v in enumerate(x.tolist()):
        v = _F(v)
        if v < numpy.finfo(_F).eps:
            out[n, 3] = 1
            continue
        y0 = -float(v + _F(3)) * numpy.pi * 0.25
        s0, c0 = numpy.sin(y0), numpy.cos(y0)
        total = _F(0)
        for i in range(8):
            y = -float(v + _F(3) - _F(i)) * numpy.pi * 0.25
            out[n, i] = _F((_LANCZOS_CS[i, 0] * s0 + _LANCZOS_CS[i, 1] * c0) / (y * y))
            total = _F(total + out[n, i])
        out[n] *= _F(1) / total
    return out


def _kernel_taps(src_size, dst_size, ksize, weights):
    """Per output position: ``ksize`` source indices (clamped at the borders, as OpenCV's
    replicated border) and their float32 weights."""
    scale = 1.0 / (dst_size / src_size)
    d = numpy.arange(dst_size, dtype=numpy.float64)
    f = ((d + 0.5) * scale - 0.5).astype(_F)
    s = numpy.floor(f).astype(numpy.int64)
    frac = (f - s.astype(_F)).astype(_F)
    index = s[:, None] + numpy.arange(ksize)[None, :] - (ksize // 2 - 1)
    return numpy.clip(index, 0, src_size - 1), weights(frac)


def _separable(src, dh, dw, ksize, weights):
    h, w = src.shape[:2]
    xi, xa = _kernel_taps(w, dw, ksize, weights)
    yi, yb = _kernel_taps(h, dh, ksize, weights)
    if src.dtype == numpy.uint8:
        xa, yb = _fixed(xa), _fixed(yb)
        s = src.astype(numpy.int64)
        rows = s[:, xi[:, 0]] * xa[None, :, 0, None]
        for k in range(1, ksize):
            rows = rows + s[:, xi[:, k]] * xa[None, :, k, None]
        if ksize == 4:
            return _cubic_rows_u8(rows, yi, yb)
        out = rows[yi[:, 0]] * yb[:, 0, None, None]
        for k in range(1, ksize):
            out = out + rows[yi[:, k]] * yb[:, k, None, None]
        out = (out + (1 << 21)) >> 22
        return numpy.clip(out, 0, 255).astype(numpy.uint8)
    s = src.astype(_work(src))
    rows = s[:, xi[:, 0]] * xa[None, :, 0, None]
    for k in range(1, ksize):
        rows = rows + s[:, xi[:, k]] * xa[None, :, k, None]
    out = rows[yi[:, 0]] * yb[:, 0, None, None]
    for k in range(1, ksize):
        out = out + rows[yi[:, k]] * yb[:, k, None, None]
    return out.astype(src.dtype, copy=False)


def _cubic_rows_u8(rows, yi, yb):
    # OpenCV's vectorised vertical pass works in float (weights / 2048**2, rounded to nearest
    # even) over whole groups of 8 values of a row; the rest of the row in fixed point.
    dh = yi.shape[0]
    width = rows.shape[1] * rows.shape[2]
    flat = rows.reshape(rows.shape[0], width)
    scale = _F(1.0 / (2048 * 2048))
    beta = yb.astype(_F) * scale
    vec = width // 8 * 8
    out = numpy.empty((dh, width), dtype=numpy.int64)
    acc = flat[yi[:, 0], :vec].astype(_F) * beta[:, 0, None]
    for k in range(1, 4):
        acc = acc + flat[yi[:, k], :vec].astype(_F) * beta[:, k, None]
    out[:, :vec] = numpy.rint(acc).astype(numpy.int64)
    tail = flat[yi[:, 0], vec:] * yb[:, 0, None]
    for k in range(1, 4):
        tail = tail + flat[yi[:, k], vec:] * yb[:, k, None]
    out[:, vec:] = (tail + (1 << 21)) >> 22
    return numpy.clip(out, 0, 255).astype(numpy.uint8).reshape(dh, rows.shape[1], rows.shape[2])


def _area_linear_taps(src_size, dst_size):
    # OpenCV's INTER_AREA when enlarging: bilinear with the weight of the cell overlap.
    inv_scale = dst_size / src_size
    scale = 1.0 / inv_scale
    d = numpy.arange(dst_size)
    s = numpy.floor(d * scale).astype(numpy.int64)
    f = ((d + 1) - (s + 1) * inv_scale).astype(_F)
    f = numpy.where(f <= 0, _F(0), f - numpy.floor(f)).astype(_F)
    return s, f


def _area_enlarge(src, dh, dw):
    h, w = src.shape[:2]
    x0, fx = _area_linear_taps(w, dw)
    y0, fy = _area_linear_taps(h, dh)
    edge = x0 >= w - 1
    fx[edge] = 0
    x0 = numpy.minimum(x0, w - 1)
    x1 = numpy.minimum(x0 + 1, w - 1)
    y1 = numpy.minimum(y0 + 1, h - 1)
    y0 = numpy.minimum(y0, h - 1)
    taps = ((x0, x1, (_F(1) - fx).astype(_F), fx), (y0, y1, (_F(1) - fy).astype(_F), fy))
    if src.dtype == numpy.uint8:
        return _bilinear_u8(src, dh, dw, taps)
    return _bilinear_float(src, dh, dw, taps)


def _area_tab(src_size, dst_size):
    """OpenCV's ``computeResizeAreaTab``: (dst index, src index, weight) cells in its order."""
    scale = 1.0 / (dst_size / src_size)
    tab = []
    for dx in range(dst_size):
        fsx1 = dx * scale
        fsx2 = fsx1 + scale
        cell = min(scale, src_size - fsx1)
        sx1, sx2 = int(numpy.ceil(fsx1)), int(numpy.floor(fsx2))
        sx2 = min(sx2, src_size - 1)
        sx1 = min(sx1, sx2)
        if sx1 - fsx1 > 1e-3:
            tab.append((dx, sx1 - 1, _F((sx1 - fsx1) / cell)))
        for sx in range(sx1, sx2):
            tab.append((dx, sx, _F(1.0 / cell)))
        if fsx2 - sx2 > 1e-3:
            tab.append((dx, sx2, _F(min(min(fsx2 - sx2, 1.0), cell) / cell)))
    return tab


def _by_rank(tab):
    """The cells of ``tab`` grouped by their rank within their destination index, so that each
    group can be added for all destinations at once in OpenCV's order."""
    groups, rank, last = {}, 0, None
    for di, si, alpha in tab:
        rank = rank + 1 if di == last else 0
        last = di
        groups.setdefault(rank, []).append((di, si, alpha))
    return [(numpy.array([g[0] for g in grp]), numpy.array([g[1] for g in grp]),
             numpy.array([g[2] for g in grp], dtype=_F)) for _, grp in sorted(groups.items())]


def _area_shrink(src, dh, dw):
    h, w = src.shape[:2]
    s = src.astype(_work(src))
    rows = numpy.zeros((h, dw, src.shape[2]), dtype=s.dtype)
    for di, si, alpha in _by_rank(_area_tab(w, dw)):
        rows[:, di] = rows[:, di] + s[:, si] * alpha[None, :, None]
    out = numpy.zeros((dh, dw, src.shape[2]), dtype=s.dtype)
    for di, si, beta in _by_rank(_area_tab(h, dh)):
        out[di] = out[di] + beta[:, None, None] * rows[si]
    if src.dtype == numpy.uint8:
        return numpy.clip(numpy.rint(out), 0, 255).astype(numpy.uint8)
    return out.astype(src.dtype, copy=False)


def _area_fast(src, dh, dw, sy, sx):
    h, w = src.shape[:2]
    blocks = src[: dh * sy, : dw * sx].reshape(dh, sy, dw, sx, src.shape[2])
    if src.dtype == numpy.uint8:
        total = blocks.astype(numpy.int64).sum(axis=(1, 3))
        return numpy.clip(numpy.rint(total.astype(_F) * _F(1.0 / (sx * sy))), 0,
                          255).astype(numpy.uint8)
    # OpenCV's unrolled loop: the cell's values in row order, added four at a time
    # (sum += a + b + c + d), then one at a time.
    cells = [blocks[:, y, :, x].astype(_work(src)) for y in range(sy) for x in range(sx)]
    area = len(cells)
    total = numpy.zeros_like(cells[0])
    k = 0
    while k <= area - 4:
        total = total + (((cells[k] + cells[k + 1]) + cells[k + 2]) + cells[k + 3])
        k += 4
    for cell in cells[k:]:
        total = total + cell
    return (total * (_F(1) / _F(area))).astype(src.dtype, copy=False)


def _area(src, dh, dw):
    h, w = src.shape[:2]
    scale_x, scale_y = 1.0 / (dw / w), 1.0 / (dh / h)
    if scale_x < 1 or scale_y < 1:
        return _area_enlarge(src, dh, dw)
    ix, iy = int(round(scale_x)), int(round(scale_y))
    eps = numpy.finfo(numpy.float64).eps
    if abs(scale_x - ix) < eps and abs(scale_y - iy) < eps:
        if ix == 2 and iy == 2:
            return _half(src)
        return _area_fast(src, dh, dw, iy, ix)
    return _area_shrink(src, dh, dw)


def resize(src: numpy.ndarray, width: int, height: int, interpolation: int = 1) -> numpy.ndarray:
    """``src`` (H, W, C) resized to (height, width, C), as OpenCV's ``cv::resize``."""
    if interpolation not in INTERPOLATIONS:
        raise NotImplementedError(
            "interpolation=%r is not one of OpenCV's 0 (nearest), 1 (bilinear), 2 (bicubic), "
            "3 (area) or 4 (Lanczos)" % (interpolation,))
    width, height = int(width), int(height)
    if width <= 0 or height <= 0:
        raise ValueError("cannot resize to %dx%d" % (width, height))
    if src.shape[0] == 0 or src.shape[1] == 0:
        raise ValueError("cannot resize an empty image of shape %s" % (src.shape,))
    h, w = src.shape[:2]
    if (h, w) == (height, width):
        return src.copy()
    if interpolation == 0:
        return _nearest(src, height, width)
    if interpolation == 2:
        return _separable(src, height, width, 4, _cubic_weights)
    if interpolation == 3:
        return _area(src, height, width)
    if interpolation == 4:
        return _separable(src, height, width, 8, _lanczos_weights)
    if w == 2 * width and h == 2 * height:
        return _half(src)
    if src.dtype == numpy.uint8:
        return _bilinear_u8(src, height, width)
    return _bilinear_float(src, height, width)
