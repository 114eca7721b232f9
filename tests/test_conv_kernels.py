"""Convolution's and max pooling's numba passes give the NumPy path's bits.

Each case runs the op forward and backward twice, once with the kernels (``_jit`` on, the size
floor lowered) and once on the NumPy reference path (numba off), and compares the raw bits of the
output and of every gradient, with NaN, infinities and signed zeros in the data and in the head
gradient (a NaN's sign is not compared: see ``_conv_kernels``). Skipped where numba is not
installed.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from trainer_cli import _jit, autograd, gluon, nd
from trainer_cli.ndarray import _conv_kernels as K
from trainer_cli.ndarray import host_threads

pytest.importorskip("numba")

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 3e38, -3e38, 0.5, -2.0]


def _data(shape, dtype, seed, special=True):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) * 10.0 ** rng.integers(-2, 2, shape)
    if special:
        flat = a.reshape(-1)
        where = rng.choice(flat.size, size=min(flat.size, 3 * len(SPECIAL)), replace=False)
        flat[where] = np.resize(SPECIAL, where.size)
    return a.astype(dtype)


def _same_bits(a, b):
    """Equal bits, NaN for NaN: an add of two NaNs may return either one's sign bit (see
    ``_conv_kernels``), and NumPy's own loops do not agree on which."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
    a, b = a.copy(), b.copy()
    a[np.isnan(a)] = np.nan
    b[np.isnan(b)] = np.nan
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


KERNELS = ("_im2col", "_im2col_gather", "_epilogue", "_grad_out", "_grad_out_t", "_mask_rows",
           "_col2im", "_max_pool_padded", "_max_pool_scatter", "_max_pool_2x2",
           "_max_pool_2x2_grad", "_max_pool_2x2_grad_short", "_max_3x3_lanes",
           "_max_3x3_lanes_grad", "_max_3x3_halving", "_max_3x3_halving_grad",
           "_max_3x3_same", "_max_3x3_same_grad")


def _run(fn, arrays, head_seed, kernels, monkeypatch, special_head=True, module=K,
         names=KERNELS):
    """(output, gradients of every input) of ``fn(*arrays)`` with the kernels on or off, and
    which of ``module``'s kernels ``names`` ran."""
    monkeypatch.setattr(_jit, "_numba", None if kernels else False)
    monkeypatch.delenv("TRAINER_NO_NUMBA", raising=False)
    calls = []
    for name in names:
        monkeypatch.setattr(module, name, _counting(getattr(module, name), name, calls))
    inputs = [nd.array(a, dtype=a.dtype) for a in arrays]
    for x in inputs:
        x.attach_grad()
    with np.errstate(all="ignore"):
        with autograd.record():
            out = fn(*inputs)
        head = _data(out.shape, arrays[0].dtype, head_seed, special_head)
        out.backward(nd.array(head, dtype=head.dtype))
    return out.asnumpy(), [x.grad.asnumpy() for x in inputs], calls


def _counting(kernel, name, calls):
    def call(*args):
        calls.append(name)
        return kernel(*args)
    return call


CONVS = [
    # x shape, weight shape, keyword arguments
    ((4, 3, 9, 9), (8, 3, 3, 3), {}),
    ((3, 2, 10, 11), (6, 2, 3, 2), {"stride": (2, 1), "pad": (1, 2)}),
    ((2, 4, 12, 12), (6, 2, 3, 3), {"dilate": (2, 2), "pad": (2, 1), "num_group": 2}),
    ((5, 1, 28, 28), (32, 1, 3, 3), {}),
    ((2, 3, 8, 8), (4, 3, 1, 1), {"stride": (3, 3)}),
    # 1x1 of stride 1 on planes too small to multiply image by image: the columns a copy
    ((3, 20, 3, 3), (6, 20, 1, 1), {}),
    # Rows enough for the (N * P, F) gradient layout (nn.TRANSPOSED_GRAD_ROWS; on these few
    # positions only where the test lowers TRANSPOSED_GRAD_POSITIONS), with groups too.
    ((2, 64, 7, 6), (5, 64, 3, 3), {"pad": (1, 1)}),
    ((2, 128, 5, 5), (6, 64, 3, 3), {"num_group": 2, "stride": (2, 1)}),
]


def _conv(wshape, kw, relu):
    def conv(x, w, b=None):
        return nd.nn._convolution(x, w, b, wshape[2:], kw.get("stride"), kw.get("dilate"),
                                  kw.get("pad"), wshape[0], kw.get("num_group", 1), None, relu)
    return conv


def _arrays(case, dtype, with_bias=True, special=True):
    xshape, wshape, _ = CONVS[case]
    arrays = [_data(xshape, dtype, 1, special), _data(wshape, dtype, 2, special)]
    if with_bias:
        arrays.append(_data(wshape[:1], dtype, 3, special))
    return arrays


# One piece (the whole batch), or one image per piece (``nn.PIECE_ELEMENTS``).
PIECES = {"whole": 1 << 40, "by_image": 1, "whole_in_parts": 1 << 40}


def _out_width(xshape, wshape, kw):
    pad, stride, dilate = kw.get("pad", (0, 0)), kw.get("stride", (1, 1)), kw.get("dilate", (1, 1))
    return (xshape[3] + 2 * pad[1] - dilate[1] * (wshape[3] - 1) - 1) // stride[1] + 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("case", range(len(CONVS)))
