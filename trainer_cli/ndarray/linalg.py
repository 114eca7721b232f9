"""``nd.linalg``: MXNet 1.9.1's linear-algebra operators on batches of matrices (the last two
axes; ``gemm``/``gemm2`` may take the rows from another axis): the products ``gemm``,
``gemm2``, ``trmm``, ``syrk``, the triangular solve ``trsm``, the Cholesky pair ``potrf``/
``potri``, ``sumlogdiag``, the LQ factorization ``gelqf``, the symmetric eigendecomposition
``syevd``, ``inverse``, ``det``, ``slogdet``, and the reshuffles ``extractdiag``/``makediag``/
``extracttrian``/``maketrian``, with the gradients MXNet defines for each.

Like MXNet, every operator takes float32 or float64 only, all inputs of one dtype. The
reshuffles are MXNet's values exactly. The factorizations and products run through NumPy's/
CuPy's LAPACK and BLAS in the input's dtype, as MXNet's do, so they agree with MXNet's to
rounding (float32 ~1e-6 relative, float64 ~1e-14, more for ill-conditioned matrices), not bit
for bit: the libraries add in other orders. The factorizations follow LAPACK's conventions as
MXNet calls them: ``potrf``/``syevd`` read one triangle only, ``gelqf`` is LAPACK's Householder
LQ (``L``'s diagonal may be negative), ``syevd``'s eigenvector rows are signed so that each
one's largest-magnitude entry (the first of ties) is positive.

Where MXNet fails with a LAPACK code or silently returns inf/nan, these raise ``LinalgError``
(an ``MXNetError`` and ``ValueError``): ``potrf`` of a matrix that is not positive definite,
``inverse`` of a singular one, ``potri``/``trsm`` of a triangular matrix with a zero on its
diagonal. ``det``'s and ``slogdet``'s gradients are zero for singular matrices, as MXNet's are.
"""
from __future__ import annotations

import contextlib
import math

import numpy

from ..base import MXNetError, ShapeError
from ._params import flag
from .ndarray import NDArray, _result, _xp_of

__all__ = ["gemm", "gemm2", "potrf", "potri", "trmm", "trsm", "sumlogdiag", "syrk", "gelqf",
           "syevd", "inverse", "det", "slogdet", "extractdiag", "makediag", "extracttrian",
           "maketrian"]

_FLOATS = (numpy.dtype(numpy.float32), numpy.dtype(numpy.float64))


class LinalgError(MXNetError, ValueError):
    """A matrix the operator cannot factorize or solve with (not positive definite, singular)."""


# ----------------------------------------------------------------------------- checks
def _data(name, *arrays):
    """The raw arrays of ``arrays`` (name, NDArray pairs), checked: NDArrays of one dtype,
    float32 or float64."""
    out = []
    for arg, a in arrays:
        if not isinstance(a, NDArray):
            raise TypeError("%s: %s must be an NDArray, got %s" % (name, arg, type(a).__name__))
        d = a._data
        if d.dtype not in _FLOATS:
            raise TypeError("%s: only float32 and float64 are supported (as in MXNet), got %s "
                            "for %s" % (name, d.dtype, arg))
        if out and d.dtype != out[0].dtype:
            raise TypeError("%s: %s and %s must have one dtype, got %s and %s"
                            % (name, arrays[0][0], arg, out[0].dtype, d.dtype))
        out.append(d)
    return out if len(out) > 1 else out[0]


def _square(name, d, arg="A"):
    if d.ndim < 2 or d.shape[-1] != d.shape[-2]:
        raise ShapeError("%s: %s must be a matrix or a batch of square matrices (..., n, n), "
                         "got shape %s" % (name, arg, d.shape))


def _same_batch(name, a, b):
    if a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2]:
        raise ShapeError("%s: A and B must have the same number of axes and the same leading "
                         "(batch) axes, got shapes %s and %s" % (name, a.shape, b.shape))


# ----------------------------------------------------------------------------- helpers
def _t(a):
    """The matrices of ``a`` transposed."""
    return a.swapaxes(-1, -2)


def _op(a, transpose):
    return _t(a) if transpose else a


