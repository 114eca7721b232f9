"""Deformable convolutions: MXNet 1.9.1's ``contrib.DeformableConvolution`` (v1, Dai et al. 2017)
and ``contrib.ModulatedDeformableConvolution`` (v2, Zhu et al. 2018), forward and backward.

Both are a deformable im2col followed by one GEMM per group, as in MXNet: for every output
position and kernel tap the input is sampled bilinearly at the tap's place moved by the learned
``offset`` (one (dy, dx) pair per tap, position and deformable group), the samples of each group
are multiplied by the weight, and the bias is added. The two operators differ at the border:

- v1 samples a place when 0 <= y < H and 0 <= x < W (zero elsewhere); past the last row (column)
  it repeats that row (column) instead of blending with zeros.
- v2 samples a place when -1 < y < H and -1 < x < W, each of the four corners outside the image
  counting as zero, and multiplies each sample by ``mask`` (one value per tap and position).

The samples are MXNet's to the bit (the same float operations in the same order); the GEMMs and
the channel sums of the gradients are not in MXNet's BLAS order, so outputs and gradients agree
with MXNet's to float32 rounding (~1e-6 relative). The backward is MXNet's: the data gradient
scatters the column gradient with the bilinear weights (MXNet's ``col2im``, including its
boundary rules: v1's border rows take all of a clamped sample's gradient), the offset gradient
is the column gradient times the sample's derivative in y and x (``col2im_coord``), summed over
the deformable group's channels, and v2's mask gradient is the column gradient times the
unmasked sample. MXNet's CPU build has no v2 backward ("only implemented in GPU") and no float16
GEMM; here both run on either device, float16 computed in float32 and rounded once.

Everything is array code on ``xp`` (NumPy or CuPy), the batch taken in pieces so the column
buffers stay bounded.
"""
from __future__ import annotations

import numbers

import numpy

from .ndarray import NDArray, _result, _xp_of

__all__ = ["DeformableConvolution", "ModulatedDeformableConvolution"]

# Elements of one column buffer (per piece of the batch); the sampling keeps a few of that size.
_PIECE_ELEMENTS = 1 << 22


def _pair(value, default, name, op):
    """(h, w) from MXNet's int / 2-tuple / empty (default) spellings."""
    if value is None or value == ():
        return (default, default)
    if isinstance(value, numbers.Integral):
        return (int(value), int(value))
    try:
        pair = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError("%s: %s must be an int or (h, w), got %r" % (op, name, value)) from None
    if len(pair) != 2:
        raise ValueError("%s: only 2-D deformable convolution is implemented (as in MXNet); "
                         "%s must be (h, w), got %r" % (op, name, value))
    return pair


