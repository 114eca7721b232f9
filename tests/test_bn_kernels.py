"""BatchNorm's numba passes give the NumPy path's bits.

Each case runs BatchNorm forward and backward twice, with the kernels (``_jit`` on, the size floor
lowered) and on the NumPy reference path (numba off), and compares the raw bits of the output,
of every gradient and of the moving statistics, in training and inference mode, with and without
``fix_gamma``, for shapes whose rows take each branch of NumPy's pairwise summation (under 8,
up to 128, halved once and several times). Skipped where numba is not installed.
"""
import numpy as np
import pytest

from trainer_cli import _jit, autograd, gluon, nd
from trainer_cli.ndarray import _bn_kernels as B
from trainer_cli.ndarray import _pairwise as P
from trainer_cli.ndarray import host_threads

from kernel_checks import loops_on
from test_conv_kernels import _data, _same_bits, assert_training_is_bitwise

pytest.importorskip("numba")

SHAPES = [(4, 3, 9, 9), (5, 4, 1, 1), (3, 2, 1, 7), (2, 3, 17, 19), (3, 2, 40, 40),
          (2, 3, 4, 5, 6), (4, 3, 200), (1, 2, 64, 33), (6, 40, 4, 4)]


def _run(arrays, head, kernels, training, fix_gamma, monkeypatch, relu=False):
    monkeypatch.setattr(_jit, "_numba", None if kernels else False)
    monkeypatch.delenv("TRAINER_NO_NUMBA", raising=False)
    calls = []
    if kernels:
        for name in ("_sums", "_scale_shift", "_grad_sums", "_grad_input"):
            kernel = getattr(B, name)
            monkeypatch.setattr(B, name, _counting(kernel, name, calls))
    x, gamma, beta, mm, mv = (nd.array(a, dtype=a.dtype) for a in arrays)
    for a in (x, gamma, beta):
        a.attach_grad()
    with np.errstate(all="ignore"):
        with autograd.record(train_mode=training):
            op = nd.contrib.BatchNormWithReLU if relu else nd.BatchNorm
            out = op(x, gamma, beta, mm, mv, eps=1e-3, momentum=0.9, fix_gamma=fix_gamma)
        out.backward(nd.array(head, dtype=head.dtype))
    return ([out.asnumpy(), x.grad.asnumpy(), gamma.grad.asnumpy(), beta.grad.asnumpy(),
             mm.asnumpy(), mv.asnumpy()], calls)


def _counting(kernel, name, calls):
    def call(*args):
        calls.append(name)
        return kernel(*args)
    return call


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("fix_gamma", [False, True])
@pytest.mark.parametrize("case", range(len(SHAPES)))
@pytest.mark.parametrize("special", [False, True])
@pytest.mark.parametrize("relu", [False, True])
def test_batchnorm_kernels_are_numpys(monkeypatch, dtype, training, fix_gamma, case, special,
                                      relu):
    """With ``relu`` (BatchNormWithReLU): one node whose pass applies the ReLU and whose
    backward masks the gradient first, against the NumPy path's two ops."""
    monkeypatch.setattr(B, "MIN_SIZE", 16)
    shape = SHAPES[case]
    c = shape[1]
    x = _data(shape, dtype, 21, special=special)
    if special:     # NaN and infinities in one channel only: the others stay finite
        x[:, 1:] = _data((shape[0], c - 1) + shape[2:], dtype, 22, special=False)
    gamma, beta = _data(c, dtype, 23, special=False), _data(c, dtype, 24, special=False)
    mm = _data(c, dtype, 25, special=False)
    mv = np.abs(_data(c, dtype, 26, special=False)) + 0.5
    head = _data(shape, dtype, 27, special=special)
    arrays = [x, gamma, beta, mm, mv]
    got, calls = _run(arrays, head, True, training, fix_gamma, monkeypatch, relu)
    expect, _ = _run(arrays, head, False, training, fix_gamma, monkeypatch, relu)
    assert calls == ((["_sums", "_sums"] if training else []) + ["_scale_shift", "_grad_sums"]
                     + (["_grad_input"] if training else []))
    for a, b in zip(got, expect):
        _same_bits(a, b)


