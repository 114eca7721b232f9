"""``CTCLoss``: MXNet's connectionist temporal classification operator (``ctc_loss``).

The rule is MXNet 1.9.1's (``src/operator/nn/ctc_loss-inl.h`` over warp-ctc's ``cpu_ctc.h``):
scores ``(T, N, C)`` get a log-softmax over C; the loss per sample is ``-log p(label | scores)``
from the forward (alpha) recursion in log space; the gradient with respect to the scores is
``softmax - sum over the label positions of alpha * beta / (p * y)``, computed with the loss
and scaled by the head gradient. The blank is class 0 (``blank_label='first'``, labels padded
with 0) or class C-1 (``'last'``, padded with -1); without ``use_label_lengths`` a label ends at
its first padding value. Beyond a sample's ``data_lengths`` the gradient is 0.

Where a label cannot fit its sequence (labels plus repeated neighbours more than the frames),
MXNet returns a loss of 0 and leaves that sample's gradient uninitialised memory; here the loss
is 0 and the gradient 0 (docs/compat.md). The arithmetic runs in float64 over the whole batch at
once (one step per frame), the results in the scores' dtype.
"""
from __future__ import annotations

import numpy

from .ndarray import NDArray, _recorded, _recording_for, _wrap, _xp_of

__all__ = ["CTCLoss", "ctc_loss"]

_BLANKS = ("first", "last")


def _lengths(arr, batch, what):
    values = numpy.asarray(arr.asnumpy() if isinstance(arr, NDArray) else arr)
    if values.shape != (batch,):
        raise ValueError("CTCLoss: %s must have shape (%d,), got %s" % (what, batch, values.shape))
    return values.astype(numpy.int64)


def _labels(label, label_lengths, padding):
    """Per sample, the list of its label indices."""
    rows = label.astype(numpy.int64)
    if label_lengths is not None:
        return [rows[n, :max(int(k), 0)] for n, k in enumerate(label_lengths)]
    out = []
    for row in rows:
        stop = numpy.flatnonzero(row == padding)
        out.append(row[:stop[0]] if stop.size else row)
    return out


def _log_add(*terms):
    total = terms[0]
    for t in terms[1:]:
        total = numpy.logaddexp(total, t)
    return total


def _ctc(scores, labels, data_lengths, blank):
    """``(loss (N,), gradient (T, N, C))`` in float64 for scores ``(T, N, C)``."""
    T, N, C = scores.shape
    shifted = scores - scores.max(axis=2, keepdims=True)
    logp = shifted - numpy.log(numpy.exp(shifted).sum(axis=2, keepdims=True))
    lengths = numpy.array([len(lab) for lab in labels], numpy.int64)
    S = 2 * int(lengths.max(initial=0)) + 1
    ext = numpy.full((N, S), blank, numpy.int64)
    for n, lab in enumerate(labels):
        ext[n, 1:2 * len(lab):2] = lab
    s_len = 2 * lengths + 1
    pos = numpy.arange(S)
    valid = pos[None, :] < s_len[:, None]
    # A label position may be reached from two back (and reach two ahead) unless the label
    # repeats: the blank between two equal labels cannot be skipped.
    skip = numpy.zeros((N, S), bool)
    skip[:, 2:] = (pos[None, 2:] % 2 == 1) & (ext[:, 2:] != ext[:, :-2])
    repeats = numpy.array([int((lab[1:] == lab[:-1]).sum()) for lab in labels], numpy.int64)
    feasible = lengths + repeats <= data_lengths
    feasible &= data_lengths > 0

    rows = numpy.arange(N)[:, None]
    emit = logp[:, rows, ext]                                      # (T, N, S)
    neg = -numpy.inf
    alpha = numpy.full((T, N, S), neg)
    alpha[0, :, 0] = emit[0, :, 0]
    alpha[0, :, 1:2] = numpy.where(s_len[:, None] > 1, emit[0, :, 1:2], neg)
    alpha[0][~valid] = neg
    for t in range(1, T):
        prev = alpha[t - 1]
        one = numpy.concatenate([numpy.full((N, 1), neg), prev[:, :-1]], axis=1)
        two = numpy.concatenate([numpy.full((N, 2), neg), prev[:, :-2]], axis=1)
        total = _log_add(prev, one, numpy.where(skip, two, neg)) + emit[t]
        alpha[t] = numpy.where(valid, total, neg)
    last = numpy.clip(data_lengths - 1, 0, T - 1)
    end = alpha[last, numpy.arange(N)]                             # (N, S)
    tail = numpy.take_along_axis(end, (s_len - 1)[:, None], axis=1)[:, 0]
    before = numpy.take_along_axis(end, numpy.maximum(s_len - 2, 0)[:, None], axis=1)[:, 0]
    loglike = numpy.where(s_len > 1, numpy.logaddexp(tail, before), tail)

    # beta includes the frame's own emission (warp-ctc's convention), so alpha * beta counts it
    # twice and the gradient divides it out once.
    skip_ahead = numpy.zeros((N, S), bool)
    skip_ahead[:, :-2] = skip[:, 2:]
    starts = numpy.zeros((N, S), bool)
    starts[rows[:, 0], s_len - 1] = True
    starts[rows[:, 0], numpy.maximum(s_len - 2, 0)] = True
    beta = numpy.full((T, N, S), neg)
    for t in range(T - 1, -1, -1):
        if t + 1 < T:
            nxt = beta[t + 1]
            one = numpy.concatenate([nxt[:, 1:], numpy.full((N, 1), neg)], axis=1)
            two = numpy.concatenate([nxt[:, 2:], numpy.full((N, 2), neg)], axis=1)
            total = _log_add(nxt, one, numpy.where(skip_ahead, two, neg)) + emit[t]
        else:
            total = numpy.full((N, S), neg)
        first = (t == last)[:, None] & starts
        total = numpy.where(first, emit[t], total)
        beta[t] = numpy.where(valid, total, neg)

    with numpy.errstate(invalid="ignore", over="ignore"):
        occupancy = numpy.exp(alpha + beta - emit - loglike[None, :, None])    # (T, N, S)
    occupancy = numpy.nan_to_num(occupancy, nan=0.0, posinf=0.0)
    grad = numpy.exp(logp)
    numpy.add.at(grad, (slice(None), rows, ext), -numpy.where(valid, occupancy, 0.0))
    frames = numpy.arange(T)[:, None] < data_lengths[None, :]
    grad *= (frames & feasible[None, :])[:, :, None]
    loss = numpy.where(feasible, -loglike, 0.0)
    return loss, grad


