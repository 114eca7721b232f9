"""``nd.linalg`` as MXNet 1.9.1 computes it, written once against MXNet's API (``record(mx)``):
each operator's outputs (values, dtype, shape) for float32 and float64 over its options,
single matrices and batches, and the gradient of a weighted sum of its outputs with respect to
each input (``<name>/out<k>``, ``<name>/grad<k>``).

    /work/mxvenv/bin/python tests/data/mxnet_linalg/make_linalg_records.py

records ``linalg.npz``; tests/test_nd_linalg.py replays ``record`` with trainer_cli."""
import itertools

import numpy as np

DTYPES = (np.float32, np.float64)


def _case(mx, out, name, fn, inputs, use=None, seed=0):
    """``fn(*inputs)`` recorded: its outputs, and each input's gradient of a weighted sum of
    the outputs (those listed in ``use``; all by default)."""
    arrays = [mx.nd.array(x, dtype=x.dtype) for x in inputs]
    for a in arrays:
        a.attach_grad()
    rng = np.random.RandomState(seed)
    with mx.autograd.record():
        ys = fn(*arrays)
        ys = list(ys) if isinstance(ys, (list, tuple)) else [ys]
        total = None
        for k, y in enumerate(ys):
            w = rng.randn(*y.shape).astype(y.dtype)
            if use is not None and k not in use:
                continue
            term = (y * mx.nd.array(w, dtype=w.dtype)).sum()
            total = term if total is None else total + term
    total.backward()
    for k, y in enumerate(ys):
        out["%s/out%d" % (name, k)] = y.asnumpy()
    for k, a in enumerate(arrays):
        out["%s/grad%d" % (name, k)] = a.grad.asnumpy()


def _value(out, name, y):
    ys = list(y) if isinstance(y, (list, tuple)) else [y]
    for k, v in enumerate(ys):
        out["%s/out%d" % (name, k)] = v.asnumpy()


def _spd(rng, shape, dtype):
    m = rng.randn(*shape)
    n = shape[-1]
    return (np.matmul(m, np.swapaxes(m, -1, -2)) + n * np.eye(n)).astype(dtype)


def _triangular(rng, shape, dtype):
    """Full matrices whose triangles both make well-conditioned triangular matrices (the diagonal
    away from zero, either sign)."""
    a = 0.4 * rng.randn(*shape)
    n = shape[-1]
    idx = np.arange(n)
    a[..., idx, idx] = (1.5 + rng.rand(*shape[:-1])) * np.sign(rng.randn(*shape[:-1]))
    return a.astype(dtype)


def _symmetric(rng, shape, dtype):
    m = rng.randn(*shape)
    return ((m + np.swapaxes(m, -1, -2)) / 2).astype(dtype)


