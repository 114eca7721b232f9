"""One image on several threads (``nn._split_image``, ``winograd._split_forward``,
``winograd._own_parts_forward`` and, in predict mode, ``winograd._filter_blocks``): each
convolution of ``resnet18_v1`` is worked in parts on the piece threads, and gives the bits it
gives on one thread (which runs the whole image as one piece, as before the parts existed, but
for the stem and the stride-2 layer of 64 channels at 56x56, whose columns it makes in parts
too) and in a batch of two:

- the whole network at batch 1 (3x112x112) and 16 (3x48x48), on 1, 2 and 3 threads;
- each of its convolutions' shapes at 224x224, batch 1 (random data, the real GEMM shapes);
- the parts' plumbing (ranges of channels, kernel rows, filters, bias, ReLU) on small arrays of
  small integers, whose sums are exact in any order, against the NumPy path.

The first two hold bitwise where the BLAS gives the same bits however a product is cut and
threaded (``blas_bits``); elsewhere they are held to float32 roundings.
"""
import numpy as np
import pytest

from trainer_cli import _jit, autograd, gluon, nd
from trainer_cli.ndarray import _conv_kernels as K
from trainer_cli.ndarray import host_threads
from trainer_cli.ndarray import nn as NN
from trainer_cli.ndarray import winograd as W

from blas_bits import cuts_keep_bits

pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def _blas_threads_restored():
    libs = [(lib, lib.num_threads) for lib in host_threads._blas()]
    yield
    for lib, count in libs:
        lib.set_num_threads(count)


def _threads(monkeypatch, count):
    """``count`` piece threads, and as many BLAS threads (a product left whole runs on those)."""
    monkeypatch.setattr(host_threads, "blas_threads", lambda: count)
    for lib in host_threads._blas():
        lib.set_num_threads(count)


def _spy(monkeypatch, module, name):
    """Calls of ``module.name`` that did the work in parts (returned a true value)."""
    done = []
    real = getattr(module, name)

    def spy(*args):
        result = real(*args)
        done.append(result is not None and result is not False)
        return result
    monkeypatch.setattr(module, name, spy)
    return done


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint32)


def _assert_as_on_one_thread(other, one):
    if cuts_keep_bits():
        np.testing.assert_array_equal(_bits(other), _bits(one))
    else:
        np.testing.assert_allclose(other, one, rtol=1e-5, atol=1e-5 * np.abs(one).max())


@pytest.mark.parametrize("batch, size", [(1, 112), (16, 48)])
def test_resnet18_v1_gives_the_same_bits_on_one_two_and_three_threads(monkeypatch, batch, size):
    net = gluon.model_zoo.vision.resnet18_v1(classes=10)
    net.initialize()
    x = nd.array(np.random.RandomState(0).uniform(size=(batch, 3, size, size)).astype(np.float32))
    split = _spy(monkeypatch, NN, "_split_image")
    steps = _spy(monkeypatch, W, "_split_forward")
    own = _spy(monkeypatch, W, "_own_parts_forward")
    blocks = _spy(monkeypatch, W, "_filter_blocks")
    outputs = []
    for count in (1, 2, 3):
        _threads(monkeypatch, count)
        outputs.append(net(x).asnumpy())
    for other in outputs[1:]:
        _assert_as_on_one_thread(other, outputs[0])
    # At batch 1 the stem (by output rows), the 256-channel 7x7 layers (their columns in parts,
    # the product on the BLAS's threads) and the 28x28 and 14x14 Winograd layers were worked in
    # parts.
    assert (any(split) and (any(steps) or any(own) or any(blocks))) == (batch == 1)
    assert np.ptp(outputs[0], axis=0).max() > 0 if batch > 1 else np.isfinite(outputs[0]).all()


