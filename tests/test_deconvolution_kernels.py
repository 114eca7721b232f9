"""Deconvolution (Conv1D/2D/3DTranspose) on the CPU sums its columns into the output with the
convolution's column-gradient loop and takes its output gradient's windows with the column
loop (``_conv_kernels``): the same bits as the NumPy frame it used before, for 1-D to 3-D,
strides, dilations, paddings, ``adj`` and groups."""
import numpy as np
import pytest

from kernel_checks import count_calls, loops_off, loops_on, same_bits
from trainer_cli import autograd, nd
from trainer_cli.ndarray import _conv_kernels as K

pytest.importorskip("numba")

CASES = [  # data shape, filters, kernel, stride, dilate, pad, adj, groups
    ((16, 64, 16, 16), 32, (4, 4), (2, 2), (1, 1), (1, 1), (0, 0), 1),
    ((2, 6, 5, 7), 4, (3, 3), (2, 1), (1, 2), (0, 1), (1, 0), 2),
    ((2, 3, 4, 5, 6), 4, (3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), (1, 1, 1), 1),
    ((3, 4, 9), 6, (3,), (2,), (1,), (1,), (0,), 1),
]


def _run(case, dtype):
    shape, f, kernel, stride, dilate, pad, adj, groups = case
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal(shape).astype(dtype)
    x0.flat[::11] = -0.0
    w0 = rng.standard_normal((shape[1], f // groups) + kernel).astype(dtype)
    x, w, b = (nd.array(a, dtype=dtype) for a in (x0, w0, rng.standard_normal(f)))
    for a in (x, w, b):
        a.attach_grad()
    with autograd.record():
        y = nd.Deconvolution(x, w, b, kernel=kernel, stride=stride, dilate=dilate, pad=pad,
                             adj=adj, num_filter=f, num_group=groups, no_bias=False)
    y.backward(nd.array(rng.standard_normal(y.shape).astype(dtype), dtype=dtype))
    return [a.asnumpy() for a in (y, x.grad, w.grad, b.grad)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_the_loops_give_the_frames_bits(monkeypatch, case, dtype):
    loops_on(monkeypatch, K)
    calls = count_calls(monkeypatch, K, "_col2im", "_col2im_3d", "_im2col", "_im2col_gather",
                        "_im2col_3d")
    on = _run(case, dtype)
    if len(case[2]) > 1:
        assert any(c.startswith("_col2im") for c in calls) and \
            any(c.startswith("_im2col") for c in calls), calls
    loops_off(monkeypatch)
    off = _run(case, dtype)
    for a, b in zip(on, off):
        same_bits(a, b)