def _tril(a, xp, k=0):
    """The entries of ``a``'s matrices on and below their diagonal ``k``; the rest zero."""
    rows, cols = a.shape[-2:]
    keep = xp.arange(rows)[:, None] + k >= xp.arange(cols)[None, :]
    return xp.where(keep, a, a.dtype.type(0))


def _tri(a, lower, xp):
    """The lower (or upper) triangle of ``a``, diagonal included; the rest zero."""
    return _tril(a, xp) if lower else _t(_tril(_t(a), xp))


def _lower_to_upper(a, xp):
    """``a`` made symmetric from its lower triangle (MXNet's ``CopyTriangularToOppositeSide``
    towards the upper side)."""
    return _tril(a, xp) + _t(_tril(a, xp, -1))


def _symmetric_from(a, lower, xp):
    """The symmetric matrices whose ``lower`` (or upper) triangle is ``a``'s: what LAPACK reads
    of ``a``."""
    return _lower_to_upper(a if lower else _t(a), xp)


def _identity_like(a, xp):
    n = a.shape[-1]
    return xp.broadcast_to(xp.eye(n, dtype=a.dtype), a.shape).copy()


def _lapack_raises(xp):
    """A context in which a failed factorization raises ``LinAlgError``: NumPy always does;
    CuPy only under ``cupyx.errstate(linalg='raise')`` (it costs a wait for the device)."""
    if xp is numpy:
        return contextlib.nullcontext()
    try:
        import cupyx
        return cupyx.errstate(linalg="raise")
    except (ImportError, AttributeError, TypeError):
        return contextlib.nullcontext()


def _check_diagonal(name, t, xp):
    """Refuse triangular ``t`` with an exact zero on a diagonal: a solve with it is undefined
    (MXNet's BLAS returns inf/nan)."""
    if t.size and (xp.diagonal(t, axis1=-2, axis2=-1) == 0).any().item():
        raise LinalgError("%s: the triangular matrix has a zero on its diagonal (it is singular)"
                          % name)


def _solve_tri(name, t, b, lower, transpose, rightside, xp, check=True):
    """``op(T)^-1 B`` (or ``B op(T)^-1`` on the right side) for the ``lower`` (or upper)
    triangle ``T`` of ``t``, ``op`` transposing when ``transpose``: BLAS's ``trsm`` with alpha
    1, as a general solve of the triangular matrix (no SciPy). ``check=False`` where the
    diagonal is known to hold no zero (a gradient of a checked forward)."""
    t = _tri(t, lower, xp)
    if check:
        _check_diagonal(name, t, xp)
    a = _op(t, transpose)
    if b.shape[-1] == 0 or b.shape[-2] == 0:
        return xp.zeros(b.shape, dtype=b.dtype)
    if rightside:       # X op(T) = B  <=>  op(T)^T X^T = B^T
        return _t(xp.linalg.solve(_t(a), _t(b)))
    return xp.linalg.solve(a, b)


def _scalar(dtype, value, name, arg):
    try:
        return dtype.type(float(value))
    except (TypeError, ValueError):
        raise TypeError("%s: %s must be a number, got %r" % (name, arg, value)) from None


def _int(value, name, arg):
    try:
        out = int(value)
    except (TypeError, ValueError):
        raise TypeError("%s: %s must be an int, got %r" % (name, arg, value)) from None
    if out != value and not isinstance(value, str):
        raise TypeError("%s: %s must be an int, got %r" % (name, arg, value))
    return out