def _predict(arrays, kernels, fix_gamma, relu, monkeypatch):
    """Predict mode outside recording, BatchNorm or BatchNormWithReLU; the output and the
    kernels that ran."""
    monkeypatch.setattr(_jit, "_numba", None if kernels else False)
    monkeypatch.delenv("TRAINER_NO_NUMBA", raising=False)
    calls = []
    if kernels:
        for name in ("_sums", "_scale_shift", "_predict"):
            monkeypatch.setattr(B, name, _counting(getattr(B, name), name, calls))
    x, gamma, beta, mm, mv = (nd.array(a, dtype=a.dtype) for a in arrays)
    op = nd.contrib.BatchNormWithReLU if relu else nd.BatchNorm
    with np.errstate(all="ignore"):
        out = op(x, gamma, beta, mm, mv, eps=1e-3, fix_gamma=fix_gamma)
    return out.asnumpy(), calls


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fix_gamma", [False, True])
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("case", range(len(SHAPES)))
def test_predict_mode_in_one_pass_is_numpys(monkeypatch, dtype, fix_gamma, relu, case):
    """Outside recording, predict mode's BatchNorm (and the ReLU after it) is one kernel that
    makes each channel's scale itself: the bits of NumPy's BatchNorm and then relu, with NaN,
    infinities, zero and tiny variances (eps decides) and negative values around the ReLU."""
    monkeypatch.setattr(B, "MIN_SIZE", 16)
    shape = SHAPES[case]
    c = shape[1]
    x = _data(shape, dtype, 31, special=True)
    gamma, beta = _data(c, dtype, 32, special=False), _data(c, dtype, 33, special=False)
    mm = _data(c, dtype, 34, special=False)
    mv = np.abs(_data(c, dtype, 35, special=False)) + 0.5
    mv[0] = 0                              # the scale is 1 / sqrt(eps) there
    mv[-1] = dtype(1e-7)                   # eps rounded to the dtype before the add
    arrays = [x, gamma, beta, mm, mv]
    got, calls = _predict(arrays, True, fix_gamma, relu, monkeypatch)
    expect, _ = _predict(arrays, False, fix_gamma, relu, monkeypatch)
    assert calls == ["_predict"]
    if relu:
        assert (expect < 0).sum() == 0 and np.isnan(expect).any()
    _same_bits(got, expect)


def test_predict_pass_on_threads_and_float16_data_is_numpys(monkeypatch):
    """Large arrays: the pass runs in ranges of channels on several threads; float16 data
    beside float32 parameters is computed in float32 and given back in float16."""
    monkeypatch.setattr(B, "MIN_SIZE", 16)
    monkeypatch.setattr(B, "SHIFT_SPLIT_SIZE", 64)
    monkeypatch.setattr(host_threads, "blas_threads", lambda: 3)
    c = 8
    for dtype in (np.float32, np.float16):
        with np.errstate(over="ignore"):        # float16: the largest values become inf
            x = _data((2, c, 9, 9), dtype, 41, special=True)
        params = [_data(c, np.float32, seed, special=False) for seed in (42, 43, 44)]
        mv = np.abs(_data(c, np.float32, 45, special=False)) + 0.5
        arrays = [x] + params + [mv]
        got, calls = _predict(arrays, True, False, True, monkeypatch)
        expect, _ = _predict(arrays, False, False, True, monkeypatch)
        assert calls == ["_predict"] * B.CHANNEL_PARTS and got.dtype == dtype
        _same_bits(got, expect)


@pytest.mark.parametrize("case", range(len(SHAPES)))
@pytest.mark.parametrize("relu", [False, True])
def test_batchnorm_by_channel_ranges_on_threads_is_numpys(monkeypatch, case, relu):
    """Large arrays are worked in ranges of channels on several threads: each pass once per
    range, and the NumPy path's bits on 1, 2 and 3 threads."""
    monkeypatch.setattr(B, "MIN_SIZE", 16)
    monkeypatch.setattr(B, "SPLIT_SIZE", 16)
    monkeypatch.setattr(B, "SHIFT_SPLIT_SIZE", 16)
    shape = SHAPES[case]
    c = shape[1]
    x = _data(shape, np.float32, 31)
    gamma, beta = _data(c, np.float32, 33, special=False), _data(c, np.float32, 34, special=False)
    mm, mv = _data(c, np.float32, 35, special=False), np.ones(c, np.float32)
    head = _data(shape, np.float32, 37)
    arrays = [x, gamma, beta, mm, mv]
    expect, _ = _run(arrays, head, False, True, False, monkeypatch, relu)
    for threads in (1, 2, 3):
        monkeypatch.setattr(host_threads, "blas_threads", lambda threads=threads: threads)
        got, calls = _run(arrays, head, True, True, False, monkeypatch, relu)
        assert calls.count("_grad_input") == min(c, B.CHANNEL_PARTS)
        assert calls.count("_scale_shift") == min(c, B.CHANNEL_PARTS)
        for a, b in zip(got, expect):
            _same_bits(a, b)