def record(mx):
    la = mx.nd.linalg
    out = {}
    rng = np.random.RandomState(0)
    for dt in DTYPES:
        s = np.dtype(dt).name
        r = lambda *shape: rng.randn(*shape).astype(dt)  # noqa: E731
        # gemm / gemm2: transposes, alpha/beta, batches, the row axis elsewhere.
        gemm_cases = {
            "2d": ((3, 4), (4, 5), (3, 5), {}),
            "tt": ((4, 3), (5, 4), (3, 5), dict(transpose_a=True, transpose_b=True,
                                                alpha=-0.7, beta=2.5)),
            "ta": ((2, 4, 3), (2, 4, 2), (2, 3, 2), dict(transpose_a=True, beta=0.0)),
            "tb": ((2, 1, 3, 4), (2, 1, 5, 4), (2, 1, 3, 5), dict(transpose_b=True, alpha=1.5)),
            "axis1": ((2, 3, 4, 5), (2, 5, 4, 6), (2, 3, 4, 6), dict(axis=1, alpha=0.5)),
            "axis0_ta": ((4, 2, 3), (4, 2, 5), (3, 2, 5), dict(axis=0, transpose_a=True)),
            "axis_neg3_tb": ((3, 2, 4), (5, 2, 4), (3, 2, 5), dict(axis=-3, transpose_b=True)),
        }
        for key, (sa, sb, sc, kw) in gemm_cases.items():
            _case(mx, out, "gemm_%s_%s" % (key, s),
                  lambda a, b, c, kw=kw: la.gemm(a, b, c, **kw), [r(*sa), r(*sb), r(*sc)])
            kw2 = {k: v for k, v in kw.items() if k != "beta"}
            _case(mx, out, "gemm2_%s_%s" % (key, s),
                  lambda a, b, kw2=kw2: la.gemm2(a, b, **kw2), [r(*sa), r(*sb)])
        # trmm / trsm: every (transpose, rightside, lower), the other triangle full of values
        # that must not be read.
        for tr, right, low in itertools.product((False, True), repeat=3):
            shape_b = (2, 4, 3) if right else (2, 3, 4)
            kw = dict(transpose=tr, rightside=right, lower=low, alpha=0.75 if tr else 1.0)
            key = "t%d_r%d_l%d_%s" % (tr, right, low, s)
            _case(mx, out, "trmm_" + key, lambda a, b, kw=kw: la.trmm(a, b, **kw),
                  [_triangular(rng, (2, 3, 3), dt), r(*shape_b)])
            _case(mx, out, "trsm_" + key, lambda a, b, kw=kw: la.trsm(a, b, **kw),
                  [_triangular(rng, (2, 3, 3), dt), r(*shape_b)])
        _case(mx, out, "trmm_2d_" + s, lambda a, b: la.trmm(a, b, alpha=-2.0),
              [_triangular(rng, (4, 4), dt), r(4, 2)])
        _case(mx, out, "trsm_2d_" + s, lambda a, b: la.trsm(a, b, alpha=-2.0),
              [_triangular(rng, (4, 4), dt), r(4, 2)])
        # potrf / potri: lower and upper, one matrix and a batch; the unread triangle garbage.
        for low in (True, False):
            for key, shape in (("2d", (4, 4)), ("batch", (2, 3, 3))):
                spd = _spd(rng, shape, dt)
                garbage = np.triu(r(*shape), 1) if low else np.tril(r(*shape), -1)
                name = "%s_%s_%s" % (key, "lower" if low else "upper", s)
                _case(mx, out, "potrf_" + name, lambda a, low=low: la.potrf(a, lower=low),
                      [spd + garbage])
                chol = np.linalg.cholesky(spd.astype(np.float64))
                factor = (chol if low else np.swapaxes(chol, -1, -2)).astype(dt)
                _case(mx, out, "potri_" + name, lambda a, low=low: la.potri(a, lower=low),
                      [factor + garbage])
        # sumlogdiag, syrk
        for key, shape in (("2d", (3, 3)), ("batch", (2, 2, 4, 4))):
            a = r(*shape)
            n = shape[-1]
            a[..., np.arange(n), np.arange(n)] = np.abs(a[..., np.arange(n), np.arange(n)]) + 0.5
            _case(mx, out, "sumlogdiag_%s_%s" % (key, s), la.sumlogdiag, [a])
        _value(out, "sumlogdiag_negative_" + s,
               la.sumlogdiag(mx.nd.array(np.diag([2.0, -1.0]).astype(dt), dtype=dt)))
        for key, shape, kw in (("2d", (3, 4), {}), ("t", (3, 4), dict(transpose=True)),
                               ("batch_alpha", (2, 3, 2), dict(alpha=-1.5)),
                               ("batch_t_alpha", (2, 3, 2), dict(transpose=True, alpha=0.25))):
            _case(mx, out, "syrk_%s_%s" % (key, s), lambda a, kw=kw: la.syrk(a, **kw),
                  [r(*shape)])
        # gelqf: wide, square, batched; each output alone too.
        for key, shape in (("2d", (3, 5)), ("square", (3, 3)), ("batch", (2, 2, 4))):
            _case(mx, out, "gelqf_%s_%s" % (key, s), la.gelqf, [r(*shape)])
        _case(mx, out, "gelqf_Q_only_" + s, la.gelqf, [r(2, 3, 4)], use=(0,))
        _case(mx, out, "gelqf_L_only_" + s, la.gelqf, [r(2, 3, 4)], use=(1,))
        # syevd: symmetric; a non-symmetric input (its lower triangle is read); each output alone.
        for key, shape in (("2d", (4, 4)), ("batch", (2, 3, 3))):
            _case(mx, out, "syevd_%s_%s" % (key, s), la.syevd, [_symmetric(rng, shape, dt)])
        _case(mx, out, "syevd_lower_read_" + s, la.syevd, [r(4, 4)])
        _case(mx, out, "syevd_U_only_" + s, la.syevd, [_symmetric(rng, (3, 3), dt)], use=(0,))
        _case(mx, out, "syevd_L_only_" + s, la.syevd, [_symmetric(rng, (3, 3), dt)], use=(1,))
        # A repeated eigenvalue: MXNet's gradient takes the zero gap as 1e-30 (1e-100).
        _case(mx, out, "syevd_repeated_" + s, la.syevd, [np.diag([2.0, 2.0, 5.0]).astype(dt)])
        _value(out, "syevd_diagonal_" + s,
               la.syevd(mx.nd.array(np.diag([3.0, -1.0, 2.0]).astype(dt), dtype=dt)))
        # inverse, det, slogdet: a batch with a negative determinant and a singular matrix.
        for key, shape in (("2d", (4, 4)), ("batch", (2, 3, 3))):
            a = r(*shape) + 3 * np.eye(shape[-1], dtype=dt)
            _case(mx, out, "inverse_%s_%s" % (key, s), la.inverse, [a])
        dets = r(4, 3, 3)
        dets[1] = dets[1][[1, 0, 2]]
        dets[2, 1] = 0
        dets[3] = np.triu(r(3, 3)) + np.diag([-2.0, 1.0, 1.5]).astype(dt)
        _case(mx, out, "det_batch_" + s, la.det, [dets])
        _case(mx, out, "det_2d_" + s, la.det, [r(3, 3)])
        _case(mx, out, "slogdet_batch_" + s, la.slogdet, [dets])
        _case(mx, out, "slogdet_2d_" + s, la.slogdet, [r(4, 4)])
        # The reshuffles: offsets on both sides, lower and upper, batches.
        sq = r(2, 4, 4)
        for k in (0, 1, 3, -1, -2):
            _case(mx, out, "extractdiag_%d_%s" % (k, s), lambda a, k=k: la.extractdiag(a, k),
                  [sq])
            _case(mx, out, "makediag_%d_%s" % (k, s), lambda a, k=k: la.makediag(a, offset=k),
                  [r(2, 3)])
            for low in (True, False):
                key = "%d_%s_%s" % (k, "lower" if low else "upper", s)
                _case(mx, out, "extracttrian_" + key,
                      lambda a, k=k, low=low: la.extracttrian(a, offset=k, lower=low), [sq])
                _case(mx, out, "maketrian_" + key,
                      lambda a, k=k, low=low: la.maketrian(a, offset=k, lower=low), [r(2, 6)])
        _case(mx, out, "extractdiag_2d_" + s, la.extractdiag, [r(3, 3)])
        _case(mx, out, "makediag_1d_" + s, lambda a: la.makediag(a, offset=-1), [r(3)])
        _case(mx, out, "extracttrian_2d_" + s, la.extracttrian, [r(3, 3)])
        _case(mx, out, "maketrian_1d_" + s, lambda a: la.maketrian(a, offset=2), [r(3)])
        _case(mx, out, "maketrian_3d_" + s, lambda a: la.maketrian(a, lower=False), [r(2, 1, 10)])
    return out