# ----------------------------------------------------------------------------- products
def _mac_shapes(name, a, b, c, transpose_a, transpose_b, axis):
    """The row axis, normalised, after checking the shapes of a (multiply-)accumulate."""
    if a.ndim < 2 or a.ndim != b.ndim:
        raise ShapeError("%s: A and B must have the same number (>= 2) of axes, got shapes %s "
                         "and %s" % (name, a.shape, b.shape))
    ndim = a.ndim
    row = axis + ndim if axis < 0 else axis
    if not 0 <= row < ndim - 1:
        raise ShapeError("%s: axis (the rows' axis) must be in [%d, %d), got %d"
                         % (name, -ndim, ndim - 1, axis))
    for i in range(ndim - 1):
        if i != row and a.shape[i] != b.shape[i]:
            raise ShapeError("%s: A and B must have the same shape except on the row and column "
                             "axes, got %s and %s" % (name, a.shape, b.shape))
    inner_a = a.shape[row] if transpose_a else a.shape[-1]
    inner_b = b.shape[-1] if transpose_b else b.shape[row]
    if inner_a != inner_b:
        raise ShapeError("%s: incompatible matrix dimensions for multiplication: op(A) has %d "
                         "columns, op(B) %d rows (shapes %s and %s, transpose_a=%s, "
                         "transpose_b=%s)" % (name, inner_a, inner_b, a.shape, b.shape,
                                              transpose_a, transpose_b))
    if c is not None:
        shape = list(a.shape)
        shape[row] = a.shape[-1] if transpose_a else a.shape[row]
        shape[-1] = b.shape[row] if transpose_b else b.shape[-1]
        if tuple(c.shape) != tuple(shape):
            raise ShapeError("%s: C must have the product's shape %s, got %s"
                             % (name, tuple(shape), c.shape))
    return row


def _mac(name, A, B, C, transpose_a, transpose_b, alpha, beta, axis):
    """gemm and gemm2 (``C`` None): ``alpha * op(A) op(B) (+ beta * C)``."""
    inputs = (("A", A), ("B", B)) + ((("C", C),) if C is not None else ())
    raw = _data(name, *inputs)
    a, b = raw[0], raw[1]
    c = raw[2] if C is not None else None
    ta, tb = flag(name, "transpose_a", transpose_a), flag(name, "transpose_b", transpose_b)
    row = _mac_shapes(name, a, b, c, ta, tb, _int(axis, name, "axis"))
    xp = _xp_of(a)
    al = _scalar(a.dtype, alpha, name, "alpha")
    be = _scalar(a.dtype, beta, name, "beta") if C is not None else None
    last = a.ndim - 1

    def rows_last(x):          # the rows' axis moved next to the columns' (batch in front)
        return x if row == last - 1 else xp.moveaxis(x, row, -2)

    def rows_back(x):
        return x if row == last - 1 else xp.moveaxis(x, -2, row)

    a2, b2 = rows_last(a), rows_last(b)
    with A._ctx.device_scope():
        out = xp.matmul(_op(a2, ta), _op(b2, tb)) * al
        if c is not None:
            out = out + be * rows_last(c)
        out = xp.ascontiguousarray(rows_back(out))

    def vjp(g, needs):
        g2 = rows_last(g)
        ga = gb = gc = None
        if needs[0]:
            ga = rows_back(al * (xp.matmul(_op(b2, tb), _t(g2)) if ta
                                 else xp.matmul(g2, _t(_op(b2, tb)))))
        if needs[1]:
            gb = rows_back(al * (xp.matmul(_t(g2), _op(a2, ta)) if tb
                                 else xp.matmul(_t(_op(a2, ta)), g2)))
        if len(needs) > 2 and needs[2]:
            gc = g * be
        return (ga, gb) if c is None else (ga, gb, gc)
    return _result(out, A._ctx, tuple(x for _, x in inputs), vjp)


def gemm(A, B, C, transpose_a=False, transpose_b=False, alpha=1.0, beta=1.0, axis=-2):
    """``alpha * op(A) op(B) + beta * C`` for each matrix of a batch, ``op`` transposing where
    ``transpose_a``/``transpose_b`` say. The matrices' rows lie on ``axis`` and their columns on
    the last axis; the other axes (which must agree) are the batch. Differentiable in A, B, C."""
    return _mac("gemm", A, B, C, transpose_a, transpose_b, alpha, beta, axis)


def gemm2(A, B, transpose_a=False, transpose_b=False, alpha=1.0, axis=-2):
    """``alpha * op(A) op(B)`` for each matrix of a batch (``gemm`` without C). Differentiable
    in A and B."""
    return _mac("gemm2", A, B, None, transpose_a, transpose_b, alpha, 0.0, axis)


