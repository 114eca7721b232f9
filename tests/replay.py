"""What the tests replaying a recording of the real MXNet 1.9.1 share: the recording
(tests/data/FOLDER/FILE.npz, or .json) with the generator that made it (FOLDER/GENERATOR.py, which
computes the same values through this package's API), and the comparison of one value."""
import importlib
import json
import os
import sys

import numpy as np

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def recording(folder, npz, generator):
    """``(the recorded arrays, the generator module)`` of tests/data/``folder``; a ``.json``
    recording gives its ``cases``."""
    here = os.path.join(DATA, folder)
    if here not in sys.path:
        sys.path.insert(0, here)
    if npz.endswith(".json"):
        with open(os.path.join(here, npz)) as f:
            return json.load(f)["cases"], importlib.import_module(generator)
    with np.load(os.path.join(here, npz), allow_pickle=False) as recorded:
        return dict(recorded), importlib.import_module(generator)


def same_layout(got, want):
    """``got`` as an array, after checking that it has ``want``'s dtype and shape."""
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape
    return got


def same_bits(got, want):
    """``got`` is ``want``: its dtype, shape and every value (NaN where ``want`` has NaN)."""
    np.testing.assert_array_equal(same_layout(got, want), want)
