"""3x3 stride-1 convolutions by Winograd's F(2x2, 3x3) (``ndarray.winograd``).

- its numba transforms give the bits of its NumPy reference, specials included;
- it computes the convolution im2col computes (float64: to 1e-12; float32: to float32 rounding)
  and the gradients finite differences give;
- its pieces give the same bits on any thread count;
- which convolutions take it.
"""
import numpy as np
import pytest

from gradcheck import check_grad
from test_conv_kernels import _data, _same_bits, assert_training_is_bitwise
from test_conv_kernels import _run as _conv_run
from trainer_cli import _jit, autograd, gluon, nd
from trainer_cli.ndarray import _conv_kernels as K
from trainer_cli.ndarray import _winograd_kernels as WK
from trainer_cli.ndarray import host_threads
from trainer_cli.ndarray import winograd as W

CASES = [
    # x shape, filters, pad
    ((2, 3, 8, 8), 4, (1, 1)),          # even output, the usual "same" padding
    ((3, 2, 9, 7), 5, (0, 0)),          # odd output (a spare tile row and column), no padding
    ((2, 4, 6, 11), 3, (2, 1)),         # wider padding than the kernel's reach, non-square
    ((3, 5, 3, 3), 6, (0, 0)),          # a single output, one tile
    ((2, 3, 5, 4), 6, (1, 0)),          # padding along one axis only
    ((2, 3, 5, 6), 4, (3, 4)),          # tiles wholly in the padding
]


@pytest.fixture
def every_conv(monkeypatch):
    """Winograd for every channel count and shape, the kernels for every size."""
    monkeypatch.setattr(W, "MIN_CHANNELS", 1)
    monkeypatch.setattr(W, "WASTE", float("inf"))
    monkeypatch.setattr(W, "MAX_FILTERS_PER_TILE", float("inf"))
    monkeypatch.setattr(K, "MIN_SIZE", 16)


def _conv(filters, pad, relu=False):
    def conv(x, w, b=None):
        return nd.nn._convolution(x, w, b, (3, 3), None, None, pad, filters, 1, None, relu)
    return conv


def _arrays(case, dtype, with_bias=True, special=True):
    xshape, filters, _ = CASES[case]
    arrays = [_data(xshape, dtype, 1, special),
              _data((filters, xshape[1], 3, 3), dtype, 2, special)]
    if with_bias:
        arrays.append(_data((filters,), dtype, 3, special))
    return arrays