def _triangular_args(name, A, B, transpose, rightside, lower, alpha):
    a, b = _data(name, ("A", A), ("B", B))
    _square(name, a)
    _same_batch(name, a, b)
    flags = (flag(name, "transpose", transpose), flag(name, "rightside", rightside),
             flag(name, "lower", lower))
    n = a.shape[-1]
    along = b.shape[-1] if flags[1] else b.shape[-2]
    if along != n:
        raise ShapeError("%s: incompatible matrix dimensions: A is %dx%d and B %s (rightside=%s)"
                         % (name, n, n, b.shape, flags[1]))
    return a, b, flags, _scalar(a.dtype, alpha, name, "alpha")


def trmm(A, B, transpose=False, rightside=False, lower=True, alpha=1.0):
    """``alpha * op(A) B`` (or ``alpha * B op(A)`` when ``rightside``) with ``A`` the lower (or,
    ``lower=False``, upper) triangle of the first input (the other triangle is not read) and
    ``op`` transposing when ``transpose``. Differentiable in A (its triangle) and B."""
    a, b, (tr, right, low), al = _triangular_args("trmm", A, B, transpose, rightside, lower,
                                                  alpha)
    xp = _xp_of(a)
    ta = _op(_tri(a, low, xp), tr)
    with A._ctx.device_scope():
        out = (xp.matmul(b, ta) if right else xp.matmul(ta, b)) * al

    def vjp(g, needs):
        ga = gb = None
        if needs[0]:
            # d/dT of <G, op(T) B> or <G, B op(T)>, then op's transpose undone.
            d = xp.matmul(_t(b), g) if right else xp.matmul(g, _t(b))
            ga = _tri(al * _op(d, tr), low, xp)
        if needs[1]:
            gb = al * (xp.matmul(g, _t(ta)) if right else xp.matmul(_t(ta), g))
        return ga, gb
    return _result(out, A._ctx, (A, B), vjp)


def trsm(A, B, transpose=False, rightside=False, lower=True, alpha=1.0):
    """The solution ``X`` of ``op(A) X = alpha * B`` (or ``X op(A) = alpha * B`` when
    ``rightside``), ``A`` the lower (or upper) triangle of the first input (the other triangle
    is not read). Raises ``LinalgError`` where A has a zero on its diagonal (MXNet returns
    inf/nan). Differentiable in A (its triangle) and B."""
    a, b, (tr, right, low), al = _triangular_args("trsm", A, B, transpose, rightside, lower,
                                                  alpha)
    xp = _xp_of(a)
    with A._ctx.device_scope():
        out = xp.ascontiguousarray(_solve_tri("trsm", a, b, low, tr, right, xp) * al)

    def vjp(g, needs):
        ga = gb = None
        # op(T)^-T G (or G op(T)^-T): B's gradient over alpha, and A's ingredient.
        s = _solve_tri("trsm", a, g, low, not tr, right, xp, check=False)
        if needs[1]:
            gb = s * al
        if needs[0]:
            # MXNet divides B's gradient by alpha again; this is the same without the division
            # (so alpha = 0 gives a zero gradient, not nan).
            d = xp.matmul(_t(out), s) if right else xp.matmul(s, _t(out))
            ga = _tri(-_op(d, tr), low, xp)
        return ga, gb
    return _result(out, A._ctx, (A, B), vjp)


def syrk(A, transpose=False, alpha=1.0):
    """``alpha * A A^T`` (or ``alpha * A^T A`` when ``transpose``) for each matrix of a batch;
    exactly symmetric (the upper triangle is the lower's, as MXNet copies it). Differentiable."""
    a = _data("syrk", ("A", A))
    if a.ndim < 2:
        raise ShapeError("syrk: A must be a matrix or a batch of matrices, got shape %s"
                         % (a.shape,))
    tr = flag("syrk", "transpose", transpose)
    al = _scalar(a.dtype, alpha, "syrk", "alpha")
    xp = _xp_of(a)
    with A._ctx.device_scope():
        out = _lower_to_upper(xp.matmul(_op(a, tr), _t(_op(a, tr))) * al, xp)

    def vjp(g, needs):
        sym = g + _t(g)
        return (al * (xp.matmul(a, sym) if tr else xp.matmul(sym, a)),)
    return _result(out, A._ctx, (A,), vjp)


