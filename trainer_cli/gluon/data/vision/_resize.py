"""OpenCV's ``cv::resize`` for Gluon's transforms and ``mx.image``: the implementation lives a
layer below, in ``trainer_cli/ndarray/_opencv_resize.py``, which ``nd.image.resize`` shares."""
from ....ndarray._opencv_resize import INTERPOLATIONS, resize

__all__ = ["resize", "INTERPOLATIONS"]
