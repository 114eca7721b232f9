"""``nd.linalg``: each operator's values, dtypes, shapes and gradients are MXNet 1.9.1's
(tests/data/mxnet_linalg/linalg.npz, recorded from the real MXNet by the same
``linalg_cases.record``): the reshuffles (extract/make diag/trian) bit for bit; the products and
factorizations to float rounding (LAPACK/BLAS add in other orders here and in MXNet: 2e-6 of
the largest entry for float32, 1e-12 for float64). Beside the records: finite-difference
gradients in float64, the factorizations' invariants, the errors, and the xp code on a
stand-in for CuPy."""
import os
import sys

import numpy as np
import pytest

import replay
import trainer_cli as mx
from trainer_cli import autograd, nd
from trainer_cli.base import MXNetError, ShapeError
from trainer_cli.ndarray import linalg as la_module

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "mxnet_linalg")
sys.path.insert(0, DATA)
sys.path.insert(0, HERE)
import linalg_cases  # noqa: E402

RECORDED = dict(np.load(os.path.join(DATA, "linalg.npz")))
OURS = linalg_cases.record(mx)
la = nd.linalg
EXACT = ("extractdiag", "makediag", "extracttrian", "maketrian")

MXNET_NAMES = ["det", "extractdiag", "extracttrian", "gelqf", "gemm", "gemm2", "inverse",
               "makediag", "maketrian", "potrf", "potri", "slogdet", "sumlogdiag", "syevd",
               "syrk", "trmm", "trsm"]


def test_every_recorded_case_is_here_and_every_mxnet_name():
    assert sorted(OURS) == sorted(RECORDED)
    assert sorted(la.__all__) == MXNET_NAMES
    assert all(callable(getattr(la, n)) for n in MXNET_NAMES)


@pytest.mark.parametrize("name", sorted(k for k in RECORDED if k.startswith(EXACT)))
def test_reshuffles_are_mxnets_bits(name):
    replay.same_bits(OURS[name], RECORDED[name])


@pytest.mark.parametrize("name", sorted(k for k in RECORDED if not k.startswith(EXACT)))
def test_each_case_is_mxnets_to_float_rounding(name):
    want = RECORDED[name]
    got = replay.same_layout(OURS[name], want)
    rtol = 2e-6 if want.dtype == np.float32 else 1e-12
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), finite)       # nan and -inf where MXNet's
    np.testing.assert_array_equal(got[~finite], want[~finite])
    scale = np.abs(want[finite]).max() if finite.any() else 1.0
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=rtol * scale)


def test_mxnets_conventions_where_they_are_choices():
    # syevd's eigenvector signs: each row's largest-magnitude entry is positive.
    u = RECORDED["syevd_diagonal_float64/out0"]
    np.testing.assert_array_equal(u, [[0, 1, 0], [0, 0, 1], [1, 0, 0]])
    np.testing.assert_array_equal(OURS["syevd_diagonal_float64/out1"], [-1, 2, 3])
    # A singular matrix's det/slogdet gradient is zero; its sign 0 and logabsdet -inf.
    for op in ("det", "slogdet"):
        np.testing.assert_array_equal(OURS["%s_batch_float32/grad0" % op][2], 0)
    assert OURS["slogdet_batch_float64/out0"][2] == 0
    assert OURS["slogdet_batch_float64/out1"][2] == -np.inf
    # One matrix reduces to shape (1,).
    assert OURS["det_2d_float32/out0"].shape == (1,)
    assert OURS["sumlogdiag_2d_float64/out0"].shape == (1,)


# ----------------------------------------------------------------------------- gradients
def _sym(rng, shape):
    m = rng.randn(*shape)
    return m + np.swapaxes(m, -1, -2)


def _tri(rng, shape):
    return linalg_cases._triangular(rng, shape, np.float64)


def _spd(rng, shape):
    return linalg_cases._spd(rng, shape, np.float64)