# ----------------------------------------------------------------------------- Cholesky
def potrf(A, *, lower=True):
    """The Cholesky factor of each symmetric positive definite matrix: lower triangular ``L``
    with ``A = L L^T`` (or, ``lower=False``, upper ``U`` with ``A = U^T U``), the other triangle
    zero. Only A's lower (upper) triangle is read. Raises ``LinalgError`` where a matrix is not
    positive definite. Differentiable (MXNet's symmetric gradient)."""
    a = _data("potrf", ("A", A))
    _square("potrf", a)
    low = flag("potrf", "lower", lower)
    xp = _xp_of(a)
    with A._ctx.device_scope():
        s = _symmetric_from(a, low, xp)
        try:
            with _lapack_raises(xp):
                chol = xp.linalg.cholesky(s)
        except numpy.linalg.LinAlgError:
            chol = None
        if chol is None or (xp is not numpy and xp.isnan(chol).any().item()):
            raise LinalgError("potrf: a matrix is not positive definite (its Cholesky "
                              "factorization failed)")
        out = chol if low else xp.ascontiguousarray(_t(chol))

    def vjp(g, needs):
        # 0.5 * B^-T sym(B^T G) B^-1 for lower B (sym: the lower triangle mirrored), and the
        # transposed form 0.5 * B^-1 sym'(G B^T) B^-T for upper B (sym': the upper mirrored).
        if low:
            m = _lower_to_upper(xp.matmul(_t(out), g), xp)
            m = _solve_tri("potrf", out, m, True, True, False, xp, check=False)
            return (_solve_tri("potrf", out, m, True, False, True, xp, check=False)
                    * a.dtype.type(0.5),)
        m = _t(_lower_to_upper(_t(xp.matmul(g, _t(out))), xp))
        m = _solve_tri("potrf", out, m, False, False, False, xp, check=False)
        return (_solve_tri("potrf", out, m, False, True, True, xp, check=False)
                * a.dtype.type(0.5),)
    return _result(out, A._ctx, (A,), vjp)


def potri(A, *, lower=True):
    """The inverse ``(L L^T)^-1`` of a matrix from its Cholesky factor ``L``, the lower triangle
    of A (or ``(U^T U)^-1`` from the upper triangle ``U`` when ``lower=False``); the other
    triangle of A is not read. Exactly symmetric. Raises ``LinalgError`` where the factor has a
    zero on its diagonal. Differentiable in the factor's triangle."""
    b = _data("potri", ("A", A))
    _square("potri", b)
    low = flag("potri", "lower", lower)
    xp = _xp_of(b)
    with A._ctx.device_scope():
        binv = _solve_tri("potri", b, _identity_like(b, xp), low, False, False, xp)
        out = xp.matmul(_t(binv), binv) if low else xp.matmul(binv, _t(binv))
        out = _lower_to_upper(out, xp)

    def vjp(g, needs):
        sym = g + _t(g)
        if low:     # -tril(A (G + G^T) B^-T)
            d = _solve_tri("potri", b, xp.matmul(out, sym), True, True, True, xp, check=False)
        else:       # -triu(B^-T (G + G^T) A)
            d = _solve_tri("potri", b, xp.matmul(sym, out), False, True, False, xp,
                           check=False)
        return (-_tri(d, low, xp),)
    return _result(out, A._ctx, (A,), vjp)


def sumlogdiag(A):
    """The sum of the natural logarithms of each square matrix's diagonal (nan where an entry
    is negative, as in MXNet): shape A.shape[:-2], (1,) for a single matrix. Differentiable."""
    a = _data("sumlogdiag", ("A", A))
    _square("sumlogdiag", a)
    xp = _xp_of(a)
    with A._ctx.device_scope():
        diag = xp.diagonal(a, axis1=-2, axis2=-1)
        with numpy.errstate(invalid="ignore", divide="ignore"):   # nan/-inf, as in MXNet
            out = xp.log(diag).sum(axis=-1)
        out = out.reshape(a.shape[:-2] if a.ndim > 2 else (1,))

    def vjp(g, needs):
        scale = g.reshape(a.shape[:-2] + (1,)) / diag
        return (_diag_matrix(scale, 0, xp),)
    return _result(out, A._ctx, (A,), vjp)


