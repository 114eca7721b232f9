"""3-D convolutions make their column matrix and sum its gradient back into the input in numba
loops (``_conv_kernels.im2col`` / ``col2im`` take 3-D kernels too): the NumPy window slices'
bits (a copy, and sums in window-offset order from zero), over strides, dilations, paddings and
groups."""
import numpy as np
import pytest

from kernel_checks import count_calls, loops_off, loops_on, same_bits
from trainer_cli import autograd, nd
from trainer_cli.ndarray import _conv_kernels as K

pytest.importorskip("numba")

CASES = [  # shape, filters, kernel, stride, dilate, pad, groups
    ((8, 8, 8, 8, 8), 16, (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), 1),
    ((2, 3, 7, 9, 6), 4, (3, 2, 3), (2, 1, 2), (1, 2, 1), (1, 0, 2), 1),
    ((3, 4, 5, 6, 7), 6, (1, 1, 1), (1, 1, 1), (1, 1, 1), (0, 0, 0), 2),
    ((2, 4, 9, 9, 9), 4, (3, 3, 3), (1, 1, 1), (2, 2, 2), (2, 2, 2), 4),
]


def _run(case, dtype):
    shape, f, kernel, stride, dilate, pad, groups = case
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal(shape).astype(dtype)
    x0.flat[::11] = -0.0
    x0.flat[4] = np.inf
    w0 = rng.standard_normal((f, shape[1] // groups) + kernel).astype(dtype)
    x, w, b = (nd.array(a, dtype=dtype) for a in (x0, w0, rng.standard_normal(f)))
    for a in (x, w, b):
        a.attach_grad()
    with autograd.record():
        y = nd.Convolution(x, w, b, kernel=kernel, stride=stride, dilate=dilate, pad=pad,
                           num_filter=f, num_group=groups)
    y.backward(nd.array(rng.standard_normal(y.shape).astype(dtype), dtype=dtype))
    return [a.asnumpy() for a in (y, x.grad, w.grad, b.grad)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_the_loops_give_the_window_slices_bits(monkeypatch, case, dtype):
    loops_on(monkeypatch, K)
    calls = count_calls(monkeypatch, K, "_im2col_3d", "_col2im_3d")
    with np.errstate(all="ignore"):
        on = _run(case, dtype)
        assert set(calls) == {"_im2col_3d", "_col2im_3d"}, calls
        loops_off(monkeypatch)
        off = _run(case, dtype)
    for a, b in zip(on, off):
        same_bits(a, b, nan_sign=False)
