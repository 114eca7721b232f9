"""Large scratch arrays kept between steps (``trainer_cli.ndarray.scratch``): the pool's rules,
and a convolution whose column matrices go through it computing what it computes without it."""
import gc
import os
import subprocess
import sys

import numpy as np
import pytest

from trainer_cli import autograd, nd
from trainer_cli.ndarray import _conv_kernels as _ck, scratch


@pytest.fixture
def pool(monkeypatch):
    """The pool emptied, with small thresholds so that test-sized arrays are kept."""
    scratch.release()
    monkeypatch.setattr(scratch, "MIN_BYTES", 64)
    monkeypatch.setattr(scratch, "MAX_BYTES", 1 << 20)
    monkeypatch.setattr(scratch, "ENABLED", True)
    yield scratch
    scratch.release()


def test_a_given_array_is_taken_again_for_its_shape_and_dtype(pool):
    a = pool.take((4, 8), np.float32)
    assert a.shape == (4, 8) and a.dtype == np.float32 and a.flags.c_contiguous
    pool.give(a)
    assert pool.held_bytes() == a.nbytes
    assert pool.take((8, 4), np.float32) is not a          # another shape
    assert pool.take((4, 8), np.float64) is not a          # another dtype
    assert pool.take((4, 8), "float32") is a
    assert pool.held_bytes() == 0
    assert pool.take((4, 8), np.float32) is not a          # taken once only


def test_small_arrays_views_and_non_contiguous_arrays_are_not_kept(pool):
    pool.give(np.empty(4, np.float32))                      # 16 bytes: below MIN_BYTES
    base = np.empty((16, 16), np.float32)
    pool.give(base[:8])                                     # a view
    pool.give(np.empty((16, 16), np.float32, order="F")[:, :])
    pool.give([1, 2, 3])
    assert pool.held_bytes() == 0


def test_the_pool_is_bounded_per_shape_and_in_bytes(pool, monkeypatch):
    monkeypatch.setattr(pool, "PER_SHAPE", 2)
    arrays = [np.empty(64, np.float32) for _ in range(3)]
    for a in arrays:
        pool.give(a)
    assert pool.take((64,), np.float32) is arrays[1]
    assert pool.take((64,), np.float32) is arrays[0]
    third = pool.take((64,), np.float32)
    assert all(third is not a for a in arrays)              # the third was not kept

    monkeypatch.setattr(pool, "MAX_BYTES", 1024)
    first, second = np.empty(128, np.float32), np.empty(160, np.float32)    # 512 + 640 bytes
    pool.give(first)
    pool.give(second)
    assert pool.take((160,), np.float32) is second
    assert pool.take((128,), np.float32) is not first       # the older one went


def test_give_when_dropped_waits_for_the_owner(pool):
    a = np.empty(64, np.float32)

    def owner():
        return a
    pool.give_when_dropped(owner, a)
    assert pool.take((64,), np.float32) is not a
    del owner
    gc.collect()
    assert pool.take((64,), np.float32) is a


def _conv_step(x, w, b, head, pad=1):
    xs, ws, bs = nd.array(x), nd.array(w), nd.array(b)
    for v in (xs, ws, bs):
        v.attach_grad()
    with autograd.record():
        out = nd.Convolution(xs, ws, bs, kernel=w.shape[2:], num_filter=w.shape[0], pad=(pad, pad))
    out.backward(nd.array(head))
    return [a.asnumpy().copy() for a in (out, xs.grad, ws.grad, bs.grad)]


def _arrays(seed, shape=(3, 4, 9, 9), filters=5):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape).astype(np.float32),
            rng.standard_normal((filters, shape[1], 3, 3)).astype(np.float32),
            rng.standard_normal(filters).astype(np.float32),
            rng.standard_normal((shape[0], filters) + shape[2:]).astype(np.float32))


def _bits(arrays):
    return [a.view(np.uint32).tolist() for a in arrays]


@pytest.mark.parametrize("kernels", [True, False])
def test_convolution_steps_through_the_pool_compute_the_same_bits(pool, monkeypatch, kernels):
    # Test-sized layers take the numba passes only with their size floor lowered; the NumPy
    # path builds its columns as a view and takes a kept array for the gradient's only.
    monkeypatch.setattr(_ck, "MIN_SIZE", 16 if kernels else 1 << 40)
    first, second = _arrays(1), _arrays(2)
    monkeypatch.setattr(pool, "MIN_BYTES", 1 << 40)         # nothing kept: the reference
    expect = [_bits(_conv_step(*first)), _bits(_conv_step(*second))]
    monkeypatch.setattr(pool, "MIN_BYTES", 64)
    pool.release()
    got = [_bits(_conv_step(*first)), _bits(_conv_step(*second)), _bits(_conv_step(*first))]
    assert got == expect + expect[:1]
    # The forward's column matrix and the gradient's came back: both are kept now.
    x, w = first[0], first[1]
    cols = w.shape[1] * 9 * x.shape[0] * x.shape[2] * x.shape[3]
    assert pool.held_bytes() == (2 if kernels else 1) * cols * 4


def test_a_retained_graph_keeps_its_column_matrix(pool, monkeypatch):
    monkeypatch.setattr(_ck, "MIN_SIZE", 16)
    x, w, b, head = _arrays(3)
    xs, ws, bs = nd.array(x), nd.array(w), nd.array(b)
    for v in (xs, ws, bs):
        v.attach_grad()
    with autograd.record():
        out = nd.Convolution(xs, ws, bs, kernel=(3, 3), num_filter=5, pad=(1, 1))
    out.backward(nd.array(head), retain_graph=True)
    first = ws.grad.asnumpy().copy()
    # Other convolutions of the same shape in between: none may take the retained graph's matrix.
    for seed in (4, 5):
        _conv_step(*_arrays(seed))
    out.backward(nd.array(head))
    np.testing.assert_array_equal(ws.grad.asnumpy(), first)


def test_inference_gives_the_column_matrix_back_at_once(pool, monkeypatch):
    monkeypatch.setattr(_ck, "MIN_SIZE", 16)
    x, w, b, _ = _arrays(6)
    nd.Convolution(nd.array(x), nd.array(w), nd.array(b), kernel=(3, 3), num_filter=5,
                   pad=(1, 1))
    assert pool.held_bytes() == 4 * 9 * 3 * 81 * 4


def test_the_pool_is_off_with_malloc_tuning_off(pool, monkeypatch):
    monkeypatch.setattr(pool, "ENABLED", False)         # TRAINER_MALLOC_TUNE=0
    a = np.empty(64, np.float32)
    pool.give(a)

    def owner():
        return a
    pool.give_when_dropped(owner, a)
    del owner
    gc.collect()
    assert pool.held_bytes() == 0 and pool.take((64,), np.float32) is not a


def test_the_switch_is_read_from_the_environment():
    probe = "from trainer_cli.ndarray import scratch; print(scratch.ENABLED)"
    for value, expect in (("0", "False"), ("1", "True")):
        env = dict(os.environ, TRAINER_MALLOC_TUNE=value)
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                             text=True, timeout=120, check=True).stdout.strip()
        assert out == expect