# ----------------------------------------------------------------------------- factorizations
def gelqf(A):
    """The LQ factorization of each matrix (x, y), x <= y, of full rank: ``Q`` (x, y) with
    orthonormal rows and lower triangular ``L`` (x, x), ``A = L Q`` (LAPACK's Householder
    signs: L's diagonal may be negative). Returns ``[Q, L]``. Differentiable in both."""
    a = _data("gelqf", ("A", A))
    if a.ndim < 2 or a.shape[-2] > a.shape[-1]:
        raise ShapeError("gelqf: A must be a matrix or batch of matrices (..., x, y) with x <= y, "
                         "got shape %s" % (a.shape,))
    xp = _xp_of(a)
    with A._ctx.device_scope():
        # MXNet's row-major gelqf is LAPACK's geqrf of the transpose, as this QR is.
        q, r = _qr(_t(a), xp)
        q_out, l_out = xp.ascontiguousarray(_t(q)), xp.ascontiguousarray(_t(r))

    def back(dq, dl):
        # L^-T (dQ + sym(L^T dL - dQ Q^T) Q), sym mirroring the lower triangle.
        if dq is None:
            dq = xp.zeros_like(q_out)
        m = -xp.matmul(dq, _t(q_out))
        if dl is not None:
            m = m + xp.matmul(_t(l_out), dl)
        d = dq + xp.matmul(_lower_to_upper(m, xp), q_out)
        return (_solve_tri("gelqf", l_out, d, True, True, False, xp),)
    return [_result(q_out, A._ctx, (A,), lambda g, needs: back(g, None)),
            _result(l_out, A._ctx, (A,), lambda g, needs: back(None, g))]


def _qr(a, xp):
    """Reduced QR of each matrix of ``a`` (NumPy and CuPy: stacked matrices)."""
    if a.ndim == 2 or xp is numpy:
        return xp.linalg.qr(a)
    flat = a.reshape((-1,) + a.shape[-2:])
    parts = [xp.linalg.qr(flat[i]) for i in range(flat.shape[0])]
    q = xp.stack([p[0] for p in parts]) if parts else xp.zeros(flat.shape, a.dtype)
    r = xp.stack([p[1] for p in parts]) if parts else \
        xp.zeros((0, a.shape[-1], a.shape[-1]), a.dtype)
    return q.reshape(a.shape), r.reshape(a.shape[:-2] + r.shape[-2:])


_SYEVD_EPS = {numpy.dtype(numpy.float32): 1e-30, numpy.dtype(numpy.float64): 1e-100}


def syevd(A):
    """The eigendecomposition of each symmetric matrix (only its lower triangle is read):
    ``U`` whose rows are the eigenvectors, each signed so that its largest-magnitude entry (the
    first of ties) is positive, and the eigenvalues ``L`` in ascending order, ``A = U^T diag(L)
    U``. Returns ``[U, L]``. Differentiable in both (MXNet's gradient: eigenvalue gaps below
    1e-30 (float32) / 1e-100 (float64) are taken as that)."""
    a = _data("syevd", ("A", A))
    _square("syevd", a)
    xp = _xp_of(a)
    with A._ctx.device_scope():
        lam, vec = xp.linalg.eigh(_symmetric_from(a, True, xp))
        u = _t(vec)
        if u.size:
            big = xp.argmax(xp.abs(u), axis=-1)[..., None]
            flip = xp.take_along_axis(u, big, axis=-1) < 0
            u = xp.where(flip, -u, u)
        u = xp.ascontiguousarray(u)
    eps = _SYEVD_EPS[a.dtype]

    def back(du, dl):
        n = a.shape[-1]
        y = xp.zeros(a.shape, dtype=a.dtype)
        if du is not None:
            x = xp.matmul(du, _t(u))
            gap = lam[..., :, None] - lam[..., None, :]          # L_i - L_j
            gap = xp.where(gap < eps, a.dtype.type(eps), gap) * a.dtype.type(2)
            y = _tril((x - _t(x)) / gap, xp, -1)
            y = y + _t(y)
        if dl is not None:
            idx = xp.arange(n)
            y[..., idx, idx] = dl
        return (xp.matmul(xp.matmul(_t(u), y), u),)
    return [_result(u, A._ctx, (A,), lambda g, needs: back(g, None)),
            _result(lam, A._ctx, (A,), lambda g, needs: back(None, g))]


