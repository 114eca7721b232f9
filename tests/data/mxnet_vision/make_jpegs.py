"""The JPEG files make_vision_golden.py decodes with MXNet (run with Pillow installed, before it).

A smooth colour image (JPEG's usual content; 4:2:0 chroma subsampling, Pillow's default) and a
gray one.
"""
import os

import numpy
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))

y, x = numpy.mgrid[0:24, 0:32]
rgb = numpy.stack([x * 8, y * 10, (x + y) * 4], axis=-1).clip(0, 255).astype(numpy.uint8)
Image.fromarray(rgb).save(os.path.join(HERE, "tiny_rgb.jpg"), quality=90)
Image.fromarray((x * 4 + y * 3).astype(numpy.uint8)).save(os.path.join(HERE, "tiny_gray.jpg"),
                                                          quality=90)