@pytest.mark.parametrize("pieces", sorted(PIECES))
@pytest.mark.parametrize("gather", [True, False])   # narrow outputs: the gather's im2col, or not
def test_convolution_kernels_are_numpys(monkeypatch, dtype, relu, with_bias, case, pieces,
                                        gather):
    monkeypatch.setattr(K, "MIN_SIZE", 16)
    monkeypatch.setattr(K, "GATHER_WIDTH", K.GATHER_WIDTH if gather else 0)
    monkeypatch.setattr(nd.nn, "PIECE_ELEMENTS", PIECES[pieces])
    # Wide rows: float32 takes the (N * P, F) gradient layout on these few positions, float64
    # the (F, N * P) one, as a batch of fewer than TRANSPOSED_GRAD_POSITIONS does.
    positions = "few" if dtype == np.float32 else "default"
    if positions == "few":
        monkeypatch.setattr(nd.nn, "TRANSPOSED_GRAD_POSITIONS", 1)
    if pieces == "whole_in_parts":      # the batch one piece, its copies in parts on 3 threads
        monkeypatch.setattr(K, "THREAD_ELEMENTS", 1)
        monkeypatch.setattr(host_threads, "blas_threads", lambda: 3)
    xshape, wshape, kw = CONVS[case]
    arrays = _arrays(case, dtype, with_bias)
    conv = _conv(wshape, kw, relu)
    out, grads, calls = _run(conv, arrays, 4, True, monkeypatch)
    ref_out, ref_grads, _ = _run(conv, arrays, 4, False, monkeypatch)
    rows = (xshape[1] // kw.get("num_group", 1)) * wshape[2] * wshape[3]
    transposed = rows >= nd.nn.TRANSPOSED_GRAD_ROWS and positions == "few"
    # Few rows against many filters: GEMMs image by image into the output, the epilogue in place.
    per_image = kw.get("num_group", 1) == 1 and rows <= nd.nn.PER_IMAGE_ROWS < wshape[0]
    # Pieces of one image: the GEMM writes into the output, the epilogue adds in place.
    epilogue = with_bias or relu or not (pieces == "by_image" or xshape[0] == 1)
    columns = "_im2col_gather" if _out_width(xshape, wshape, kw) <= K.GATHER_WIDTH \
        and wshape[2] * wshape[3] > 1 else "_im2col"
    pointwise = wshape[2:] == (1, 1) and "stride" not in kw and "pad" not in kw
    if per_image:
        expect = {columns, "_col2im"} | ({"_epilogue"} if with_bias or relu else set()) \
            | ({"_mask_rows"} if relu else set())
    else:
        expect = {columns, "_grad_out_t" if transposed else "_grad_out", "_col2im"} \
            | ({"_epilogue"} if epilogue else set())
    if pointwise:       # copies, not loops
        expect -= {"_im2col", "_col2im"}
    assert set(calls) == expect
    _same_bits(out, ref_out)
    for got, expect in zip(grads, ref_grads):
        _same_bits(got, expect)


@pytest.mark.parametrize("case", range(len(CONVS)))
def test_pieces_give_the_same_bits_on_any_thread_count(monkeypatch, case):
    """One image per piece on 1, 2 and 3 threads: the same bits, the weight gradient's sum of
    the pieces included (it is combined in piece order)."""
    monkeypatch.setattr(K, "MIN_SIZE", 16)
    monkeypatch.setattr(nd.nn, "PIECE_ELEMENTS", 1)
    xshape, wshape, kw = CONVS[case]
    arrays = _arrays(case, np.float32)
    results = []
    for threads in (1, 2, 3):
        monkeypatch.setattr(host_threads, "blas_threads", lambda threads=threads: threads)
        out, grads, _ = _run(_conv(wshape, kw, True), arrays, 4, True, monkeypatch)
        results.append([out] + grads)
    for other in results[1:]:
        for got, expect in zip(other, results[0]):
            _same_bits(got, expect)


@pytest.mark.parametrize("case", range(len(CONVS)))
def test_pieces_compute_the_whole_batch_convolution(monkeypatch, case):
    """By image or whole, the same convolution (the GEMMs' sums may round apart)."""
    monkeypatch.setattr(K, "MIN_SIZE", 16)
    xshape, wshape, kw = CONVS[case]
    arrays = _arrays(case, np.float64, special=False)
    results = {}
    for name, elements in PIECES.items():
        monkeypatch.setattr(nd.nn, "PIECE_ELEMENTS", elements)
        out, grads, _ = _run(_conv(wshape, kw, False), arrays, 4, True, monkeypatch, False)
        results[name] = [out] + grads
    for got, expect in zip(results["by_image"], results["whole"]):
        np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-12 * np.abs(expect).max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv2d_relu_layer_is_conv_then_relu(monkeypatch, dtype):
    """The fused Conv2D(activation='relu') gives the bits of Convolution then a ReLU op."""
    monkeypatch.setattr(K, "MIN_SIZE", 16)
    x, w, b = _data((3, 2, 7, 7), dtype, 5), _data((4, 2, 3, 3), dtype, 6), _data(4, dtype, 7)

    def fused(x, w, b):
        return nd.nn._convolution(x, w, b, (3, 3), None, None, (1, 1), 4, 1, None, True)

    def separate(x, w, b):
        return nd.relu(nd.Convolution(x, w, b, kernel=(3, 3), pad=(1, 1), num_filter=4))

    for kernels in (True, False):
        out, grads, _ = _run(fused, [x, w, b], 8, kernels, monkeypatch)
        ref_out, ref_grads, _ = _run(separate, [x, w, b], 8, False, monkeypatch)
        _same_bits(out, ref_out)
        for got, expect in zip(grads, ref_grads):
            _same_bits(got, expect)


# A per-image convolution (one channel, 20 filters), im2col's general path (3 channels, 6
# filters), Winograd's (8 channels, 12 filters); outputs of 12x13, whose 3x3 stride-1 windows
# are taken straight from the planes.
RELU_POOLS = [((4, 1, 12, 12), 20), ((3, 3, 10, 11), 6), ((3, 8, 11, 11), 12),
              ((2, 2, 14, 15), 6)]


@pytest.mark.parametrize("kernels", [True, False])
@pytest.mark.parametrize("second_use", [False, True])
@pytest.mark.parametrize("case", range(len(RELU_POOLS)))
@pytest.mark.parametrize("window", [{"kernel": (2, 2), "stride": (2, 2)},
                                    {"kernel": (3, 3), "stride": (1, 1), "pad": (1, 1)},
                                    {"kernel": (3, 3), "stride": (1, 1), "pad": (1, 0)},
                                    {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)}])