def inverse(A):
    """The inverse of each square matrix. Raises ``LinalgError`` where one is singular.
    Differentiable (``-B^T G B^T``, B the inverse)."""
    a = _data("inverse", ("A", A))
    _square("inverse", a)
    xp = _xp_of(a)
    with A._ctx.device_scope():
        try:
            with _lapack_raises(xp):
                out = xp.linalg.inv(a)
        except numpy.linalg.LinAlgError:
            out = None
        if out is None or (xp is not numpy and not xp.isfinite(out).all().item()
                           and xp.isfinite(a).all().item()):
            raise LinalgError("inverse: a matrix is singular")

    def vjp(g, needs):
        return (-xp.matmul(xp.matmul(_t(out), g), _t(out)),)
    return _result(out, A._ctx, (A,), vjp)


def _det_parts(name, A):
    a = _data(name, ("A", A))
    _square(name, a)
    xp = _xp_of(a)
    with A._ctx.device_scope():
        sign, logabs = xp.linalg.slogdet(a)
        shape = a.shape[:-2] if a.ndim > 2 else (1,)
        sign = xp.asarray(sign, dtype=a.dtype).reshape(shape)
        logabs = xp.asarray(logabs, dtype=a.dtype).reshape(shape)
    return a, xp, sign, logabs


def _inverse_t_where(a, singular, xp):
    """The transposed inverses of ``a``, zero where ``singular`` (the batch's flags)."""
    mask = singular.reshape(a.shape[:-2] + (1, 1))
    safe = xp.where(mask, _identity_like(a, xp), a)
    return xp.where(mask, a.dtype.type(0), _t(xp.linalg.inv(safe)))


def det(A):
    """The determinant of each square matrix: shape A.shape[:-2], (1,) for one matrix;
    computed as MXNet does, ``sign * exp(log|det|)`` from the LU factorization. Its gradient
    ``G det A^-T`` is zero where the determinant is zero (MXNet's rule)."""
    a, xp, sign, logabs = _det_parts("det", A)
    out = sign * xp.exp(logabs)

    def vjp(g, needs):
        inv_t = _inverse_t_where(a, out == 0, xp)
        return ((g * out).reshape(a.shape[:-2] + (1, 1)) * inv_t,)
    return _result(out, A._ctx, (A,), vjp)


def slogdet(A):
    """The sign and the natural logarithm of the absolute value of each square matrix's
    determinant (sign 0 and -inf for a singular one). Returns ``[sign, logabsdet]``, each of
    shape A.shape[:-2] ((1,) for one matrix). Only ``logabsdet`` has a gradient, ``G A^-T``,
    zero for singular matrices (MXNet's rule)."""
    a, xp, sign, logabs = _det_parts("slogdet", A)

    def vjp(g, needs):
        inv_t = _inverse_t_where(a, logabs == -numpy.inf, xp)
        return (g.reshape(a.shape[:-2] + (1, 1)) * inv_t,)
    return [_result(sign, A._ctx, (A,), lambda g, needs: (xp.zeros_like(a),)),
            _result(logabs, A._ctx, (A,), vjp)]


# ----------------------------------------------------------------------------- reshuffles
def _diag_index(n, offset, xp):
    """Rows and columns of the ``offset`` diagonal of an n x n matrix."""
    k = numpy.arange(n - abs(offset))
    rows, cols = k - min(offset, 0), k + max(offset, 0)
    return xp.asarray(rows), xp.asarray(cols)


def _diag_matrix(d, offset, xp):
    """Matrices (..., n + |offset|, n + |offset|) with ``d`` (..., n) on diagonal ``offset``."""
    n = d.shape[-1] + abs(offset)
    out = xp.zeros(d.shape[:-1] + (n, n), dtype=d.dtype)
    rows, cols = _diag_index(n, offset, xp)
    out[..., rows, cols] = d
    return out


