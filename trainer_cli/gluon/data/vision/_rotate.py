"""Rotating float32 images (CHW or NCHW) about their centre: MXNet 1.9.1's ``image.imrotate``
and ``image.random_rotate``, the same array operations in the same order (a grid of source
positions rotated, normalised, optionally scaled, then ``BilinearSampler``), so the pixels are
MXNet's. ``mx.image`` and the ``Rotate``/``RandomRotation`` transforms use them."""
from __future__ import annotations

from numbers import Number

import numpy

from .... import ndarray as nd

__all__ = ["imrotate", "random_rotate"]


def imrotate(src, rotation_degrees, zoom_in=False, zoom_out=False):
    """``src`` (float32, CHW or NCHW) rotated by ``rotation_degrees`` (counter-clockwise; a
    number, or for NCHW an NDArray of one angle per image), keeping its shape; the corners
    outside the source read zeros. ``zoom_in``: scaled so that no such corner shows;
    ``zoom_out``: so that the whole source shows."""
    if zoom_in and zoom_out:
        raise ValueError("`zoom_in` and `zoom_out` cannot be both True")
    if src.dtype is not numpy.float32:
        raise TypeError("Only `float32` images are supported by this function")
    expanded = src.ndim == 3
    if expanded:
        src = src.expand_dims(axis=0)
        if not isinstance(rotation_degrees, Number):
            raise TypeError("When a single image is passed the rotation angle is required to "
                            "be a scalar.")
    elif src.ndim != 4:
        raise ValueError("Only 3D and 4D are supported by this function")
    ctx = src.context
    if isinstance(rotation_degrees, Number):
        rotation_degrees = nd.array([rotation_degrees] * len(src), ctx=ctx)
    if len(src) != len(rotation_degrees):
        raise ValueError("The number of images must be equal to the number of rotation angles")
    rotation_rad = numpy.pi * rotation_degrees.as_in_context(ctx) / 180
    rotation_rad = rotation_rad.expand_dims(axis=1).expand_dims(axis=2)
    _, _, h, w = src.shape
    # A grid centred on the image; normalised to [-1, 1] after the rotation (aspect ratio kept).
    hscale, wscale = float(h - 1) / 2, float(w - 1) / 2
    h_matrix = (nd.repeat(nd.arange(h, ctx=ctx).astype("float32").reshape(h, 1), w, axis=1)
                - hscale).expand_dims(axis=0)
    w_matrix = (nd.repeat(nd.arange(w, ctx=ctx).astype("float32").reshape(1, w), h, axis=0)
                - wscale).expand_dims(axis=0)
    c_alpha, s_alpha = nd.cos(rotation_rad), nd.sin(rotation_rad)
    w_matrix_rot = (w_matrix * c_alpha - h_matrix * s_alpha) / wscale
    h_matrix_rot = (w_matrix * s_alpha + h_matrix * c_alpha) / hscale
    h, w = nd.array([h], ctx=ctx), nd.array([w], ctx=ctx)
    if zoom_in or zoom_out:
        rho_corner = nd.sqrt(h * h + w * w)
        ang_corner = nd.arctan(h / w)
        turn = nd.abs(rotation_rad)
        max_x = nd.maximum(nd.abs(rho_corner * nd.cos(ang_corner + turn)),
                           nd.abs(rho_corner * nd.cos(ang_corner - turn)))
        max_y = nd.maximum(nd.abs(rho_corner * nd.sin(ang_corner + turn)),
                           nd.abs(rho_corner * nd.sin(ang_corner - turn)))
        if zoom_out:
            scale = nd.maximum(max_x / w, max_y / h)
        else:
            scale = nd.minimum(w / max_x, h / max_y)
        scale = scale.expand_dims(axis=3)
    else:
        scale = 1
    grid = nd.concat(w_matrix_rot.expand_dims(axis=1), h_matrix_rot.expand_dims(axis=1),
                     dim=1) * scale
    rotated = nd.BilinearSampler(src, grid)
    return rotated[0] if expanded else rotated


def random_rotate(src, angle_limits, zoom_in=False, zoom_out=False):
    """``imrotate`` by an angle drawn uniformly from ``angle_limits`` (degrees; one per image of
    an NCHW batch), with ``numpy.random`` as MXNet draws it."""
    if src.ndim == 3:
        rotation_degrees = numpy.random.uniform(*angle_limits)
    else:
        rotation_degrees = nd.array(numpy.random.uniform(*angle_limits, size=src.shape[0]))
    return imrotate(src, rotation_degrees, zoom_in=zoom_in, zoom_out=zoom_out)