def CTCLoss(data=None, label=None, data_lengths=None, label_lengths=None, use_data_lengths=False,
            use_label_lengths=False, blank_label="first"):
    """MXNet's ``nd.CTCLoss``: ``data`` (T, N, C) unnormalised scores, ``label`` (N, L).

    As in MXNet, the optional length arrays are taken in order from the inputs after ``label``:
    ``data_lengths`` first when ``use_data_lengths``, then ``label_lengths``."""
    if blank_label not in _BLANKS:
        raise ValueError("CTCLoss: blank_label must be 'first' or 'last', got %r" % (blank_label,))
    extra = [a for a in (data_lengths, label_lengths) if a is not None]
    if len(extra) != int(bool(use_data_lengths)) + int(bool(use_label_lengths)):
        raise ValueError("CTCLoss: use_data_lengths=%s and use_label_lengths=%s need %d length "
                         "arrays, got %d" % (use_data_lengths, use_label_lengths,
                                             int(bool(use_data_lengths)) + int(bool(use_label_lengths)),
                                             len(extra)))
    dlen_arr = extra.pop(0) if use_data_lengths else None
    llen_arr = extra.pop(0) if use_label_lengths else None
    if data.ndim != 3:
        raise ValueError("CTCLoss: the data array must have 3 dimensions (T, N, C), got shape %s"
                         % (data.shape,))
    if label.ndim != 2:
        raise ValueError("CTCLoss: the label array must have 2 dimensions (N, L), got shape %s"
                         % (label.shape,))
    T, N, C = data.shape
    if label.shape[0] != N:
        raise ValueError("CTCLoss: the batch size of labels (%d) and data (%d) must be the same"
                         % (label.shape[0], N))
    if label.shape[1] > T:
        raise ValueError("CTCLoss: the max number of labels (%d) cannot exceed the sequence "
                         "length of the data (%d)" % (label.shape[1], T))
    data_len = (_lengths(dlen_arr, N, "data_lengths") if dlen_arr is not None
                else numpy.full(N, T, numpy.int64))
    if (data_len > T).any() or (data_len < 0).any():
        raise ValueError("CTCLoss: data_lengths must lie in [0, %d], got %s" % (T, data_len.tolist()))
    label_len = _lengths(llen_arr, N, "label_lengths") if llen_arr is not None else None
    if label_len is not None and ((label_len > label.shape[1]).any() or (label_len < 0).any()):
        raise ValueError("CTCLoss: label_lengths must lie in [0, %d], got %s"
                         % (label.shape[1], label_len.tolist()))
    blank = 0 if blank_label == "first" else C - 1
    labels = _labels(label.asnumpy(), label_len, 0 if blank_label == "first" else -1)
    for lab in labels:
        if lab.size and (lab.min() < 0 or lab.max() >= C or (lab == blank).any()):
            raise ValueError("CTCLoss: labels must be classes in [0, %d) other than the blank "
                             "(%d), got %s" % (C, blank, lab.tolist()))
    raw = data._data
    xp = _xp_of(raw)
    scores = raw.get() if xp is not numpy else raw
    loss, grad = _ctc(scores.astype(numpy.float64), labels, data_len, blank)
    loss = xp.asarray(loss.astype(raw.dtype))
    if not _recording_for(data):
        return _wrap(loss, data._ctx)
    grad = xp.asarray(grad.astype(raw.dtype))

    def vjp(g, needs):
        return (g[None, :, None] * grad,) + (None,) * (len(inputs) - 1)
    inputs = (data, label) + tuple(a for a in (dlen_arr, llen_arr) if isinstance(a, NDArray))
    return _recorded(loss, data._ctx, inputs, vjp)


ctc_loss = CTCLoss