GRADIENT_CASES = {
    "gemm": (lambda a, b, c: la.gemm(a, b, c, transpose_a=True, alpha=0.3, beta=-2.0, axis=0),
             lambda r: [r.randn(4, 2, 3), r.randn(4, 2, 5), r.randn(3, 2, 5)], ()),
    "gemm2": (lambda a, b: la.gemm2(a, b, transpose_b=True, alpha=1.7),
              lambda r: [r.randn(2, 3, 4), r.randn(2, 5, 4)], ()),
    "trmm": (lambda a, b: la.trmm(a, b, transpose=True, rightside=True, lower=False, alpha=0.6),
             lambda r: [_tri(r, (2, 3, 3)), r.randn(2, 4, 3)], ()),
    "trsm": (lambda a, b: la.trsm(a, b, transpose=True, lower=True, alpha=-1.3),
             lambda r: [_tri(r, (2, 3, 3)), r.randn(2, 3, 4)], ()),
    "trsm_right_upper": (lambda a, b: la.trsm(a, b, rightside=True, lower=False),
                         lambda r: [_tri(r, (3, 3)), r.randn(2, 3)], ()),
    "potrf_lower": (la.potrf, lambda r: [_spd(r, (2, 3, 3))], (0,)),
    "potrf_upper": (lambda a: la.potrf(a, lower=False), lambda r: [_spd(r, (3, 3))], (0,)),
    "potri_lower": (la.potri, lambda r: [np.abs(_tri(r, (2, 3, 3)))], ()),
    "potri_upper": (lambda a: la.potri(a, lower=False), lambda r: [np.abs(_tri(r, (3, 3)))],
                    ()),
    "sumlogdiag": (la.sumlogdiag, lambda r: [np.abs(_tri(r, (2, 3, 3)))], ()),
    "syrk": (lambda a: la.syrk(a, alpha=0.4), lambda r: [r.randn(2, 3, 4)], ()),
    "syrk_t": (lambda a: la.syrk(a, transpose=True), lambda r: [r.randn(3, 2)], ()),
    "gelqf": (la.gelqf, lambda r: [r.randn(2, 3, 5)], ()),
    "syevd": (la.syevd, lambda r: [_sym(r, (2, 4, 4))], (0,)),
    "inverse": (la.inverse, lambda r: [r.randn(2, 3, 3) + 3 * np.eye(3)], ()),
    "det": (la.det, lambda r: [r.randn(2, 3, 3)], ()),
    "slogdet": (la.slogdet, lambda r: [r.randn(3, 3)], ()),
    "extractdiag": (lambda a: la.extractdiag(a, offset=-1), lambda r: [r.randn(2, 3, 3)], ()),
    "makediag": (lambda a: la.makediag(a, offset=2), lambda r: [r.randn(2, 3)], ()),
    "extracttrian": (lambda a: la.extracttrian(a, offset=1), lambda r: [r.randn(3, 3)], ()),
    "maketrian": (lambda a: la.maketrian(a, lower=False), lambda r: [r.randn(2, 6)], ()),
}


def _weighted(fn, arrays, weights):
    ys = fn(*arrays)
    ys = list(ys) if isinstance(ys, list) else [ys]
    return sum((y * w).sum() for y, w in zip(ys, weights))


@pytest.mark.parametrize("name", sorted(GRADIENT_CASES))
def test_gradient_is_the_finite_difference_in_float64(name):
    """The directional derivative of a weighted sum of the outputs along a random direction
    (symmetric for the operators that read one triangle of a symmetric matrix, where MXNet's
    gradient is the symmetric one) is the central difference's."""
    fn, make, symmetric = GRADIENT_CASES[name]
    rng = np.random.RandomState(7)
    inputs = make(rng)
    arrays = [nd.array(x, dtype="float64") for x in inputs]
    for a in arrays:
        a.attach_grad()
    ys = fn(*arrays)
    ys = ys if isinstance(ys, list) else [ys]
    weights = [nd.array(rng.randn(*y.shape), dtype="float64") for y in ys]
    with autograd.record():
        total = _weighted(fn, arrays, weights)
    total.backward()
    directions = [_sym(rng, x.shape) if k in symmetric else rng.randn(*x.shape)
                  for k, x in enumerate(inputs)]
    analytic = sum((a.grad.asnumpy() * d).sum() for a, d in zip(arrays, directions))
    h = 1e-6

    def at(step):
        moved = [nd.array(x + step * d, dtype="float64") for x, d in zip(inputs, directions)]
        return _weighted(fn, moved, weights).asscalar()
    numeric = (at(h) - at(-h)) / (2 * h)
    assert abs(analytic - numeric) <= 1e-6 * max(1.0, abs(numeric)), (analytic, numeric)