# resnet18_v1's convolutions at 224x224: input channels, filters, input size, kernel, stride,
# and whether one image is worked in parts on two threads.
RESNET18_224 = [
    (3, 64, 224, 7, 2, True), (64, 64, 56, 3, 1, True), (64, 128, 56, 3, 2, True),
    (64, 128, 56, 1, 2, False), (128, 128, 28, 3, 1, True), (128, 256, 28, 3, 2, True),
    (128, 256, 28, 1, 2, False), (256, 256, 14, 3, 1, True), (256, 512, 14, 3, 2, True),
    (256, 512, 14, 1, 2, False), (512, 512, 7, 3, 1, True),
]


@pytest.mark.parametrize("c, f, size, k, s, parts", RESNET18_224)
def test_resnet18_v1_convolutions_at_224_give_the_same_bits_in_parts(monkeypatch, c, f, size, k,
                                                                      s, parts):
    rng = np.random.default_rng(size + c)
    x = nd.array(rng.standard_normal((1, c, size, size)).astype(np.float32))
    w = nd.array((rng.standard_normal((f, c, k, k)) / (c * k)).astype(np.float32))
    spies = [_spy(monkeypatch, NN, "_split_image"), _spy(monkeypatch, W, "_split_forward"),
             _spy(monkeypatch, W, "_own_parts_forward"), _spy(monkeypatch, W, "_filter_blocks")]
    outputs = []
    for count in (1, 2, 3):
        _threads(monkeypatch, count)
        outputs.append(nd.Convolution(x, w, kernel=(k, k), stride=(s, s), pad=(k // 2, k // 2),
                                      num_filter=f, no_bias=True).asnumpy())
    assert any(any(calls) for calls in spies) == parts
    for other in outputs[1:]:
        _assert_as_on_one_thread(other, outputs[0])
    # The image in a batch of two (each image a piece of its own, its product whole): the bits
    # it has alone, worked in parts; but where Winograd's filter blocks' GEMMs, small enough for
    # other kernels of the BLAS, round otherwise than the whole product (docs/compat.md).
    second = rng.standard_normal((1, c, size, size)).astype(np.float32)
    pair = nd.Convolution(nd.array(np.concatenate([x.asnumpy(), second])), w, kernel=(k, k),
                          stride=(s, s), pad=(k // 2, k // 2), num_filter=f, no_bias=True)
    if any(spies[3]):
        np.testing.assert_allclose(pair.asnumpy()[:1], outputs[0], rtol=1e-5,
                                   atol=1e-5 * np.abs(outputs[0]).max())
    else:
        _assert_as_on_one_thread(pair.asnumpy()[:1], outputs[0])


def _integers(shape, seed, dtype=np.float64):
    return np.random.default_rng(seed).integers(-4, 5, shape).astype(dtype)


def _convolve(arrays, kernel, stride, pad, relu, kernels, monkeypatch):
    monkeypatch.setattr(_jit, "_numba", None if kernels else False)
    x, w, b = (nd.array(a, dtype=a.dtype) for a in arrays)
    return nd.nn._convolution(x, w, b, kernel, stride, None, pad, w.shape[0], 1, None,
                              relu).asnumpy()


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("xshape, f, kernel, stride, pad, same_sums", [
    ((1, 3, 21, 19), 40, (7, 7), (2, 2), (3, 3), None),      # im2col by output rows, last longer
    ((1, 5, 12, 13), 37, (3, 3), (2, 1), (1, 0), None),      # im2col by output rows
    ((1, 6, 9, 9), 70, (3, 3), (2, 2), (1, 1), None),        # im2col: columns in parts
    ((1, 9, 11, 10), 13, (3, 3), (1, 1), (1, 2), None),      # Winograd in steps: a spare tile
    ((2, 7, 8, 9), 11, (3, 3), (1, 1), (1, 1), None),        # ... one piece of two images
    ((1, 9, 15, 10), 13, (3, 3), (1, 1), (1, 2), 16),        # Winograd in bands of tile rows
    ((2, 7, 8, 9), 11, (3, 3), (1, 1), (1, 1), 16),          # ... of two images
    ((1, 8, 5, 7), 40, (3, 3), (1, 1), (1, 1), 16),          # Winograd by filters, the first longer
])
def test_parts_are_the_numpy_path(monkeypatch, relu, xshape, f, kernel, stride, pad, same_sums):
    if same_sums is not None:     # GEMMs this small: the parts that keep to their own data
        monkeypatch.setattr(W, "SAME_SUMS", same_sums)
    monkeypatch.setattr(K, "MIN_SIZE", 16)
    monkeypatch.setattr(W, "MIN_CHANNELS", 1)
    monkeypatch.setattr(W, "MAX_FILTERS_PER_TILE", float("inf"))
    monkeypatch.setattr(W, "FILTER_SPLIT", 7)           # the filter transform in parts too
    monkeypatch.setattr(NN, "SPLIT_ELEMENTS", 16)
    monkeypatch.setattr(NN, "ALIGN", 4)
    monkeypatch.setattr(NN, "MIN_BLOCK_WORK", 64)
    monkeypatch.setattr(NN, "BLAS_SPLIT_WORK", 64)
    monkeypatch.setattr(K, "THREAD_ELEMENTS", 16)           # the column matrix in runs of rows
    arrays = [_integers(xshape, 1), _integers((f, xshape[1]) + kernel, 2), _integers((f,), 3)]
    _threads(monkeypatch, 3)
    spies = [_spy(monkeypatch, NN, "_split_image"), _spy(monkeypatch, W, "_split_forward"),
             _spy(monkeypatch, W, "_own_parts_forward")]
    got = _convolve(arrays, kernel, stride, pad, relu, True, monkeypatch)
    assert any(any(calls) for calls in spies)
    assert any(spies[2]) == (same_sums is not None)
    _threads(monkeypatch, 1)
    expect = _convolve(arrays, kernel, stride, pad, relu, False, monkeypatch)
    np.testing.assert_array_equal(got.view(np.uint64), expect.view(np.uint64))


@pytest.mark.parametrize("relu", [False, True])
def test_filter_blocks_are_the_numpy_path_and_im2cols_on_any_thread_count(monkeypatch, relu):
    """In predict mode one piece of many filters and few tiles is worked in blocks of filters
    (``winograd._filter_blocks``), as many as the sizes give, whatever the thread count: on 1, 2
    and 3 threads the bits of the NumPy path (the same blocks without numba) and of im2col, on
    small integers, whose sums are exact in any order. A recorded pass keeps ``U`` whole."""
    monkeypatch.setattr(K, "MIN_SIZE", 16)
    monkeypatch.setattr(W, "MIN_CHANNELS", 1)
    monkeypatch.setattr(W, "MAX_FILTERS_PER_TILE", float("inf"))
    monkeypatch.setattr(W, "U_BLOCK_ELEMENTS", 16 * 6 * 8)      # five blocks of 8 filters
    arrays = [_integers((1, 6, 4, 6), 1), _integers((40, 6, 3, 3), 2), _integers((40,), 3)]
    geometry = ((3, 3), (1, 1), (1, 1), relu)
    blocks = _spy(monkeypatch, W, "_filter_blocks")
    transforms = []
    real_transform = W.filter_transform
    monkeypatch.setattr(W, "filter_transform", lambda w: transforms.append(w.shape[0]) or
                        real_transform(w))
    expect = _convolve(arrays, *geometry, False, monkeypatch)
    assert blocks == [True] and transforms == [8] * 5
    for count in (1, 2, 3):
        _threads(monkeypatch, count)
        transforms.clear()
        got = _convolve(arrays, *geometry, True, monkeypatch)
        assert transforms == [8] * 5
        np.testing.assert_array_equal(got.view(np.uint64), expect.view(np.uint64))
    assert blocks == [True] * 4
    monkeypatch.setattr(W, "MAX_FILTERS_PER_TILE", 0)
    im2col = _convolve(arrays, *geometry, True, monkeypatch)
    np.testing.assert_array_equal(im2col.view(np.uint64), expect.view(np.uint64))
    monkeypatch.setattr(W, "MAX_FILTERS_PER_TILE", float("inf"))
    x, w, b = (nd.array(a, dtype=a.dtype) for a in arrays)
    w.attach_grad()
    with autograd.record():
        recorded = nd.nn._convolution(x, w, b, (3, 3), (1, 1), None, (1, 1), 40, 1, None, relu)
    assert blocks == [True] * 4
    np.testing.assert_array_equal(recorded.asnumpy().view(np.uint64), expect.view(np.uint64))


@pytest.mark.parametrize("threads", [1, 2])
def test_images_of_a_batch_in_bands_are_the_numpy_path(monkeypatch, threads):
    """A batch whose images are pieces of their own: each image whose columns outweigh the
    weights is worked in bands of output rows, in turn on its piece's thread (``_in_turn``),
    with the NumPy path's bits (small integers, whose sums are exact in any order)."""
    monkeypatch.setattr(K, "MIN_SIZE", 16)
    monkeypatch.setattr(NN, "PIECE_ELEMENTS", 1)         # one image a piece
    monkeypatch.setattr(NN, "SPLIT_ELEMENTS", 16)
    monkeypatch.setattr(NN, "ALIGN", 4)
    monkeypatch.setattr(NN, "MIN_BLOCK_WORK", 64)
    arrays = [_integers((3, 3, 21, 19), 1), _integers((10, 3, 7, 7), 2), _integers((10,), 3)]
    geometry = ((7, 7), (2, 2), (3, 3), True)
    _threads(monkeypatch, threads)
    bands = []
    real = NN._split_image
    monkeypatch.setattr(NN, "_split_image", lambda *args: bands.append(args[-1]) or real(*args))
    got = _convolve(arrays, *geometry, True, monkeypatch)
    assert bands.count(NN._in_turn) == 3
    expect = _convolve(arrays, *geometry, False, monkeypatch)
    np.testing.assert_array_equal(got.view(np.uint64), expect.view(np.uint64))


def test_blocks_are_aligned_large_and_cover_every_item():
    for count, unit, work, threads in [(64, 16, 147 * 12544, 2), (512, 16, 4608 * 49, 2),
                                       (37, 16, 10 ** 6, 3), (512, 16, 256 * 49, 2),
                                       (16, 16, 10 ** 8, 2), (8, 16, 10 ** 8, 2),
                                       (112, 1, 64 * 147 * 112, 2), (28, 4, 128 * 576 * 28, 3)]:
        blocks = NN._blocks(count, unit, work, threads)
        assert blocks[0][0] == 0 and blocks[-1][1] == count
        assert all(z == a2 for (_, z), (a2, _) in zip(blocks, blocks[1:]))
        assert all(a % unit == 0 for a, _ in blocks)
        assert len(blocks) == 1 or all((z - a) * work >= NN.MIN_BLOCK_WORK for a, z in blocks)
        assert len(blocks) <= NN.SPLIT_PARTS * threads


def test_a_recorded_batch_of_one_keeps_its_gradients(monkeypatch):
    """The parts' forward pass under ``autograd.record()``: the same output and gradients as on
    one thread (the transformed input kept for the weight gradient comes from the parts). Its
    weights are too few for the filter transform's kernel: NumPy's transform, before the parts."""
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((1, 16, 20, 20), (24, 16, 3, 3))]
    results = []
    for count in (1, 2):
        _threads(monkeypatch, count)
        x, w = (nd.array(a) for a in arrays)
        x.attach_grad()
        w.attach_grad()
        with autograd.record():
            out = nd.Convolution(x, w, kernel=(3, 3), pad=(1, 1), num_filter=24, no_bias=True)
        out.backward(nd.array(np.cos(np.arange(out.size, dtype=np.float32)).reshape(out.shape)))
        results.append([out.asnumpy(), x.grad.asnumpy(), w.grad.asnumpy()])
    for got, expect in zip(results[1], results[0]):
        np.testing.assert_array_equal(_bits(got), _bits(expect))
