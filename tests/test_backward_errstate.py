"""backward() gives inf and NaN silently, as MXNet's backward operators do, and leaves NumPy's
error settings as it found them: nested inside another backward, and on threads side by side."""
import threading

import numpy as np
import pytest

from trainer_cli import autograd, nd

BIG = 3e38


def _overflowing_backward():
    """A bias gradient summed over rows of huge head gradients: NumPy's reduction overflows."""
    x = nd.array(np.ones((4, 3), np.float32))
    b = nd.array(np.zeros((1, 3), np.float32))
    b.attach_grad()
    with autograd.record():
        y = nd.broadcast_add(x, b)
    y.backward(nd.array(np.full((4, 3), BIG, np.float32)))
    return b.grad.asnumpy()


def _settings_kept(before):
    assert np.geterr() == before
    with pytest.raises(FloatingPointError):
        np.float32(BIG) * np.float32(10)


def test_overflow_in_a_gradient_reduction_is_silent_and_the_settings_come_back():
    with np.errstate(all="raise"):
        before = np.geterr()
        assert np.isinf(_overflowing_backward()).all()
        _settings_kept(before)


class _BackwardInside(autograd.Function):
    """A Function whose backward runs a backward of its own."""

    def forward(self, x):
        return x * 2

    def backward(self, dy):
        self.inner = _overflowing_backward()
        return dy * 2


def test_a_backward_inside_a_backward_leaves_the_outer_settings():
    with np.errstate(all="raise"):
        before = np.geterr()
        x = nd.array(np.ones(3, np.float32))
        x.attach_grad()
        f = _BackwardInside()
        with autograd.record():
            y = f(x)
        y.backward()
        assert np.isinf(f.inner).all() and (x.grad.asnumpy() == 2).all()
        _settings_kept(before)


def test_backwards_on_threads_side_by_side_keep_each_threads_settings():
    kept, errors = [], []
    start = threading.Barrier(2)

    def run(setting):
        try:
            with np.errstate(all=setting):
                before = np.geterr()
                start.wait(10)
                for _ in range(50):
                    assert np.isinf(_overflowing_backward()).all()
                kept.append(np.geterr() == before)
        except BaseException as exc:   # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in ("raise", "warn")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and kept == [True, True]
