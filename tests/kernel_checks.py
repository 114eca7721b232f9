"""What the tests of the compiled loops share: raw-bit comparison, the loops switched on whatever
the environment says, and a count of the loops that ran (a test of the bits must see them run)."""
from __future__ import annotations

import numpy as np

from trainer_cli import _jit


def same_bits(a, b, nan_sign=True):
    """``a`` and ``b`` equal bit for bit; with ``nan_sign=False`` a NaN may carry either sign
    (where two NaNs meet, which one a compiled loop passes on is the compiler's choice)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    if not nan_sign and a.dtype.kind == "f":
        nan = np.isnan(a)
        np.testing.assert_array_equal(nan, np.isnan(b))
        a, b = a[~nan], b[~nan]
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


def loops_on(patch, module=None, min_size=16):
    """numba's loops on (``TRAINER_NO_NUMBA`` ignored); ``module``'s ``MIN_SIZE`` lowered, so
    that small test arrays take them too."""
    patch.setattr(_jit, "_numba", None)
    patch.delenv("TRAINER_NO_NUMBA", raising=False)
    if module is not None:
        patch.setattr(module, "MIN_SIZE", min_size)


def loops_off(patch):
    """The NumPy bodies, as with ``TRAINER_NO_NUMBA=1``."""
    patch.setattr(_jit, "_numba", False)


def count_calls(patch, module, *names):
    """A list that gets each of ``module``'s functions ``names`` appended when it is called."""
    calls = []
    for name in names:
        real = getattr(module, name)
        patch.setattr(module, name, lambda *a, real=real, name=name: calls.append(name)
                      or real(*a))
    return calls
