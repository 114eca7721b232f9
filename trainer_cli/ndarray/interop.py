"""The public seam between ``NDArray`` and the layers above it (Gluon, the kvstores, the Trainer,
the runner): everything those layers need from an array beyond MXNet's own API, under names that
say what they hold, so that no code outside ``ndarray/`` reads an array's private fields.

- ``raw(x)``: the backend array (``numpy.ndarray`` or ``cupy.ndarray``) that ``x`` wraps (a
  row_sparse or csr array: its stored values); writing into it (``raw(x)[...] = v``) changes ``x`` in place, outside autograd's view.
- ``wrap(data, ctx)``: a new ``NDArray`` around a backend array, no copy, not recorded.
- ``transfer(data, ctx, copy=False)``: a backend array moved to ``ctx``'s device (copied across
  devices, and when ``copy``).
- ``array_module(x)``: ``numpy`` or ``cupy``, whichever holds ``x``.
- The gradient buffer of a variable: ``grad_buffer(x)`` (the ``NDArray`` that ``backward``
  writes or adds into, None when ``x`` is not a variable), ``attach_grad_buffer(x, buffer,
  grad_req)`` (make ``x`` a variable with a caller-owned buffer, e.g. a slab view; ``"null"``
  detaches), ``grad_req(x)``.
- Freshness: ``backward`` marks a variable's gradient fresh; ``is_fresh(x)`` reads the mark and
  ``mark_stale(x)`` clears it (the Trainer does, once it has used the gradient), as MXNet's
  ``fresh_grad`` does.
- ``needs_grad(x)``: whether an op on ``x`` inside ``record()`` would be recorded.
- ``is_sparse(x)``: whether ``x`` is a row_sparse or csr array (``x.stype != 'default'``, for a
  hot path).
- ``row_ids(x)``: the backend array of a row_sparse ``x``'s stored row ids (``raw(x)`` holds
  their values), without the NDArray that ``x.indices`` wraps them in.

These are plain functions (one call, ~50 ns); code that calls them per parameter per step binds
them to a module-level name.
"""
from __future__ import annotations

from operator import attrgetter

from .ndarray import NDArray, _needs_grad, _transfer, _wrap, _xp_of, unbroadcast

__all__ = ["raw", "wrap", "transfer", "array_module", "grad_buffer", "attach_grad_buffer",
           "grad_req", "is_fresh", "mark_stale", "needs_grad", "unbroadcast", "is_sparse", "row_ids"]



def raw(x: NDArray):
    """The backend array ``x`` wraps: a dense array's values, a sparse array's *stored* values
    (``_data`` of a sparse array is its dense form, for the dense operators)."""
    return x._values if x._sparse else x._data


wrap = _wrap
transfer = _transfer
needs_grad = _needs_grad
grad_buffer = attrgetter("_grad")
grad_req = attrgetter("_grad_req")
is_fresh = attrgetter("_fresh_grad")
is_sparse = attrgetter("_sparse")
row_ids = attrgetter("_indices")


def array_module(x: NDArray):
    """``numpy`` or ``cupy``: the array module of ``x``'s backend array."""
    return _xp_of(x._values if x._sparse else x._data)


def attach_grad_buffer(x: NDArray, buffer: NDArray | None, grad_req: str) -> None:
    """Make ``x`` a variable whose gradient lands in ``buffer`` (``grad_req`` ``"write"`` or
    ``"add"``), or, with ``"null"``, no variable at all; either way ``x`` leaves any graph."""
    x._mark(buffer, grad_req)


def mark_stale(x: NDArray) -> None:
    """Clear ``x``'s fresh-gradient mark (set again by the next ``backward`` that reaches it)."""
    x._fresh_grad = False
