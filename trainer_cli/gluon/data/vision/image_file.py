"""Decoding image files (JPEG, PNG, ...) into MXNet's layout: uint8 (H, W, 3) RGB, or (H, W, 1)
gray with ``flag=0``, through Pillow (the ``vision`` extra).

Files are read bounded (a regular file of at most ``MAX_FILE_BYTES``; a FIFO or device is
refused) and an image of more than ``MAX_PIXELS`` pixels is refused before it is decoded.
A gray read (``flag=0``) of a colour image converts as MXNet's OpenCV does: libpng's weights
for a PNG, the JPEG's own luma plane for a JPEG; 8-bit PNGs give MXNet's pixels exactly in
colour and in gray (JPEG decoders can differ in their last bit between libjpeg builds).
"""
from __future__ import annotations

import io
import os

import numpy

from ...._bounded import MiB, read_regular
from ....base import MXNetError

__all__ = ["imread", "imdecode", "opencv_gray", "ImageFileError", "MAX_FILE_BYTES", "MAX_PIXELS"]

MAX_FILE_BYTES = 256 * MiB
MAX_PIXELS = 1 << 28


class ImageFileError(MXNetError, ValueError):
    """An image file that cannot be read or decoded (MXNet raises MXNetError there)."""


_Image = None     # PIL.Image once imported (an import statement per image costs microseconds)


def _pillow():
    global _Image
    if _Image is None:
        try:
            from PIL import Image
        except ImportError:
            raise ImportError("decoding image files needs Pillow: pip install "
                              "'trainer-cli[vision]' (or pip install Pillow)") from None
        _Image = Image
    return _Image


def _to_array(image, flag, name):
    width, height = image.size
    if width * height > MAX_PIXELS:
        raise ImageFileError("%s: %dx%d pixels is more than the %d this reader decodes"
                             % (name, width, height, MAX_PIXELS))
    if flag == 0 and image.format == "JPEG" and image.mode in ("RGB", "YCbCr", "L"):
        # libjpeg gives the luma plane itself for a gray read, as OpenCV asks it to.
        image.draft("L", image.size)
        return numpy.asarray(image.convert("L"), dtype=numpy.uint8)[..., None]
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):
        # 16 bits: OpenCV's 8-bit read keeps the high byte.
        high = (numpy.asarray(image, dtype=numpy.uint32) >> 8).astype(numpy.uint8)
        rgb = numpy.repeat(high[..., None], 3, axis=2)
        if flag == 0:
            return high[..., None]
    elif image.mode in ("L", "LA") and flag == 0:
        return numpy.asarray(image.convert("L"), dtype=numpy.uint8)[..., None]
    else:
        # convert() copies even an image that is RGB already.
        rgb = numpy.asarray(image if image.mode == "RGB" else image.convert("RGB"),
                            dtype=numpy.uint8)
    if flag != 0:
        return numpy.ascontiguousarray(rgb)
    wide = rgb.astype(numpy.uint32)
    if image.format == "PNG":
        # libpng's rgb_to_gray with the weights OpenCV sets (0.299, 0.587), which libpng turns
        # into 15-bit fixed point by truncating (29900 * 32768 // 100000 = 9797): truncated.
        gray = (wide[..., 0] * 9797 + wide[..., 1] * 19234 + wide[..., 2] * 3737) >> 15
    else:
        gray = opencv_gray(wide)
    return gray.astype(numpy.uint8)[..., None]


def opencv_gray(pixels):
    """OpenCV's ``cvtColor`` RGB to gray of (..., 3) integer pixels, channel 0 taken as red:
    weights 4899, 9617, 1868 (/ 2**14), rounded; an int array."""
    wide = pixels.astype(numpy.int64)
    return (wide[..., 0] * 4899 + wide[..., 1] * 9617 + wide[..., 2] * 1868 + (1 << 13)) >> 14


def imdecode(buf, flag=1, name="<buffer>"):
    """Decode an encoded image (bytes) into a uint8 NumPy array (H, W, 3), or (H, W, 1) with
    ``flag=0``."""
    Image = _pillow()
    try:
        with Image.open(io.BytesIO(bytes(buf))) as image:
            image.load()
            return _to_array(image, flag, name)
    except ImageFileError:
        raise
    except (OSError, ValueError, Image.DecompressionBombError, SyntaxError) as exc:
        raise ImageFileError("%s: cannot decode the image (%s)" % (name, exc)) from None


def imread(path, flag=1):
    """The image file at ``path`` as a uint8 NumPy array, as MXNet's ``image.imread``."""
    path = os.fspath(path)
    try:
        data = read_regular(path, MAX_FILE_BYTES)
    except OSError as exc:
        raise ImageFileError("%s: cannot read the image file (%s)"
                             % (path, getattr(exc, "strerror", None) or exc)) from None
    return imdecode(data, flag, path)