def test_max_pool_of_a_relu_conv_masks_its_gradient_once(monkeypatch, case, second_use, kernels,
                                                        window):
    """Conv2D(activation='relu') then MaxPool2D: the pooling masks its gradient by ``pooled >
    0`` and the convolution skips its own mask (``_relu_masks``); the gradients equal those of a
    convolution, a ReLU op and the pooling (zeros may differ in sign). Where the convolution's
    output also has another use, its gradient is a sum, unmarked, and masked as before."""
    monkeypatch.setattr(K, "MIN_SIZE", 16)
    xshape, filters = RELU_POOLS[case]
    x = _data(xshape, np.float32, 5, special=False)
    w = _data((filters, xshape[1], 3, 3), np.float32, 6, special=False)
    b = _data(filters, np.float32, 7, special=False)
    taken = []
    real_take = nd.nn._relu_masks.take_masked
    monkeypatch.setattr(nd.nn._relu_masks, "take_masked",
                        lambda g: taken.append(real_take(g)) or taken[-1])

    def head(y):
        pooled = nd.Pooling(y, pool_type="max", **window)
        return pooled * 1.5 + (y * 0.25).sum() if second_use else pooled

    def fused(x, w, b):
        return head(nd.nn._convolution(x, w, b, (3, 3), None, None, (0, 0), filters, 1, None,
                                       True))

    def separate(x, w, b):
        return head(nd.relu(nd.Convolution(x, w, b, kernel=(3, 3), num_filter=filters)))

    out, grads, _ = _run(fused, [x, w, b], 8, kernels, monkeypatch, special_head=False)
    assert taken and all(taken) != second_use
    ref_out, ref_grads, _ = _run(separate, [x, w, b], 8, kernels, monkeypatch, special_head=False)
    np.testing.assert_array_equal(out, ref_out)
    for got, expect in zip(grads, ref_grads):
        np.testing.assert_array_equal(got, expect)      # -0.0 == +0.0 here


POOLS = [
    ((4, 3, 8, 8), {"kernel": (2, 2), "stride": (2, 2)}),
    ((2, 3, 9, 7), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)}),
    ((2, 2, 6, 5), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1),
                    "pooling_convention": "full"}),
    ((3, 2, 7, 7), {"kernel": (3, 2), "stride": (1, 1)}),
    ((2, 3, 6, 6), {"kernel": (3, 3), "stride": (1, 1), "pad": (1, 1)}),     # Inception's
    ((2, 2, 9, 8), {"kernel": (3, 3), "stride": (2, 2)}),                     # AlexNet's
    ((1, 2, 7, 9), {"kernel": (5, 4), "stride": (2, 3), "pad": (2, 1)}),
    ((1, 2, 14, 13), {"kernel": (12, 11), "stride": (1, 2), "pad": (1, 0)}),  # int32 index
    ((2, 4, 26, 26), {"kernel": (2, 2), "stride": (2, 2)}),
    ((2, 3, 11, 9), {"kernel": (2, 2), "stride": (2, 2)}),
    ((2, 3, 11, 9), {"kernel": (2, 2), "stride": (2, 2), "pooling_convention": "full"}),
    ((2, 3, 10, 10), {"kernel": (2, 2), "stride": (2, 2), "pad": (1, 1)}),
    # 3x3 windows in lanes: whole tiles of 16 planes and 16 positions and the rest, no padding,
    # padding on one axis with the far windows past it, a padding of 2
    ((2, 20, 6, 7), {"kernel": (3, 3), "stride": (1, 1), "pad": (1, 1)}),
    ((2, 17, 5, 6), {"kernel": (3, 3), "stride": (1, 1)}),
    ((1, 18, 7, 5), {"kernel": (3, 3), "stride": (1, 1), "pad": (1, 0),
                     "pooling_convention": "full"}),
    ((1, 20, 5, 5), {"kernel": (3, 3), "stride": (1, 1), "pad": (2, 2)}),
    ((2, 9, 8, 9), {"kernel": (3, 3), "stride": (2, 1), "pad": (1, 1)}),
    # 3x3 windows of stride 2 halving planes of even sizes (ResNet's, GoogLeNet's): one window
    # a plane, wide planes, tall ones
    ((3, 5, 2, 2), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)}),
    ((2, 3, 6, 10), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)}),
    ((2, 2, 12, 4), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)}),
    ((2, 3, 8, 8), {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1)}),
    # 3x3 windows of stride 1 and padding 1 straight from the planes: one row, one column, two
    # of each, many, one position
    ((2, 3, 1, 12), {"kernel": (3, 3), "stride": (1, 1), "pad": (1, 1)}),
    ((2, 3, 9, 1), {"kernel": (3, 3), "stride": (1, 1), "pad": (1, 1)}),
    ((2, 2, 2, 2), {"kernel": (3, 3), "stride": (1, 1), "pad": (1, 1)}),
    ((2, 3, 7, 12), {"kernel": (3, 3), "stride": (1, 1), "pad": (1, 1)}),
    ((4, 5, 1, 1), {"kernel": (3, 3), "stride": (1, 1), "pad": (1, 1)}),
]