class _Geometry:
    """The shapes and settings of one call, checked as MXNet's shape inference checks them."""

    def __init__(self, op, data, offset, mask, weight, bias, kernel, stride, dilate, pad,
                 num_filter, num_group, num_deformable_group, layout, im2col_step=None):
        arrays = [("data", data), ("offset", offset), ("weight", weight)]
        if mask is not None:
            arrays.insert(2, ("mask", mask))
        if bias is not None:
            arrays.append(("bias", bias))
        for name, a in arrays:
            if not isinstance(a, NDArray):
                raise TypeError("%s: %s must be an NDArray, got %s" % (op, name, type(a).__name__))
        dtype = data._data.dtype
        if dtype.kind != "f":
            raise TypeError("%s: data must be float16, float32 or float64, got %s" % (op, dtype))
        for name, a in arrays[1:]:
            if a._data.dtype != dtype:
                raise TypeError("%s: %s must have data's dtype %s, got %s"
                                % (op, name, dtype, a._data.dtype))
        if kernel is None:
            raise ValueError("%s: kernel is required" % op)
        if layout not in (None, "NCHW"):
            raise ValueError("%s: only the NCHW layout is implemented (as in MXNet), got %r"
                             % (op, layout))
        self.kernel = kh, kw = _pair(kernel, 1, "kernel", op)
        self.stride = _pair(stride, 1, "stride", op)
        self.dilate = _pair(dilate, 1, "dilate", op)
        self.pad = _pair(pad, 0, "pad", op)
        for name, v, low in (("kernel", self.kernel, 1), ("stride", self.stride, 1),
                             ("dilate", self.dilate, 1), ("pad", self.pad, 0)):
            if min(v) < low:
                raise ValueError("%s: %s must be >= %d, got %r" % (op, name, low, v))
        if num_filter is None or int(num_filter) < 1:
            raise ValueError("%s: num_filter must be >= 1, got %r" % (op, num_filter))
        self.filters = f = int(num_filter)
        self.groups = g = int(num_group)
        self.dgroups = dg = int(num_deformable_group)
        if g < 1 or dg < 1:
            raise ValueError("%s: num_group and num_deformable_group must be >= 1, got %d and %d"
                             % (op, g, dg))
        if data.ndim != 4:
            raise ValueError("%s: data must be 4-D (batch, channel, height, width), got shape %s"
                             % (op, data.shape))
        self.n, self.c, self.h, self.w = n, c, h, w = data.shape
        if c % g:
            raise ValueError("%s: the data's %d channels must divide into num_group=%d"
                             % (op, c, g))
        if c % dg:
            raise ValueError("%s: the data's %d channels must divide into num_deformable_group=%d"
                             % (op, c, dg))
        if f % g:
            raise ValueError("%s: num_filter=%d must divide into num_group=%d" % (op, f, g))
        if kh > h + 2 * self.pad[0] or kw > w + 2 * self.pad[1]:
            raise ValueError("%s: kernel %r exceeds the padded input (%d, %d)"
                             % (op, self.kernel, h + 2 * self.pad[0], w + 2 * self.pad[1]))
        self.ho = (h + 2 * self.pad[0] - (self.dilate[0] * (kh - 1) + 1)) // self.stride[0] + 1
        self.wo = (w + 2 * self.pad[1] - (self.dilate[1] * (kw - 1) + 1)) // self.stride[1] + 1
        if self.ho < 1 or self.wo < 1:
            raise ValueError("%s: the dilated kernel does not fit the padded input (output %d x %d)"
                             % (op, self.ho, self.wo))
        self.taps = kh * kw
        want = (n, dg * 2 * self.taps, self.ho, self.wo)
        if tuple(offset.shape) != want:
            raise ValueError("%s: offset must be (batch, num_deformable_group * 2 * kernel "
                             "size, out height, out width) = %s, got %s"
                             % (op, want, tuple(offset.shape)))
        if mask is not None:
            if f % dg:
                # MXNet's shape check for the modulated operator (nothing needs it).
                raise ValueError("%s: num_filter=%d must divide into num_deformable_group=%d"
                                 % (op, f, dg))
            want = (n, dg * self.taps, self.ho, self.wo)
            if tuple(mask.shape) != want:
                raise ValueError("%s: mask must be (batch, num_deformable_group * kernel size, "
                                 "out height, out width) = %s, got %s"
                                 % (op, want, tuple(mask.shape)))
        want = (f, c // g, kh, kw)
        if tuple(weight.shape) != want:
            raise ValueError("%s: weight must be (num_filter, channels / num_group, kernel h, "
                             "kernel w) = %s, got %s" % (op, want, tuple(weight.shape)))
        if bias is not None and tuple(bias.shape) != (f,):
            raise ValueError("%s: bias must be (num_filter,) = (%d,), got %s"
                             % (op, f, tuple(bias.shape)))
        if im2col_step is not None:
            step = int(im2col_step)
            if step < 1:
                raise ValueError("%s: im2col_step must be >= 1, got %d" % (op, step))
            if n > step and n % step:
                raise ValueError("%s: the batch size %d must be at most im2col_step=%d or a "
                                 "multiple of it" % (op, n, step))
        self.modulated = mask is not None
        per_image = c * self.taps * self.ho * self.wo
        self.piece = max(1, _PIECE_ELEMENTS // max(per_image, 1))

    def pieces(self):
        return [(a, min(a + self.piece, self.n)) for a in range(0, self.n, self.piece)]


def _places(geo, off, dtype, xp):
    """Where each tap samples: y and x as (n, dg, 1, taps * out positions) in the data's dtype,
    MXNet's ``DType(int base) + offset``."""
    n = off.shape[0]
    kh, kw = geo.kernel
    (sh, sw), (dh, dw), (ph, pw) = geo.stride, geo.dilate, geo.pad
    i = numpy.arange(kh).reshape(kh, 1, 1, 1)
    j = numpy.arange(kw).reshape(1, kw, 1, 1)
    rows = i * dh - ph + numpy.arange(geo.ho).reshape(1, 1, geo.ho, 1) * sh
    cols = j * dw - pw + numpy.arange(geo.wo).reshape(1, 1, 1, geo.wo) * sw
    shape = (kh, kw, geo.ho, geo.wo)
    base_y = xp.asarray(numpy.broadcast_to(rows, shape).reshape(-1).astype(dtype))
    base_x = xp.asarray(numpy.broadcast_to(cols, shape).reshape(-1).astype(dtype))
    off = off.reshape(n, geo.dgroups, geo.taps, 2, geo.ho * geo.wo)
    y = base_y + off[:, :, :, 0].reshape(n, geo.dgroups, 1, -1)
    x = base_x + off[:, :, :, 1].reshape(n, geo.dgroups, 1, -1)
    return y, x


class _Corners:
    """The four source corners of each sample: their flat pixel indices, whether each is read,
    and the sample's place as the interpolation uses it (v1: pulled back onto a clamped border
    row or column)."""

    def __init__(self, geo, y, x, xp):
        dtype = y.dtype
        h, w = geo.h, geo.w
        if geo.modulated:
            inside = (y > -1) & (x > -1) & (y < h) & (x < w)
        else:
            inside = (y >= 0) & (x >= 0) & (y < h) & (x < w)
        # Places outside read nothing; parking them at 0 keeps floor() and the indices sane.
        y = xp.where(inside, y, dtype.type(0))
        x = xp.where(inside, x, dtype.type(0))
        y_low = xp.floor(y).astype(numpy.int64)
        x_low = xp.floor(x).astype(numpy.int64)
        if geo.modulated:
            y_high, x_high = y_low + 1, x_low + 1
            self.clamp_y = self.clamp_x = None
            rows = (y_low >= 0, y_high <= h - 1)
            cols = (x_low >= 0, x_high <= w - 1)
            self.reads = [inside & rows[a] & cols[b] for a, b in ((0, 0), (0, 1), (1, 0), (1, 1))]
        else:
            # MXNet's v1 rule: a place at or past the last row reads that row alone.
            self.clamp_y, self.clamp_x = y_low >= h - 1, x_low >= w - 1
            y_high = xp.where(self.clamp_y, h - 1, y_low + 1)
            x_high = xp.where(self.clamp_x, w - 1, x_low + 1)
            y = xp.where(self.clamp_y, y_low.astype(dtype), y)
            x = xp.where(self.clamp_x, x_low.astype(dtype), x)
            self.reads = [inside] * 4
        self.inside, self.y, self.x = inside, y, x
        self.y_low, self.x_low, self.y_high, self.x_high = y_low, x_low, y_high, x_high
        # Corners not read still index some pixel (their values are then dropped).
        self.flat = [xp.clip(r, 0, h - 1) * w + xp.clip(c, 0, w - 1)
                     for r, c in ((y_low, x_low), (y_low, x_high), (y_high, x_low),
                                  (y_high, x_high))]

    def values(self, images, geo, xp):
        """The corners' values, each (n, dg, channels per dg, samples); zero where not read."""
        n = images.shape[0]
        dg = geo.dgroups
        cg = geo.c // dg
        planes = images.reshape(n, dg, cg, geo.h * geo.w)
        ni = xp.arange(n).reshape(n, 1, 1, 1)
        gi = xp.arange(dg).reshape(1, dg, 1, 1)
        ci = xp.arange(cg).reshape(1, 1, cg, 1)
        zero = images.dtype.type(0)
        return [xp.where(read, planes[ni, gi, ci, flat], zero)
                for flat, read in zip(self.flat, self.reads)]


def _sample(corners, values, dtype):
    """MXNet's bilinear sample: ``w1 * v1 + w2 * v2 + w3 * v3 + w4 * v4`` in the dtype, with
    ``lh = y - y_low``, ``hh = 1 - lh`` (x alike), ``w1 = hh * hw`` ... ``w4 = lh * lw``."""
    one = dtype.type(1)
    lh = corners.y - corners.y_low.astype(dtype)
    lw = corners.x - corners.x_low.astype(dtype)
    hh, hw = one - lh, one - lw
    v1, v2, v3, v4 = values
    return (hh * hw) * v1 + (hh * lw) * v2 + (lh * hw) * v3 + (lh * lw) * v4


def _columns(geo, images, off, mask, xp):
    """The column buffer of ``images`` (n, C * taps, out positions), MXNet's row order (channel,
    tap), with the corners and unmasked samples the backward reuses."""
    dtype = images.dtype
    y, x = _places(geo, off, dtype, xp)
    corners = _Corners(geo, y, x, xp)
    values = corners.values(images, geo, xp)
    samples = _sample(corners, values, dtype)
    if not geo.modulated:
        samples = xp.where(corners.inside, samples, dtype.type(0))
    cols = samples
    if mask is not None:
        m = mask.reshape(mask.shape[0], geo.dgroups, 1, geo.taps * geo.ho * geo.wo)
        cols = samples * m
    n = images.shape[0]
    return cols.reshape(n, geo.c * geo.taps, geo.ho * geo.wo), corners, values, samples


def _gemm_forward(geo, weight, cols, xp):
    n = cols.shape[0]
    g = geo.groups
    wm = weight.reshape(g, geo.filters // g, -1)
    out = xp.matmul(wm, cols.reshape(n, g, -1, cols.shape[-1]))
    return out.reshape(n, geo.filters, geo.ho, geo.wo)


def _forward(geo, x, off, mask, weight, bias, xp):
    out = xp.empty((geo.n, geo.filters, geo.ho, geo.wo), dtype=x.dtype)
    for a, z in geo.pieces():
        cols = _columns(geo, x[a:z], off[a:z], None if mask is None else mask[a:z], xp)[0]
        out[a:z] = _gemm_forward(geo, weight, cols, xp)
    if bias is not None:
        out += bias.reshape(1, -1, 1, 1)
    return out


def _offset_weights(corners, values, dtype):
    """MXNet's ``get_coordinate_weight``: the sample's derivative in y and in x, per channel,
    summed corner by corner in MXNet's order (a corner not read adds zero)."""
    ll, lh, hl, hh = values
    yl = corners.y_low.astype(dtype)
    xl = corners.x_low.astype(dtype)
    fy = (yl + dtype.type(1)) - corners.y          # ``argmax_h_low + 1 - argmax_h``
    fx = (xl + dtype.type(1)) - corners.x
    dy = corners.y - yl
    dx = corners.x - xl
    along_y = (-fx) * ll + (-dx) * lh + fx * hl + dx * hh
    along_x = (-fy) * ll + fy * lh + (-dy) * hl + dy * hh
    return along_y, along_x


def _scatter_weights(corners, dtype, xp):
    """MXNet's ``get_gradient_weight`` of the four corners: ``(y_low + 1 - y)`` for the low
    row and ``(y + 1 - y_high)`` for the high one (x alike), multiplied y first. A high corner
    one whole pixel away (the place exactly on a row) takes nothing, nor does v1's clamped one."""
    one, zero = dtype.type(1), dtype.type(0)
    y, x = corners.y, corners.x
    yh = corners.y_high.astype(dtype)
    xh = corners.x_high.astype(dtype)
    low_y = (corners.y_low.astype(dtype) + one) - y
    low_x = (corners.x_low.astype(dtype) + one) - x
    high_y = (y + one) - yh
    high_x = (x + one) - xh
    skip_y = yh - y >= one
    skip_x = xh - x >= one
    if corners.clamp_y is not None:
        skip_y = skip_y | corners.clamp_y
        skip_x = skip_x | corners.clamp_x
    high_y = xp.where(skip_y, zero, high_y)
    high_x = xp.where(skip_x, zero, high_x)
    return [low_y * low_x, low_y * high_x, high_y * low_x, high_y * high_x]


def _backward(geo, g, x, off, mask, weight, needs, xp):
    """Gradients of data, offset, (mask,) weight as MXNet's backward computes them."""
    dtype = x.dtype
    need_x, need_off = needs[0], needs[1]
    need_mask = geo.modulated and needs[2]
    need_w = needs[3 if geo.modulated else 2]
    gx = xp.zeros(x.shape, dtype=dtype) if need_x else None
    goff = xp.empty(off.shape, dtype=dtype) if need_off else None
    gmask = xp.empty(mask.shape, dtype=dtype) if need_mask else None
    gw = xp.zeros(weight.shape, dtype=dtype) if need_w else None
    groups, dg = geo.groups, geo.dgroups
    cg = geo.c // dg
    wm = weight.reshape(groups, geo.filters // groups, -1)
    samples_n = geo.taps * geo.ho * geo.wo
    for a, z in geo.pieces():
        n = z - a
        m = None if mask is None else mask[a:z]
        cols, corners, values, samples = _columns(geo, x[a:z], off[a:z], m, xp)
        gout = g[a:z].reshape(n, groups, geo.filters // groups, geo.ho * geo.wo)
        if need_w:
            gw += xp.matmul(gout, xp.swapaxes(cols.reshape(n, groups, -1, cols.shape[-1]), 2, 3)
                            ).sum(axis=0).reshape(weight.shape)
        if not (need_x or need_off or need_mask):
            continue
        # MXNet's column gradient: weight^T . output gradient, per group.
        gcols = xp.matmul(xp.swapaxes(wm, 1, 2), gout).reshape(n, dg, cg, samples_n)
        mk = None if m is None else m.reshape(n, dg, 1, samples_n)
        if need_off:
            along_y, along_x = _offset_weights(corners, values, dtype)
            gy = along_y * gcols
            gxx = along_x * gcols
            if mk is not None:
                gy, gxx = gy * mk, gxx * mk
            zero = dtype.type(0)
            gy = xp.where(corners.inside, gy.sum(axis=2, keepdims=True), zero)
            gxx = xp.where(corners.inside, gxx.sum(axis=2, keepdims=True), zero)
            pair = xp.stack([gy.reshape(n, dg, geo.taps, -1), gxx.reshape(n, dg, geo.taps, -1)],
                            axis=3)
            goff[a:z] = pair.reshape(off[a:z].shape)
        if need_mask:
            gm = (gcols * samples).sum(axis=2)
            gmask[a:z] = gm.reshape(m.shape)
        if need_x:
            top = gcols if mk is None else gcols * mk
            size = n * geo.c * geo.h * geo.w
            plane = geo.h * geo.w
            base = (xp.arange(n * dg).reshape(n, dg, 1, 1) * cg
                    + xp.arange(cg).reshape(1, 1, cg, 1)) * plane
            total = xp.zeros(size, dtype=numpy.float64)
            for flat, read, wt in zip(corners.flat, corners.reads, _scatter_weights(corners,
                                                                                      dtype, xp)):
                contrib = xp.where(read & corners.inside, wt, dtype.type(0)) * top
                idx = (base + flat).reshape(-1)
                total += xp.bincount(idx, weights=contrib.reshape(-1).astype(numpy.float64),
                                     minlength=size)
            gx[a:z] = total.astype(dtype).reshape(x[a:z].shape)
    return gx, goff, gmask, gw


def _run(op, data, offset, mask, weight, bias, kernel, stride, dilate, pad, num_filter,
         num_group, num_deformable_group, no_bias, layout, im2col_step=None):
    if no_bias:
        bias = None
    elif bias is None:
        raise TypeError("%s: bias is required unless no_bias=True" % op)
    geo = _Geometry(op, data, offset, mask, weight, bias, kernel, stride, dilate, pad,
                    num_filter, num_group, num_deformable_group, layout, im2col_step)
    inputs = [data, offset] + ([mask] if mask is not None else []) + [weight]
    if bias is not None:
        inputs.append(bias)
    raw = [a._data for a in inputs]
    xp = _xp_of(raw[0])
    dtype = raw[0].dtype
    # float16 (which MXNet's CPU GEMM refuses) runs in float32, rounded once at the end.
    work = numpy.dtype(numpy.float32) if dtype == numpy.float16 else dtype
    raw = [r.astype(work) if r.dtype != work else r for r in raw]
    x, off = raw[0], raw[1]
    m = raw[2] if mask is not None else None
    w = raw[3] if mask is not None else raw[2]
    b = raw[-1] if bias is not None else None
    with data._ctx.device_scope():
        out = _forward(geo, x, off, m, w, b, xp)

    def vjp(g, needs):
        g = g.astype(work) if g.dtype != work else g
        with data._ctx.device_scope():
            gx, goff, gmask, gw = _backward(geo, g, x, off, m, w,
                                            tuple(needs) + (False,) * 4, xp)
            grads = [gx, goff] + ([gmask] if mask is not None else []) + [gw]
            if bias is not None:
                grads.append(g.sum(axis=(0, 2, 3)) if needs[len(grads)] else None)
        return tuple(None if r is None else r.astype(dtype, copy=False) for r in grads)
    return _result(out.astype(dtype, copy=False), data._ctx, tuple(inputs), vjp)


def DeformableConvolution(data=None, offset=None, weight=None, bias=None, kernel=None,  # noqa: N802
                          stride=(), dilate=(), pad=(), num_filter=None, num_group=1,
                          num_deformable_group=1, workspace=1024, no_bias=False, layout=None,
                          **kwargs):
    """2-D deformable convolution (v1): ``data`` (N, C, H, W) sampled bilinearly at each kernel
    tap moved by ``offset`` (N, num_deformable_group * 2 * kh * kw, H', W': (dy, dx) per tap,
    the channels split into ``num_deformable_group`` groups that share offsets), then convolved
    with ``weight`` (num_filter, C / num_group, kh, kw) in ``num_group`` groups, plus ``bias``
    (num_filter,) unless ``no_bias``. Places outside [0, H) x [0, W) read zero; past the last
    row or column a place reads that row or column. ``kernel``, ``stride`` (1), ``dilate`` (1)
    and ``pad`` (0) are (h, w); ``workspace`` is accepted and unused; ``layout`` must be NCHW.
    Returns (N, num_filter, H', W'); differentiable in data, offset, weight and bias."""
    return _run("DeformableConvolution", data, offset, None, weight, bias, kernel, stride,
                dilate, pad, num_filter, num_group, num_deformable_group, no_bias, layout)


def ModulatedDeformableConvolution(data=None, offset=None, mask=None, weight=None,  # noqa: N802
                                   bias=None, kernel=None, stride=(), dilate=(), pad=(),
                                   num_filter=None, num_group=1, num_deformable_group=1,
                                   workspace=1024, no_bias=False, im2col_step=64, layout=None,
                                   **kwargs):
    """2-D modulated deformable convolution (v2): as ``DeformableConvolution``, each sample also
    multiplied by ``mask`` (N, num_deformable_group * kh * kw, H', W'); places inside
    (-1, H) x (-1, W) are sampled with the corners outside the image reading zero. The batch
    must be at most ``im2col_step`` (64) or a multiple of it, as MXNet requires (the value does
    not change the results). Differentiable in data, offset, mask, weight and bias (MXNet's CPU
    build computes the forward only)."""
    return _run("ModulatedDeformableConvolution", data, offset, mask, weight, bias, kernel,
                stride, dilate, pad, num_filter, num_group, num_deformable_group, no_bias, layout,
                im2col_step)
