"""MXNet 1.9.1's image colour operators (brightness, contrast, saturation, hue, lighting) for
Gluon's transforms: the arithmetic lives a layer below, in ``trainer_cli/ndarray/_image_arith.py``,
which ``nd.image``'s operators share."""
from ....ndarray._image_arith import brightness, contrast, hue, lighting, saturation

__all__ = ["brightness", "contrast", "saturation", "hue", "lighting"]