def extractdiag(A, offset=0):
    """The diagonal ``offset`` (0 the main one, > 0 above, < 0 below) of each square matrix:
    shape A.shape[:-2] + (n - |offset|,). Differentiable."""
    a = _data("extractdiag", ("A", A))
    _square("extractdiag", a)
    k = _int(offset, "extractdiag", "offset")
    n = a.shape[-1]
    if n - abs(k) <= 0:
        raise ShapeError("extractdiag: offset %d is out of range for %dx%d matrices" % (k, n, n))
    xp = _xp_of(a)
    rows, cols = _diag_index(n, k, xp)
    with A._ctx.device_scope():
        out = a[..., rows, cols]
    return _result(out, A._ctx, (A,), lambda g, needs: (_diag_matrix(g, k, xp),))


def makediag(A, offset=0):
    """Square matrices with the last axis of A (length n) on their diagonal ``offset`` and
    zeros elsewhere: shape A.shape[:-1] + (n + |offset|, n + |offset|). Differentiable."""
    a = _data("makediag", ("A", A))
    if a.ndim < 1:
        raise ShapeError("makediag: A must have at least one axis, got a scalar")
    k = _int(offset, "makediag", "offset")
    xp = _xp_of(a)
    with A._ctx.device_scope():
        out = _diag_matrix(a, k, xp)
    rows, cols = _diag_index(a.shape[-1] + abs(k), k, xp)
    return _result(out, A._ctx, (A,), lambda g, needs: (g[..., rows, cols],))


def _trian_index(n, offset, lower, xp):
    """Rows and columns of the triangle MXNet's extracttrian reads, in its order: a lower
    triangle (``offset`` < 0, or 0 and ``lower``) row by row, starting |offset| rows down; an
    upper one (``offset`` > 0, or 0 and not ``lower``) column by column, as the transpose's
    lower triangle."""
    m = n - abs(offset)
    r, c = numpy.tril_indices(m)
    r = r + abs(offset)
    if offset > 0 or (offset == 0 and not lower):
        r, c = c, r
    return xp.asarray(r), xp.asarray(c)


def extracttrian(A, offset=0, lower=True):
    """The triangle of each square matrix on and below (``lower``) or above its diagonal
    ``offset`` (the sign of a nonzero offset decides the side), as a vector: a lower triangle
    row by row, an upper one column by column; shape A.shape[:-2] + (m (m + 1) / 2,), m = n -
    |offset|. Differentiable."""
    a = _data("extracttrian", ("A", A))
    _square("extracttrian", a)
    k = _int(offset, "extracttrian", "offset")
    low = flag("extracttrian", "lower", lower)
    n = a.shape[-1]
    if n - abs(k) <= 0:
        raise ShapeError("extracttrian: offset %d is out of range for %dx%d matrices"
                         % (k, n, n))
    xp = _xp_of(a)
    rows, cols = _trian_index(n, k, low, xp)
    with A._ctx.device_scope():
        out = a[..., rows, cols]

    def vjp(g, needs):
        grad = xp.zeros(a.shape, dtype=a.dtype)
        grad[..., rows, cols] = g
        return (grad,)
    return _result(out, A._ctx, (A,), vjp)


def maketrian(A, offset=0, lower=True):
    """The inverse of ``extracttrian``: square matrices (n + |offset|) with A's last axis
    (length n (n + 1) / 2) laid out as ``extracttrian`` reads it, zeros elsewhere.
    Differentiable."""
    a = _data("maketrian", ("A", A))
    if a.ndim < 1:
        raise ShapeError("maketrian: A must have at least one axis, got a scalar")
    k = _int(offset, "maketrian", "offset")
    low = flag("maketrian", "lower", lower)
    length = a.shape[-1]
    m = int(math.floor(0.5 + (math.sqrt(8 * length + 1) - 1.0) * 0.5))
    if m * (m + 1) // 2 != length:
        raise ShapeError("maketrian: the last axis of A must have a triangular length "
                         "m (m + 1) / 2, got %d" % length)
    n = m + abs(k)
    xp = _xp_of(a)
    rows, cols = _trian_index(n, k, low, xp)
    with A._ctx.device_scope():
        out = xp.zeros(a.shape[:-1] + (n, n), dtype=a.dtype)
        out[..., rows, cols] = a
    return _result(out, A._ctx, (A,), lambda g, needs: (g[..., rows, cols],))