@pytest.mark.parametrize("compiled", [True, False])
def test_pairwise_is_numpys_sum(monkeypatch, compiled):
    """The summation alone, on rows long enough for several halvings (and beyond the planned
    widths), from an offset, of a contiguous array and of a strided view, against NumPy's; one
    workspace throughout, so that each width's plan replaces the last one's. Compiled (the
    block's eight sums as one vector) and as plain Python."""
    if compiled:
        loops_on(monkeypatch)
        pairwise = P.pairwise.compiled()
    else:
        pairwise = P.pairwise_loop
    rng = np.random.default_rng(3)
    widths = (0, 1, 7, 8, 9, 127, 128, 129, 136, 255, 512, 1000, 512, 4099, P.PLAN_MAX,
              P.PLAN_MAX + 1, 70001)
    for dtype in (np.float32, np.float64):
        tasks, values, _ = P.workspace(dtype, 0)
        for n in widths if compiled else widths[:12]:
            size = 2 * n + 6
            a = (rng.standard_normal(size) * 10.0 ** rng.integers(-3, 4, size)).astype(dtype)
            for view in (a, a[::2]):
                got = pairwise(view, 3, n, a.dtype.type(0), tasks, values)
                assert np.asarray(got, dtype).tobytes() == view[3:3 + n].sum().tobytes(), n


def test_batchnorm_kernels_decline_what_they_do_not_take(monkeypatch):
    monkeypatch.setattr(_jit, "_numba", None)
    x = np.ones((4, 8, 16, 16), np.float32)
    p = np.ones(8, np.float32)
    assert B.usable(x, p)
    assert not B.usable(x[:, :, ::2], p)                # not contiguous
    assert not B.usable(x.astype(np.float16), p)        # another dtype
    assert not B.usable(x, p.astype(np.float64))        # parameters of another dtype
    assert not B.usable(x.reshape(4, -1), p)            # (N, C): NumPy's reduction order differs
    assert not B.usable(x[:1, :1], p)                   # below the size floor
    monkeypatch.setattr(_jit, "_numba", False)
    assert not B.usable(x, p)


def test_cifar_block_training_is_bitwise_with_and_without_kernels(monkeypatch):
    """Three SGD-momentum steps of Conv2D+BatchNorm+ReLU blocks with a global pooling head."""
    monkeypatch.setattr(B, "MIN_SIZE", 16)
    nn = gluon.nn

    def layers():
        blocks = []
        for cin in (3, 8):
            blocks += [nn.Conv2D(8, 3, padding=1, use_bias=False, in_channels=cin),
                       nn.BatchNorm(in_channels=8), nn.Activation("relu")]
        return blocks + [nn.GlobalAvgPool2D(), nn.Dense(10, in_units=8)]
    assert_training_is_bitwise(monkeypatch, layers, (4, 3, 8, 8), 0.5, 1.5)


def test_batch_statistics_are_the_float64_ones_to_float32_rounding(monkeypatch):
    """The channel sums' order (the batch first, then each plane pairwise) keeps the statistics
    and the gradient's sums within float32 rounding of float64's, kernels on or off."""
    rng = np.random.default_rng(41)
    x = (rng.standard_normal((16, 24, 5, 5)) * 3 + 1).astype(np.float32)
    head = rng.standard_normal(x.shape).astype(np.float32)
    xd, hd = x.astype(np.float64), head.astype(np.float64)
    mean = xd.mean(axis=(0, 2, 3), keepdims=True)
    invstd = 1 / np.sqrt(xd.var(axis=(0, 2, 3), keepdims=True) + 1e-5)
    xhat = (xd - mean) * invstd
    want_out = xhat
    want_gbeta = hd.sum(axis=(0, 2, 3))
    want_ggamma = (hd * xhat).sum(axis=(0, 2, 3))
    for kernels in (True, False):
        monkeypatch.setattr(_jit, "_numba", None if kernels else False)
        monkeypatch.setattr(B, "MIN_SIZE", 16)
        data = nd.array(x)
        gamma, beta = nd.ones(24), nd.zeros(24)
        for a in (data, gamma, beta):
            a.attach_grad()
        with autograd.record():
            out = nd.BatchNorm(data, gamma, beta, nd.zeros(24), nd.ones(24), fix_gamma=False,
                               eps=1e-5)
        out.backward(nd.array(head))
        np.testing.assert_allclose(out.asnumpy(), want_out, rtol=1e-5, atol=2e-6)
        np.testing.assert_allclose(beta.grad.asnumpy(), want_gbeta, rtol=1e-5, atol=2e-5)
        np.testing.assert_allclose(gamma.grad.asnumpy(), want_ggamma, rtol=1e-5, atol=2e-5)
