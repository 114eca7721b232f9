"""The fused RNN operator's numba gate loops give the NumPy reference path's bits.

The gate functions (Cephes' expf-based sigmoid and tanh, ``_rnn_kernels``) element by element
against their array form over values of every range; then ``nd.RNN`` forward and backward with
the loops (numba on, size floor lowered) against the NumPy bodies (numba off), comparing the raw
bits of the output, the final states and every gradient, for LSTM (with and without a
projection), GRU and both vanilla RNNs, odd sizes, one and two directions, one to three layers.
"""
import numpy as np
import pytest

from trainer_cli import _jit, autograd, nd
from trainer_cli.ndarray import _rnn_kernels as K
from trainer_cli.ndarray.rnn import param_size

numba = pytest.importorskip("numba")


def _values():
    rng = np.random.default_rng(3)
    parts = [rng.standard_normal(20000).astype(np.float32) * s for s in (0.05, 0.7, 4, 40)]
    special = [0, -0.0, 0.625, -0.625, 0.62499994, -0.62499994, 87.3, -87.3, -87.34, 88.8,
               -88.8, 104, -104, 1e3, -1e3, np.inf, -np.inf, 1e-30, -1e-30, 1.4e-45]
    return np.concatenate(parts + [np.array(special, np.float32)])


def test_gate_functions_element_by_element_equal_their_array_form():
    sigmoid, tanh = K._sigmoid.compiled(), K._tanh.compiled()

    @numba.njit(error_model="numpy")
    def apply(x, s, t):
        for k in range(x.size):
            s[k] = sigmoid(x[k])
            t[k] = tanh(x[k])

    x = _values()
    s, t = np.empty_like(x), np.empty_like(x)
    apply(x, s, t)
    with np.errstate(all="ignore"):
        ref_s, ref_t = K.np_sigmoid(x), K.np_tanh(x)
    assert ref_s.dtype == ref_t.dtype == np.float32
    assert s.tobytes() == ref_s.tobytes()
    assert t.tobytes() == ref_t.tobytes()
    # and within a few ulp of the true values (where the sigmoid is a normal number)
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        true_s, true_t = 1 / (1 + np.exp(-x64)), np.tanh(x64)
    normal = np.abs(x) < 80
    for got, true in ((s[normal], true_s[normal]), (t, true_t)):
        ulp = np.spacing(np.abs(true).astype(np.float32)).astype(np.float64)
        assert np.max(np.abs(got - true) / ulp) <= 3
    nan = np.array([np.nan], np.float32)
    assert np.isnan(K.np_tanh(nan)).all() and np.isnan(K.np_sigmoid(nan)).all()


CASES = [
    # mode, steps, batch, input, hidden, layers, bidirectional, projection
    ("lstm", 5, 3, 7, 9, 2, True, None),
    ("lstm", 4, 2, 5, 11, 1, False, 6),
    ("lstm", 3, 5, 4, 13, 2, True, 3),
    ("gru", 6, 3, 5, 9, 3, False, None),
    ("gru", 4, 2, 3, 7, 2, True, None),
    ("rnn_tanh", 5, 4, 3, 17, 2, True, None),
    ("rnn_relu", 5, 3, 6, 10, 2, False, None),
]


def _run(case, kernels, monkeypatch):
    mode, steps, batch, width, hidden, layers, bidi, proj = case
    monkeypatch.setattr(_jit, "_numba", None if kernels else False)
    monkeypatch.delenv("TRAINER_NO_NUMBA", raising=False)
    monkeypatch.setattr(K, "MIN_SIZE", 1)
    calls = []
    for name, loop in list(K._LOOPS.items()):
        def counted(*args, _loop=loop, _name=name):
            calls.append(_name)
            return _loop(*args)
        monkeypatch.setitem(K._LOOPS, name, counted)
    rng = np.random.default_rng(hash(case) % 2 ** 32)
    dirs = 2 if bidi else 1
    state = proj or hidden
    size = param_size(mode, width, hidden, layers, bidi, proj)
    arrays = [rng.standard_normal((steps, batch, width)),
              rng.standard_normal(size) * 0.6,
              rng.standard_normal((layers * dirs, batch, state))]
    if mode == "lstm":
        arrays.append(rng.standard_normal((layers * dirs, batch, hidden)))
    args = [nd.array(a.astype(np.float32)) for a in arrays]
    for a in args:
        a.attach_grad()
    heads = None
    with autograd.record():
        outs = nd.RNN(*args, state_size=hidden, num_layers=layers, bidirectional=bidi, mode=mode,
                      projection_size=proj, state_outputs=True)
    heads = [nd.array(rng.standard_normal(o.shape).astype(np.float32)) for o in outs]
    autograd.backward(outs, heads)
    return [o.asnumpy() for o in outs] + [a.grad.asnumpy() for a in args], calls


@pytest.mark.parametrize("case", CASES, ids=lambda c: "%s-%s" % (c[0], "-".join(map(str, c[1:]))))
def test_fused_op_with_kernels_gives_the_reference_bits(case, monkeypatch):
    with_kernels, calls = _run(case, True, monkeypatch)
    reference, none = _run(case, False, monkeypatch)
    mode = case[0].split("_")[0]
    assert {mode + "_forward", mode + "_backward"} <= set(calls) and not none
    for got, want in zip(with_kernels, reference):
        assert np.isfinite(want).all() and np.any(want != 0)
        assert got.dtype == want.dtype == np.float32 and got.tobytes() == want.tobytes()


def test_the_step_loop_runs_on_one_blas_thread_and_restores_the_count():
    from threadpoolctl import threadpool_limits
    from trainer_cli.ndarray import host_threads
    with threadpool_limits(2, user_api="blas"):
        if host_threads.blas_threads() != 2:
            pytest.skip("the BLAS here cannot run 2 threads")
        with host_threads.one_blas_thread():
            assert host_threads.blas_threads() == 1
            with host_threads.one_blas_thread():        # nested: changes nothing
                assert host_threads.blas_threads() == 1
            assert host_threads.blas_threads() == 1
        assert host_threads.blas_threads() == 2