def test_only_the_triangle_read_has_a_gradient():
    rng = np.random.RandomState(1)
    a = nd.array(_tri(rng, (3, 3)))
    b = nd.array(rng.randn(3, 2))
    for op in (la.trmm, la.trsm):
        for lower in (True, False):
            a.attach_grad()
            with autograd.record():
                y = op(a, b, lower=lower)
            y.backward(nd.ones(y.shape))
            g = a.grad.asnumpy()
            outside = np.triu(g, 1) if lower else np.tril(g, -1)
            assert not outside.any() and np.tril(g).any() and np.triu(g).any()


# ----------------------------------------------------------------------------- invariants
def test_factorizations_reconstruct_their_input():
    rng = np.random.RandomState(3)
    spd = _spd(rng, (2, 4, 4))
    low = la.potrf(nd.array(spd, dtype="float64")).asnumpy()
    np.testing.assert_allclose(low @ np.swapaxes(low, -1, -2), spd, rtol=1e-12, atol=1e-12)
    assert not np.triu(low, 1).any()
    up = la.potrf(nd.array(spd, dtype="float64"), lower=False).asnumpy()
    np.testing.assert_allclose(np.swapaxes(up, -1, -2) @ up, spd, rtol=1e-12, atol=1e-12)
    inv = la.potri(nd.array(low, dtype="float64")).asnumpy()
    np.testing.assert_allclose(inv, np.linalg.inv(spd), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(inv, np.swapaxes(inv, -1, -2))     # exactly symmetric
    a = rng.randn(2, 3, 5)
    q, lq = (x.asnumpy() for x in la.gelqf(nd.array(a, dtype="float64")))
    np.testing.assert_allclose(lq @ q, a, atol=1e-12)
    np.testing.assert_allclose(q @ np.swapaxes(q, -1, -2), np.broadcast_to(np.eye(3), (2, 3, 3)),
                               atol=1e-12)
    s = _sym(rng, (2, 4, 4))
    u, lam = (x.asnumpy() for x in la.syevd(nd.array(s, dtype="float64")))
    np.testing.assert_allclose(np.swapaxes(u, -1, -2) @ (lam[..., None] * u), s, atol=1e-12)
    assert (np.diff(lam, axis=-1) > 0).all()
    big = np.take_along_axis(u, np.abs(u).argmax(-1)[..., None], -1)
    assert (big > 0).all()
    m = rng.randn(3, 3, 3)
    np.testing.assert_allclose(la.det(nd.array(m, dtype="float64")).asnumpy(), np.linalg.det(m),
                               rtol=1e-12)
    t = _tri(rng, (2, 3, 3))
    b = rng.randn(2, 3, 4)
    back = la.trsm(nd.array(t), la.trmm(nd.array(t), nd.array(b), alpha=2.0), alpha=0.5)
    np.testing.assert_allclose(back.asnumpy(), b, rtol=1e-4, atol=1e-5)
    sq = nd.array(rng.randn(2, 4, 4))
    for k, lower in ((0, True), (0, False), (2, True), (-1, True)):
        again = la.maketrian(la.extracttrian(sq, offset=k, lower=lower), offset=k, lower=lower)
        want = np.tril(sq.asnumpy(), k) if (k < 0 or (k == 0 and lower)) else \
            np.triu(sq.asnumpy(), k)
        np.testing.assert_array_equal(again.asnumpy(), want)


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize("call, error, match", [
    (lambda: la.potrf(nd.ones((2, 2), dtype="float16")), TypeError,
     "potrf: only float32 and float64 are supported .* got float16 for A"),
    (lambda: la.extractdiag(nd.ones((2, 2), dtype="int32")), TypeError,
     "extractdiag: only float32 and float64"),
    (lambda: la.gemm2(nd.ones((2, 2)), nd.ones((2, 2), dtype="float64")), TypeError,
     "gemm2: A and B must have one dtype, got float32 and float64"),
    (lambda: la.gemm2(nd.ones((2, 2)), np.ones((2, 2))), TypeError,
     "gemm2: B must be an NDArray"),
    (lambda: la.gemm2(nd.ones((2, 3)), nd.ones((4, 5))), ShapeError,
     "gemm2: incompatible matrix dimensions"),
    (lambda: la.gemm2(nd.ones((2, 2, 3)), nd.ones((1, 3, 5))), ShapeError,
     "gemm2: A and B must have the same shape except on the row and column axes"),
    (lambda: la.gemm2(nd.ones((3,)), nd.ones((3,))), ShapeError,
     "gemm2: A and B must have the same number"),
    (lambda: la.gemm2(nd.ones((2, 3)), nd.ones((3, 2)), axis=1), ShapeError,
     "gemm2: axis .* must be in \\[-2, 1\\), got 1"),
    (lambda: la.gemm(nd.ones((2, 3)), nd.ones((3, 4)), nd.ones((2, 3))), ShapeError,
     "gemm: C must have the product's shape \\(2, 4\\), got \\(2, 3\\)"),
    (lambda: la.potrf(nd.ones((2, 3))), ShapeError, "potrf: A must be .* square"),
    (lambda: la.potrf(nd.array([[1.0, 2.0], [2.0, 1.0]])), MXNetError,
     "potrf: a matrix is not positive definite"),
    (lambda: la.potri(nd.array([[0.0, 0.0], [2.0, 1.0]])), MXNetError,
     "potri: the triangular matrix has a zero on its diagonal"),
    (lambda: la.trsm(nd.array([[0.0, 0.0], [2.0, 1.0]]), nd.ones((2, 3))), ValueError,
     "trsm: the triangular matrix has a zero on its diagonal"),
    (lambda: la.trmm(nd.ones((2, 2)), nd.ones((3, 3))), ShapeError,
     "trmm: incompatible matrix dimensions"),
    (lambda: la.trsm(nd.ones((2, 2, 2)), nd.ones((3, 2, 2))), ShapeError,
     "trsm: A and B must have .* the same leading"),
    (lambda: la.inverse(nd.array([[1.0, 2.0], [2.0, 4.0]])), ValueError,
     "inverse: a matrix is singular"),
    (lambda: la.det(nd.ones((3,))), ShapeError, "det: A must be a matrix"),
    (lambda: la.sumlogdiag(nd.ones((2, 3))), ShapeError, "sumlogdiag: A must be"),
    (lambda: la.gelqf(nd.ones((3, 2))), ShapeError, "gelqf: .* x <= y, got shape \\(3, 2\\)"),
    (lambda: la.syevd(nd.ones((3, 2))), ShapeError, "syevd: A must be"),
    (lambda: la.extractdiag(nd.ones((3, 3)), offset=3), ShapeError,
     "extractdiag: offset 3 is out of range for 3x3"),
    (lambda: la.extracttrian(nd.ones((3, 3)), offset=-3), ShapeError,
     "extracttrian: offset -3 is out of range"),
    (lambda: la.extractdiag(nd.ones((3,))), ShapeError, "extractdiag: A must be a matrix"),
    (lambda: la.maketrian(nd.ones((4,))), ShapeError,
     "maketrian: the last axis of A must have a triangular length .* got 4"),
    (lambda: la.makediag(nd.ones((2,)), offset=0.5), TypeError, "makediag: offset must be an int"),
    (lambda: la.syrk(nd.ones((2, 2)), alpha="x"), TypeError, "syrk: alpha must be a number"),
    (lambda: la.potrf(nd.ones((2, 2)), True), TypeError, "positional"),  # lower: keyword only
])
def test_errors_name_the_operator_and_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ----------------------------------------------------------------------------- device code paths
STANDIN_CASES = [
    (lambda a, b, c: la.gemm(a, b, c, transpose_b=True, axis=0), [(3, 2, 4), (5, 2, 4),
                                                                 (3, 2, 5)]),
    (lambda a, b: la.trsm(a, b, rightside=True, lower=False, alpha=2.0), ["tri", (2, 4, 3)]),
    (lambda a, b: la.trmm(a, b, transpose=True), ["tri", (2, 3, 4)]),
    (lambda a: la.potrf(a, lower=False), ["spd"]),
    (la.potri, ["tri"]),
    (la.sumlogdiag, ["spd"]),
    (la.syrk, [(2, 3, 4)]),
    (la.gelqf, [(2, 3, 4)]),
    (la.syevd, ["spd"]),
    (la.inverse, ["tri"]),
    (la.det, ["tri"]),
    (la.slogdet, ["tri"]),
    (lambda a: la.extractdiag(a, 1), ["tri"]),
    (lambda a: la.makediag(a, -1), [(2, 3)]),
    (lambda a: la.extracttrian(a, lower=False), ["tri"]),
    (lambda a: la.maketrian(a, 1), [(2, 6)]),
]


@pytest.mark.parametrize("case", range(len(STANDIN_CASES)))
def test_array_module_code_makes_no_hidden_host_transfer(monkeypatch, case):
    """The xp code on a stand-in for CuPy that refuses implicit host transfers gives NumPy's
    results (the batched QR goes matrix by matrix there, as on CuPy)."""
    from standin_xp import run_on, standin_array_module
    standin_array_module(monkeypatch)
    fn, shapes = STANDIN_CASES[case]
    rng = np.random.RandomState(5)
    make = {"tri": lambda: _tri(rng, (2, 3, 3)), "spd": lambda: _spd(rng, (2, 3, 3))}
    inputs = [(make[s]() if isinstance(s, str) else rng.randn(*s)).astype(np.float32)
              for s in shapes]
    for a, b in zip(*[run_on(fn, inputs, device) for device in (False, True)]):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_linalg_error_is_an_mxnet_error_and_a_value_error():
    assert issubclass(la_module.LinalgError, MXNetError)
    assert issubclass(la_module.LinalgError, ValueError)


@pytest.mark.parametrize("stype", ["csr", "row_sparse"])
def test_sparse_inputs_fall_back_to_the_dense_operators_under_both_names(stype):
    # MXNet's storage fallback: a sparse matrix is densified, the result is dense.
    spd = nd.array([[4.0, 1.0, 0.0], [1.0, 3.0, 0.5], [0.0, 0.5, 2.0]])
    lower = nd.linalg.potrf(spd)
    calls = {
        "gemm": lambda a: nd.linalg.gemm(a, spd, spd), "gemm2": lambda a: nd.linalg.gemm2(a, spd),
        "potrf": nd.linalg.potrf, "potri": lambda a: nd.linalg.potri(lower.tostype(stype)),
        "trmm": lambda a: nd.linalg.trmm(lower.tostype(stype), a),
        "trsm": lambda a: nd.linalg.trsm(lower.tostype(stype), a),
        "sumlogdiag": nd.linalg.sumlogdiag, "syrk": nd.linalg.syrk, "gelqf": nd.linalg.gelqf,
        "syevd": nd.linalg.syevd, "inverse": nd.linalg.inverse, "det": nd.linalg.det,
        "slogdet": nd.linalg.slogdet, "extractdiag": nd.linalg.extractdiag,
        "makediag": lambda a: nd.linalg.makediag(nd.linalg.extractdiag(a).tostype(stype)
                                                 if stype == "row_sparse" else a),
        "extracttrian": nd.linalg.extracttrian,
        "maketrian": lambda a: nd.linalg.maketrian(nd.linalg.extracttrian(a)),
    }
    assert sorted(calls) == sorted(nd.linalg.__all__)
    for name, call in calls.items():
        got, want = call(spd.tostype(stype)), call(spd)
        for g, w in zip(got if isinstance(got, list) else [got],
                        want if isinstance(want, list) else [want]):
            assert g.stype == "default", name
            np.testing.assert_array_equal(g.asnumpy(), w.asnumpy(), err_msg=name)
        if name != "syevd":
            assert getattr(nd, "linalg_" + name) is getattr(nd.linalg, name)
    assert not hasattr(nd, "linalg_syevd")           # as in MXNet