def _halving(shape, kw):
    return kw["kernel"] == (3, 3) and kw["stride"] == (2, 2) and kw.get("pad") == (1, 1) \
        and "pooling_convention" not in kw and shape[2] % 2 == 0 and shape[3] % 2 == 0


def _same(shape, kw):
    return kw["kernel"] == (3, 3) and kw["stride"] == (1, 1) and kw.get("pad") == (1, 1) \
        and "pooling_convention" not in kw


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", range(len(POOLS)))
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("chunk", [K.POOL_GRAD_CHUNK, 7, 24])   # 7: less than a window row
# short: the 2x2 gradient's zero-then-scatter loop, and strided 3x3 windows folded down over
# every row (not the outputs' rows alone)
@pytest.mark.parametrize("short", [False, True])
def test_max_pool_kernels_are_numpys(monkeypatch, dtype, case, ties, chunk, short):
    monkeypatch.setattr(K, "MIN_SIZE", 16)
    monkeypatch.setattr(K, "POOL_GRAD_CHUNK", chunk)
    monkeypatch.setattr(K, "SHORT_POOL_ROW", 1 << 30 if short else 0)
    monkeypatch.setattr(K, "SHORT_POOL_REACH", 1 << 30 if short else 0)
    if chunk == 7:      # and in pieces of a few planes, on three threads
        monkeypatch.setattr(K, "POOL_PIECE_ELEMENTS", 150)
        monkeypatch.setattr(host_threads, "blas_threads", lambda: 3)
    if short:   # 3x3 windows' lanes: blocks of 16 planes and a part block (tiles, then lanes)
        monkeypatch.setattr(K, "MAX_LANES", 16)
        monkeypatch.setattr(K, "LANES_BLOCK_ELEMENTS", 1)
    shape, kw = POOLS[case]
    x = _data(shape, dtype, 11)
    if ties:    # equal values and signed zeros inside windows: the first one takes the gradient
        x = np.round(x / 1e3).astype(dtype)
        x[..., ::3] = -0.0
        x[..., 1::3] = 0.0
        x[0, 0, :2, :2] = -np.inf

    def pool(x):
        return nd.Pooling(x, pool_type="max", **kw)

    out, grads, calls = _run(pool, [x], 12, True, monkeypatch)
    ref_out, ref_grads, _ = _run(pool, [x], 12, False, monkeypatch)
    square = kw["kernel"] == (2, 2) and kw["stride"] == (2, 2) and "pad" not in kw \
        and "pooling_convention" not in kw
    grad_2x2 = "_max_pool_2x2_grad_short" if short else "_max_pool_2x2_grad"
    assert list(dict.fromkeys(calls)) == (
        ["_max_pool_2x2", grad_2x2] if square
        else ["_max_3x3_same", "_max_3x3_same_grad"] if _same(shape, kw)
        else ["_max_3x3_lanes", "_max_3x3_lanes_grad"]
        if kw["kernel"] == (3, 3) and kw["stride"] == (1, 1)
        else ["_max_3x3_halving", "_max_3x3_halving_grad"
              if shape[3] // 2 >= K.HALVING_GRAD_ROW else "_max_pool_scatter"]
        if _halving(shape, kw)
        else ["_max_pool_padded", "_max_pool_scatter"])
    _same_bits(out, ref_out)
    _same_bits(grads[0], ref_grads[0])


@pytest.mark.parametrize("nan", [False, True])
@pytest.mark.parametrize("lanes", [16, 256, "planes too large"])
def test_3x3_pooling_in_lanes_with_and_without_nan_is_numpys(monkeypatch, nan, lanes):
    """Inception's 3x3 stride-1 windows in lanes: a block of planes without NaN takes the plain
    maximum, one with a NaN NumPy's rule; both give NumPy's bits (ties, signed zeros, -inf),
    forward and backward, in blocks of 16 planes (one with the NaN) or one block; planes larger
    than LANES_MAX_PLANE go through the padded planes and the scatter."""
    monkeypatch.setattr(K, "MIN_SIZE", 16)
    if lanes == "planes too large":
        monkeypatch.setattr(K, "LANES_MAX_PLANE", 41)       # the planes below hold 42
    else:
        monkeypatch.setattr(K, "MAX_LANES", lanes)
    x = np.round(_data((3, 22, 6, 7), np.float32, 21, special=False) * 4)
    x[..., ::5] = -0.0
    x[..., 2::5] = 0.0
    x[1, 3, :3, :3] = -np.inf
    if nan:
        x[1, 1, 2, 3] = np.nan      # plane 23: the second block of 16

    def pool(x):
        return nd.Pooling(x, pool_type="max", kernel=(3, 3), stride=(1, 1), pad=(1, 0))

    out, grads, calls = _run(pool, [x], 12, True, monkeypatch)
    ref_out, ref_grads, _ = _run(pool, [x], 12, False, monkeypatch)
    assert list(dict.fromkeys(calls)) == (["_max_pool_padded", "_max_pool_scatter"]
                                          if lanes == "planes too large"
                                          else ["_max_3x3_lanes", "_max_3x3_lanes_grad"])
    assert np.isnan(out).any() == nan
    _same_bits(out, ref_out)
    _same_bits(grads[0], ref_grads[0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("stride", [2, 1])
@pytest.mark.parametrize("shape", [(2, 3, 2, 2), (2, 5, 8, 6), (1, 7, 4, 12), (2, 2, 1, 4),
                                   (3, 2, 5, 1)])
def test_3x3_pooling_straight_from_the_planes_keeps_the_padded_planes_maxima_and_index(
        monkeypatch, dtype, stride, shape):
    """3x3 windows of padding 1, of stride 2 halving the planes or of stride 1 keeping them,
    taken straight from the planes: the maxima and the index (which offset of each window,
    padding included, the gradient reads) of the padded planes' kernel, bit for bit: NaN, ties,
    signed zeros, and windows whose largest element is the padding (every element in the plane
    -inf or the lowest value), on every side; in pieces of a few planes on three threads too."""
    if stride == 2 and shape[2] % 2:
        return
    monkeypatch.setattr(K, "MIN_SIZE", 1)
    monkeypatch.setattr(K, "_lanes_block", lambda *a: 0)
    lowest = np.finfo(dtype).min
    x = np.round(_data(shape, dtype, 31, special=False) * 2)
    flat = x.reshape(-1)
    flat[::7] = -0.0
    flat[3::7] = 0.0
    flat[5::29] = np.nan
    x[-1, 0, -1, -1] = np.nan
    x[0, 0] = -np.inf
    x[0, 1, :, :2] = lowest
    x[0, 1, :2] = lowest
    x[-1, -1, -2:] = -np.inf
    x[-1, -1, :, -1] = lowest
    out_sp = (shape[2] // stride, shape[3] // stride)

    def pooled(direct, pieces=K.POOL_PIECE_ELEMENTS, threads=1):
        monkeypatch.setattr(K, "_halving", lambda *a: direct and stride == 2)
        monkeypatch.setattr(K, "_same", lambda *a: direct and stride == 1)
        monkeypatch.setattr(K, "POOL_PIECE_ELEMENTS", pieces)
        monkeypatch.setattr(host_threads, "blas_threads", lambda: threads)
        out = np.empty(shape[:2] + out_sp, dtype)
        index = np.empty(out.shape, np.int8)
        maxima = np.empty(out.shape, dtype)
        assert K.max_pool(x, (3, 3), (stride, stride), (1, 1), out, index)
        assert K.max_pool(x, (3, 3), (stride, stride), (1, 1), maxima, None)
        _same_bits(maxima, out)
        return out, index

    out, index = pooled(False)
    assert (index == 0).any() and (index == -1).any()   # the padding, NaN
    for direct in (pooled(True), pooled(True, pieces=2 * shape[2] * shape[3], threads=3)):
        _same_bits(direct[0], out)
        np.testing.assert_array_equal(direct[1], index)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", range(len(POOLS)))
@pytest.mark.parametrize("ties", [False, True])
def test_max_pool_outside_record_is_numpys(monkeypatch, dtype, case, ties):
    """Predict mode: the maxima alone (no index kept; disjoint 2x2 windows in a loop of their
    own, others through the padded planes), the bits of NumPy's path and of the recorded
    pooling's output, in pieces of a few planes on three threads too."""
    monkeypatch.setattr(K, "MIN_SIZE", 16)
    shape, kw = POOLS[case]
    x = _data(shape, dtype, 13)
    if ties:
        x = np.round(x / 1e3).astype(dtype)
        x[..., ::3] = -0.0
        x[..., 1::3] = 0.0
        x[0, 0, :2, :2] = -np.inf
    calls = []
    for name in ("_max_pool_values", "_max_pool_padded", "_max_3x3_lanes", "_max_3x3_halving",
                 "_max_3x3_same"):
        monkeypatch.setattr(K, name, _counting(getattr(K, name), name, calls))
    square = kw["kernel"] == (2, 2) and kw["stride"] == (2, 2) and "pad" not in kw \
        and "pooling_convention" not in kw
    # 3x3 stride-1 windows on small planes in lanes (K.LANES_PREDICT_PLANE)
    lanes = kw["kernel"] == (3, 3) and kw["stride"] == (1, 1) \
        and shape[2] * shape[3] <= K.LANES_PREDICT_PLANE and not _same(shape, kw)

    def predict(kernels, pieces=K.POOL_PIECE_ELEMENTS):
        monkeypatch.setattr(_jit, "_numba", None if kernels else False)
        monkeypatch.setattr(K, "POOL_PIECE_ELEMENTS", pieces)
        return nd.Pooling(nd.array(x, dtype=dtype), pool_type="max", **kw).asnumpy()

    got = predict(True)
    assert calls == ["_max_pool_values" if square else "_max_3x3_lanes" if lanes
                     else "_max_3x3_halving" if _halving(shape, kw)
                     else "_max_3x3_same" if _same(shape, kw) else "_max_pool_padded"]
    _same_bits(got, predict(False))
    monkeypatch.setattr(host_threads, "blas_threads", lambda: 3)
    _same_bits(predict(True, pieces=150), got)
    recorded, _, _ = _run(lambda x: nd.Pooling(x, pool_type="max", **kw), [x], 12, True,
                          monkeypatch)
    _same_bits(recorded, got)


def test_kernels_decline_what_they_do_not_take(monkeypatch):
    monkeypatch.setattr(_jit, "_numba", None)
    x = np.ones((1, 1, 4, 4), np.float32)
    cols = np.empty((9, 4), np.float32)
    # Below the size floor, another dtype, a non-contiguous array, 1-D convolution: NumPy's turn.
    assert not K.im2col(x, (3, 3), (1, 1), (1, 1), (0, 0), (2, 2), cols)
    monkeypatch.setattr(K, "MIN_SIZE", 1)
    assert K.im2col(x, (3, 3), (1, 1), (1, 1), (0, 0), (2, 2), cols)
    assert not K.im2col(x.astype(np.float16), (3, 3), (1, 1), (1, 1), (0, 0), (2, 2), cols)
    assert not K.im2col(x, (3, 3), (1, 1), (1, 1), (0, 0), (2, 2), cols.T.copy().T)
    assert not K.im2col(x[0], (3,), (1,), (1,), (0,), (2,), cols)
    monkeypatch.setattr(_jit, "_numba", False)
    assert not K.im2col(x, (3, 3), (1, 1), (1, 1), (0, 0), (2, 2), cols)


def test_lenet_training_step_is_bitwise_with_and_without_kernels(monkeypatch):
    """Three SGD-momentum steps of a LeNet-style net: the same weights either way."""
    monkeypatch.setattr(K, "MIN_SIZE", 16)
    nn = gluon.nn
    assert_training_is_bitwise(monkeypatch, lambda: [
        nn.Conv2D(4, 3, activation="relu", in_channels=1), nn.MaxPool2D(2),
        nn.Conv2D(8, 3, activation="relu", in_channels=4), nn.MaxPool2D(2),
        nn.Dense(16, activation="relu", in_units=8 * 2 * 2), nn.Dense(10, in_units=16)],
        (8, 1, 14, 14))


def assert_training_is_bitwise(monkeypatch, layers, xshape, low=-0.3, high=0.3):
    """Three SGD-momentum steps of ``Sequential(*layers())`` on random images of ``xshape``,
    from the same trainable weights (uniform in ``[low, high)``), with the kernels and without
    them: the same bits after them."""
    rng = np.random.RandomState(0)
    X = rng.uniform(size=xshape).astype(np.float32)
    y = rng.randint(0, 10, size=xshape[0]).astype(np.float32)
    results = []
    for kernels in (True, False):
        monkeypatch.setattr(_jit, "_numba", None if kernels else False)
        net = gluon.nn.Sequential()
        net.add(*layers())
        net.initialize()
        for i, p in enumerate(net.collect_params().values()):
            if p.grad_req != "null":
                p.set_data(nd.array(np.random.RandomState(i).uniform(low, high, p.shape)
                                    .astype(np.float32)))
        results.append(sgd_steps(net, X, y))
    for got, expect in zip(*results):
        _same_bits(got, expect)


def sgd_steps(net, X, y, steps=3):
    """``steps`` SGD-momentum steps of ``net`` on ``(X, y)``; its parameters after them."""
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    for _ in range(steps):
        with autograd.record():
            l = loss(net(nd.array(X)), nd.array(y))
        l.backward()
        trainer.step(len(X))
    return [p.data().asnumpy() for p in net.collect_params().values()]


def test_gluon_conv2d_relu_takes_the_fused_op(monkeypatch):
    """Conv2D(activation='relu') is one recorded op with the bits of Convolution then relu, and
    a hook on its Activation keeps the two ops (the hook sees the activation's input)."""
    monkeypatch.setattr(K, "MIN_SIZE", 16)
    layer = gluon.nn.Conv2D(4, 3, padding=1, activation="relu", in_channels=2)
    layer.initialize()
    x = nd.array(_data((3, 2, 6, 6), np.float32, 9, special=False))
    w, b = layer.weight.data(), layer.bias.data()
    expect = nd.relu(nd.Convolution(x, w, b, kernel=(3, 3), pad=(1, 1), num_filter=4))
    _same_bits(layer(x).asnumpy(), expect.asnumpy())
    seen = []
    layer.act.register_forward_hook(lambda block, inputs, output: seen.append(inputs[0]))
    _same_bits(layer(x).asnumpy(), expect.asnumpy())
    assert len(seen) == 1 and seen[0].shape == (3, 4, 6, 6)


@pytest.mark.parametrize("channels, filters", [(3, 4), (1, 20)])   # (1, 20): per-image GEMMs
def test_an_empty_batch_gives_empty_output_and_gradients(channels, filters):
    x, w, b = nd.zeros((0, channels, 8, 8)), nd.ones((filters, channels, 3, 3)), nd.ones(filters)
    for a in (x, w, b):
        a.attach_grad()
    with autograd.record():
        y = nd.Convolution(x, w, b, kernel=(3, 3), num_filter=filters)
    y.backward()
    assert y.shape == (0, filters, 6, 6) and x.grad.shape == (0, channels, 8, 8)
    assert not w.grad.asnumpy().any() and not b.grad.asnumpy().any()


def test_convolutions_from_two_threads_at_once_give_their_own_bits(monkeypatch):
    """Two threads convolving at once (one gets the piece threads, the other runs its pieces
    alone): each gets the bits it gets alone."""
    import threading

    monkeypatch.setattr(K, "MIN_SIZE", 16)
    monkeypatch.setattr(nd.nn, "PIECE_ELEMENTS", 1)
    monkeypatch.setattr(host_threads, "blas_threads", lambda: 3)
    cases = [0, 5]
    alone = {}
    for case in cases:
        xshape, wshape, kw = CONVS[case]
        alone[case] = _run(_conv(wshape, kw, True), _arrays(case, np.float32, special=False), 4,
                           True, monkeypatch, False)[:2]
    together, start = {}, threading.Barrier(len(cases))

    def work(case):
        xshape, wshape, kw = CONVS[case]
        arrays = [nd.array(a) for a in _arrays(case, np.float32, special=False)]
        for a in arrays:
            a.attach_grad()
        start.wait()
        for _ in range(5):
            with autograd.record():
                out = _conv(wshape, kw, True)(*arrays)
            out.backward(nd.array(_data(out.shape, np.float32, 4, False)))
        together[case] = (out.asnumpy(), [a.grad.asnumpy() for a in arrays])

    threads = [threading.Thread(target=work, args=(case,)) for case in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for case in cases:
        _same_bits(together[case][0], alone[case][0])
        for got, expect in zip(together[case][1], alone[case][1]):
            _same_bits(got, expect)


@settings(max_examples=60, deadline=None)
@given(kh=st.integers(1, 5), kw=st.integers(1, 5), sh=st.integers(1, 3), sw=st.integers(1, 3),
       ph=st.integers(0, 2), pw=st.integers(0, 2), full=st.booleans(), h=st.integers(1, 12),
       w=st.integers(1, 12), seed=st.integers(0, 2 ** 16), double=st.booleans())
def test_any_max_pooling_window_is_numpys(kh, kw, sh, sw, ph, pw, full, h, w, seed, double):
    """Random windows, strides, padding and conventions, data with ties, signed zeros, NaN and
    infinities, a head with NaN: the recorded output, the predict-mode output and the gradient
    are the NumPy path's bits."""
    ph, pw = min(ph, kh // 2), min(pw, kw // 2)
    if h + 2 * ph < kh or w + 2 * pw < kw:
        return
    dtype = np.float64 if double else np.float32
    rng = np.random.default_rng(seed)
    x = np.round(rng.standard_normal((2, 2, h, w)) * 3).astype(dtype)
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, 3)] = rng.choice(SPECIAL, 3)
    kwargs = {"kernel": (kh, kw), "stride": (sh, sw), "pad": (ph, pw),
              "pooling_convention": "full" if full else "valid"}
    results, head = [], None
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(K, "MIN_SIZE", 1)
        for kernels in (True, False):
            monkeypatch.setattr(_jit, "_numba", None if kernels else False)
            x_nd = nd.array(x, dtype=dtype)
            x_nd.attach_grad()
            with autograd.record():
                y = nd.Pooling(x_nd, pool_type="max", **kwargs)
            if head is None:
                head = rng.standard_normal(y.shape).astype(dtype)
                head.reshape(-1)[0] = np.nan
            with np.errstate(all="ignore"):
                y.backward(nd.array(head, dtype=dtype))
            predicted = nd.Pooling(nd.array(x, dtype=dtype), pool_type="max", **kwargs)
            results.append((y.asnumpy(), predicted.asnumpy(), x_nd.grad.asnumpy()))
    for got, expect in zip(*results):
        _same_bits(got, expect)


def _windows(x, kernel, stride, dilate, pad, out_sp):
    """The column matrix ``(C*kh*kw, N*oh*ow)`` of ``x``, window by window in Python."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw), (ph, pw), (oh, ow) = kernel, stride, dilate, pad, out_sp
    cols = np.zeros((c * kh * kw, n * oh * ow), x.dtype)
    for ci in range(c):
        for i in range(kh):
            for j in range(kw):
                for m in range(n):
                    for a in range(oh):
                        for b in range(ow):
                            r, s = a * sh + i * dh - ph, b * sw + j * dw - pw
                            if 0 <= r < h and 0 <= s < w:
                                row, col = (ci * kh + i) * kw + j, (m * oh + a) * ow + b
                                cols[row, col] = x[m, ci, r, s]
    return cols


@settings(max_examples=80, deadline=None)
@given(kh=st.integers(1, 4), kw=st.integers(1, 4), sh=st.integers(1, 3), sw=st.integers(1, 3),
       dh=st.integers(1, 2), dw=st.integers(1, 2), ph=st.integers(0, 3), pw=st.integers(0, 3),
       h=st.integers(1, 9), w=st.integers(1, 9), n=st.integers(1, 3), c=st.integers(1, 4),
       seed=st.integers(0, 2 ** 16), double=st.booleans(), split=st.booleans())
def test_both_column_matrix_kernels_copy_every_window(kh, kw, sh, sw, dh, dw, ph, pw, h, w, n, c,
                                                      seed, double, split):
    """The row-by-row im2col, the gather's and the one from column phases (strided widths), on
    random geometries (padding beyond the kernel's reach included) and batches, whole or in runs
    of (channel, kernel row) pairs on three threads, and for a run of output rows: every value
    of every window in its place, bit for bit (NaN, signed zeros), zeros outside."""
    out_sp = ((h + 2 * ph - dh * (kh - 1) - 1) // sh + 1,
              (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1)
    if min(out_sp) <= 0:
        return
    dtype = np.float64 if double else np.float32
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, 3)] = rng.choice(SPECIAL, 3)
    geometry = ((kh, kw), (sh, sw), (dh, dw), (ph, pw), out_sp)
    expect = _windows(x, *geometry)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(_jit, "_numba", None)
        monkeypatch.setattr(K, "MIN_SIZE", 1)
        if split:
            monkeypatch.setattr(K, "THREAD_ELEMENTS", 1)
            monkeypatch.setattr(host_threads, "blas_threads", lambda: 3)
        for width, taps, kernel in ((0, 1 << 30, "_im2col"), (1 << 30, 1 << 30, "_im2col_gather"),
                                    (0, 1, "_phases")):
            monkeypatch.setattr(K, "GATHER_WIDTH", width)
            monkeypatch.setattr(K, "PHASE_TAPS", taps)
            monkeypatch.setattr(K, "PHASE_WIDTH", 0)
            if (kh * kw, kernel) == (1, "_im2col_gather") or (sw, kernel) == (1, "_phases"):
                kernel = "_im2col"      # 1x1 kernels are never gathered, nor stride 1 phased
            calls = []
            monkeypatch.setattr(K, kernel, _counting(getattr(K, kernel), kernel, calls))
            cols = np.full(expect.shape, np.nan, dtype)
            assert K.im2col(x, *geometry, cols)
            # 1x1 of stride 1 without padding: a copy of the planes, no loop
            copy = (kh, kw, sh, sw, ph, pw) == (1, 1, 1, 1, 0, 0)
            assert set(calls) == (set() if copy else {kernel})
            _same_bits(cols, expect)
            # The rows of some (channel, kernel row) pairs alone, as a split image's parts make.
            lo, hi = sorted(rng.integers(0, c * kh + 1, 2))
            part = np.full(expect.shape, np.nan, dtype)
            assert K.im2col(x, *geometry, part, rows=(lo, hi))
            _same_bits(part[lo * kw:hi * kw], expect[lo * kw:hi * kw])
            if kernel == "_im2col_gather":
                continue            # made for all output rows only
            # The windows of a run of output rows alone, as an image's parts on threads make.
            r0, r1 = sorted(rng.integers(0, out_sp[0] + 1, 2))
            if r1 > r0:
                run = np.full((expect.shape[0], n, r1 - r0, out_sp[1]), np.nan, dtype)
                assert K.im2col(x, *geometry, run, out_rows=(r0, r1))
                whole = expect.reshape(expect.shape[0], n, *out_sp)[:, :, r0:r1]
                _same_bits(run.reshape(whole.shape), whole)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pointwise_columns_and_their_gradient_are_the_loops_copies(monkeypatch, dtype):
    """A 1x1 kernel of stride 1 without padding: the column matrix is a transposing copy of the
    planes and the column gradient goes back as +0.0 plus each value (so -0.0 comes out +0.0),
    the bits the window loops give."""
    monkeypatch.setattr(_jit, "_numba", None)
    monkeypatch.setattr(K, "MIN_SIZE", 1)
    x = _data((3, 5, 2, 3), dtype, 31)
    geometry = ((1, 1), (1, 1), (1, 1), (0, 0), (2, 3))
    cols = np.full((5, 18), np.nan, dtype)
    assert K.im2col(x, *geometry, cols)
    _same_bits(cols, _windows(x, *geometry))
    gcols = _data((5, 18), dtype, 32)
    gcols.reshape(-1)[:4] = [-0.0, 0.0, np.inf, -np.inf]
    gx = np.full(x.shape, np.nan, dtype)
    assert K.col2im(gcols, *geometry, gx)
    loops = np.full(x.shape, np.nan, dtype)
    K._col2im(gcols.reshape(-1), 1, 1, 1, 1, 1, 1, 0, 0, 2, 3, loops.reshape(-1), 3, 5, 2, 3,
              0, 5)
    _same_bits(gx, loops)
    assert not np.signbit(gx[0, 0, 0, 0])