def _run(fn, arrays, kernels, monkeypatch, special_head=True):
    """(output, gradients) of ``fn(*arrays)``, and the transform kernels that ran."""
    return _conv_run(fn, arrays, 4, kernels, monkeypatch, special_head, WK,
                     ("_filter", "_input", "_output", "_grad", "_input_grad", "_filter_grad"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_winograd_kernels_are_numpys(every_conv, monkeypatch, dtype, relu, with_bias, case):
    pytest.importorskip("numba")
    _, filters, pad = CASES[case]
    arrays = _arrays(case, dtype, with_bias)
    out, grads, calls = _run(_conv(filters, pad, relu), arrays, True, monkeypatch)
    ref_out, ref_grads, ref_calls = _run(_conv(filters, pad, relu), arrays, False, monkeypatch)
    assert set(calls) == {"_filter", "_input", "_output", "_grad", "_input_grad",
                          "_filter_grad"} and not ref_calls
    _same_bits(out, ref_out)
    for got, expect in zip(grads, ref_grads):
        _same_bits(got, expect)


def _im2col(monkeypatch, fn, arrays):
    monkeypatch.setattr(W, "MIN_CHANNELS", 1 << 30)
    monkeypatch.setattr(W, "WASTE", 0.0)
    try:
        return _run(fn, arrays, True, monkeypatch, special_head=False)
    finally:
        monkeypatch.setattr(W, "MIN_CHANNELS", 1)
        monkeypatch.setattr(W, "WASTE", float("inf"))


@pytest.mark.parametrize("kernels", [True, False])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_winograd_computes_im2cols_convolution(every_conv, monkeypatch, case, kernels):
    """float64: the same numbers as im2col's to 1e-12; float32: within float32 rounding."""
    _, filters, pad = CASES[case]
    conv = _conv(filters, pad, relu=True)
    for dtype, rtol in ((np.float64, 1e-12), (np.float32, 2e-6)):
        arrays = _arrays(case, dtype, special=False)
        expect, expect_grads, calls = _im2col(monkeypatch, conv, arrays)
        assert not calls
        monkeypatch.setattr(_jit, "_numba", None if kernels else False)
        got, grads, _ = _run(conv, arrays, kernels, monkeypatch, special_head=False)
        for a, b in zip([got] + grads, [expect] + expect_grads):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * np.abs(b).max())


@pytest.mark.parametrize("case", [0, 1, 2])
def test_winograd_gradients_match_finite_differences(every_conv, case):
    xshape, filters, pad = CASES[case]
    x, w, b = _arrays(case, np.float64, special=False)
    check_grad(lambda x, w, b: nd.Convolution(x, w, b, kernel=(3, 3), pad=pad, num_filter=filters),
               x, w, b)


def test_winograd_pieces_give_the_same_bits_on_any_thread_count(every_conv, monkeypatch):
    """One image per piece on 1, 2 and 3 threads: the same bits, the weight gradient's sum of the
    pieces included; and the same convolution as one piece of the whole batch."""
    monkeypatch.setattr(W, "PIECE_ELEMENTS", 1)
    arrays = [_data((5, 3, 7, 8), np.float32, 1), _data((4, 3, 3, 3), np.float32, 2),
              _data((4,), np.float32, 3)]
    conv = _conv(4, (1, 1), relu=True)
    results = []
    for threads in (1, 2, 3):
        monkeypatch.setattr(host_threads, "blas_threads", lambda threads=threads: threads)
        out, grads, _ = _run(conv, arrays, True, monkeypatch)
        results.append([out] + grads)
    for other in results[1:]:
        for got, expect in zip(other, results[0]):
            _same_bits(got, expect)
    arrays = [a.astype(np.float64) for a in _arrays(0, np.float32, special=False)]
    by_image, _, _ = _run(conv, arrays, True, monkeypatch, special_head=False)
    monkeypatch.setattr(W, "PIECE_ELEMENTS", 1 << 40)
    whole, _, _ = _run(conv, arrays, True, monkeypatch, special_head=False)
    np.testing.assert_allclose(by_image, whole, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("relu", [False, True])
def test_bias_gradient_from_row_sums_is_numpys(every_conv, monkeypatch, relu):
    """The bias gradient summed from the rows the masking kernel sums on the way, over pieces of
    a few images on two threads: the bits of NumPy's ``sum(axis=(0, 2))`` of the masked (N, F, P)
    gradient (seven images of 11x11 outputs: rows of 121 values, NumPy's one block)."""
    pytest.importorskip("numba")
    monkeypatch.setattr(W, "PIECE_ELEMENTS", 1 << 10)
    monkeypatch.setattr(host_threads, "blas_threads", lambda: 2)
    arrays = [_data((7, 3, 11, 11), np.float32, 1, special=False),
              _data((5, 3, 3, 3), np.float32, 2, special=False), _data((5,), np.float32, 3)]
    conv = _conv(5, (1, 1), relu)
    names = ("mask_rows", "bias_totals")
    out, grads, calls = _conv_run(conv, arrays, 4, True, monkeypatch, False, K, names)
    assert calls.count("mask_rows") > 2 and "bias_totals" in calls
    head = _data(out.shape, np.float32, 4, special=False)
    gm = head * (out > 0) if relu else head
    _same_bits(grads[2], gm.reshape(7, 5, -1).sum(axis=(0, 2)))
    _, ref_grads, ref_calls = _conv_run(conv, arrays, 4, False, monkeypatch, False, K, names)
    assert "bias_totals" not in ref_calls
    for got, expect in zip(grads, ref_grads):
        _same_bits(got, expect)


def test_an_empty_batch_through_winograd(every_conv):
    x, w, b = nd.zeros((0, 3, 8, 8)), nd.ones((4, 3, 3, 3)), nd.ones(4)
    for a in (x, w, b):
        a.attach_grad()
    with autograd.record():
        y = nd.Convolution(x, w, b, kernel=(3, 3), pad=(1, 1), num_filter=4)
    y.backward()
    assert y.shape == (0, 4, 8, 8) and x.grad.shape == (0, 3, 8, 8)
    assert w.grad.shape == (4, 3, 3, 3) and not w.grad.asnumpy().any()
    assert not b.grad.asnumpy().any()


def test_a_non_contiguous_input_takes_the_reference_path(every_conv, monkeypatch):
    base = _data((2, 3, 8, 8), np.float32, 1, special=False)
    w = _data((4, 3, 3, 3), np.float32, 2, special=False)
    # The library's own transpose (nd's returns a new array, as MXNet's): a view
    from trainer_cli.ndarray import ops
    strided = ops.transpose(nd.array(base), (0, 1, 3, 2))
    assert not strided._data.flags.c_contiguous
    got = nd.Convolution(strided, nd.array(w), kernel=(3, 3), pad=(1, 1), num_filter=4,
                         no_bias=True)
    expect = nd.Convolution(nd.array(np.ascontiguousarray(base.transpose(0, 1, 3, 2))),
                            nd.array(w), kernel=(3, 3), pad=(1, 1), num_filter=4, no_bias=True)
    _same_bits(got.asnumpy(), expect.asnumpy())


def test_a_training_step_is_bitwise_with_and_without_kernels(every_conv, monkeypatch):
    """Three SGD-momentum steps of a small Conv+BatchNorm+ReLU net: the same weights."""
    nn = gluon.nn
    assert_training_is_bitwise(monkeypatch, lambda: [
        nn.Conv2D(6, 3, padding=1, use_bias=False, in_channels=3), nn.BatchNorm(in_channels=6),
        nn.Activation("relu"), nn.Conv2D(6, 3, activation="relu", in_channels=6),
        nn.GlobalAvgPool2D(), nn.Dense(10, in_units=6)], (4, 3, 10, 10))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_filter_transforms_over_several_runs_are_numpys(every_conv, monkeypatch, dtype):
    """The filter's transforms work on runs of FILTER_BLOCK (filter, channel) pairs: over
    several runs and a partial last one, the same bits as the NumPy reference, specials
    included."""
    pytest.importorskip("numba")
    channels = (2 * WK.FILTER_BLOCK) // 13 + 2         # 13 filters: two runs and a part
    w = _data((13, channels, 3, 3), dtype, 5, True)
    du = _data((16, 13, channels), dtype, 6, True)
    got = W.filter_transform(w), W.filter_grad(du)
    monkeypatch.setattr(_jit, "_numba", False)
    expect = W.filter_transform(w), W.filter_grad(du)
    for a, b in zip(got, expect):
        _same_bits(a, b)


@pytest.mark.parametrize("shape, filters, kw, expect", [
    ((8, 64, 32, 32), 64, {"pad": (1, 1)}, True),      # the CIFAR-sized layer
    ((8, 8, 16, 16), 8, {"pad": (1, 1)}, True),
    ((8, 7, 16, 16), 64, {"pad": (1, 1)}, False),      # too few input channels
    ((8, 64, 16, 16), 7, {"pad": (1, 1)}, False),      # too few filters
    ((8, 3, 32, 32), 64, {"pad": (1, 1)}, False),      # an RGB input
    ((8, 32, 13, 13), 64, {}, True),                   # LeNet's conv2: 11x11, 19% spare
    ((8, 16, 7, 7), 16, {"pad": (1, 1)}, True),        # 7x7: 31% spare
    ((8, 64, 5, 5), 64, {}, False),                    # 3x3: 78% spare
    ((8, 64, 3, 3), 64, {"pad": (1, 1)}, False),
    ((8, 64, 3, 3), 64, {}, False),                    # 1x1: one tile, 4 outputs for 1
    ((8, 64, 16, 16), 64, {"stride": (2, 2), "pad": (1, 1)}, False),
    ((8, 64, 16, 16), 64, {"dilate": (2, 2), "pad": (2, 2)}, False),
    # resnet18_v1's last stages: few tiles in the batch for many filters
    ((1, 512, 7, 7), 512, {"pad": (1, 1)}, False),     # 16 tiles
    ((4, 512, 7, 7), 512, {"pad": (1, 1)}, False),     # 64
    ((16, 512, 7, 7), 512, {"pad": (1, 1)}, True),     # 256
    ((1, 256, 14, 14), 256, {"pad": (1, 1)}, True),    # 49
])
def test_which_convolutions_take_winograd(monkeypatch, shape, filters, kw, expect):
    taken = []
    monkeypatch.setattr(W, "convolution", lambda *a: taken.append(a) or nd.zeros((1,)))
    x = nd.zeros(shape)
    w = nd.zeros((filters, shape[1], 3, 3))
    nd.Convolution(x, w, kernel=(3, 3), num_filter=filters, no_bias=True, **kw)
    assert bool(taken) == expect


def test_other_dtypes_and_groups_stay_im2col():
    x = np.zeros((2, 32, 8, 8), np.float16)
    w = np.zeros((32, 32, 3, 3), np.float16)
    assert not W.applies(x, w, (3, 3), (1, 1), (1, 1), 1, (6, 6))
    assert W.applies(x.astype(np.float32), w.astype(np.float32), (3, 3), (1, 1), (1, 1), 1, (6, 6))
    assert not W.applies(x.astype(np.float32), w.astype(np.float32), (3, 3), (1, 1), (1, 1), 2,
                         (6, 6))
