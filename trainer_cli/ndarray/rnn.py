"""MXNet's fused ``RNN`` operator: a stack of (bidirectional) RNN/LSTM/GRU layers in one op.

The layout of the flat ``parameters`` vector is MXNet's (what ``gluon.rnn``'s layers
concatenate): first every weight, layer by layer and, in each layer, direction by direction,
``i2h`` (``(G*H, input)``), ``h2h`` (``(G*H, state)``) and, for an LSTM with a projection,
``h2r`` (``(P, H)``); then every bias in the same order, ``i2h`` then ``h2h`` (``(G*H,)`` each).
Gates are stacked in MXNet's (cuDNN's) order: ``i, f, c, o`` for the LSTM, ``r, z, n`` for the
GRU, whose new gate applies the reset gate after the recurrent product:
``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``.

One recorded node covers the whole stack. The forward projects the inputs of every time step in
one GEMM per layer and direction, then runs one recurrent GEMM per step with the gate math
vectorised over the batch (for float32 NumPy arrays: the GEMM into one buffer, on one BLAS
thread, and the gate math in one numba loop of ``_rnn_kernels``, which gives its NumPy body's
bits); the backward goes through time the same way and forms the weight
gradients of the input projection with one GEMM per layer and direction. The three outputs
(sequence, final hidden state, final cell state) are views into one buffer whose gradient the
node receives whole.
"""
from __future__ import annotations

import numpy

from .. import autograd as _ag
from .. import random as _random
from . import _rnn_kernels
from .host_threads import one_blas_thread
from .ndarray import _recorded, _recording_for, _wrap, _xp_of
from .ops import _sigmoid_raw

__all__ = ["RNN"]

_GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


class _Shapes:
    """Sizes of a fused stack and where each layer's matrices sit in the flat vector."""

    def __init__(self, mode, input_size, hidden, layers, dirs, projection):
        self.mode, self.hidden, self.layers, self.dirs = mode, hidden, layers, dirs
        self.gates = _GATES[mode]
        self.projection = projection
        self.state = projection or hidden           # size of h, the recurrent/output state
        gh = self.gates * hidden
        weights, biases, offset = [], [], 0
        width = input_size
        for _layer in range(layers):
            for _d in range(dirs):
                entry = [(offset, (gh, width))]
                offset += gh * width
                entry.append((offset, (gh, self.state)))
                offset += gh * self.state
                if projection:
                    entry.append((offset, (projection, hidden)))
                    offset += projection * hidden
                weights.append(entry)
            width = self.state * dirs
        for _k in range(layers * dirs):
            biases.append(((offset, (gh,)), (offset + gh, (gh,))))
            offset += 2 * gh
        self.weights, self.biases, self.size = weights, biases, offset


def param_size(mode, input_size, state_size, num_layers, bidirectional=False,
               projection_size=None):
    """Length of the flat parameter vector ``RNN`` expects."""
    return _Shapes(mode, input_size, state_size, num_layers, 2 if bidirectional else 1,
                   projection_size).size


def _view(flat, entry):
    offset, shape = entry
    n = 1
    for s in shape:
        n *= s
    return flat[offset:offset + n].reshape(shape)


def _sigmoid(a):
    """The gates' sigmoid: for float32 the one ``_rnn_kernels`` computes (on any array module),
    so that every path gives its bits."""
    return _rnn_kernels.np_sigmoid(a) if a.dtype == numpy.float32 else _sigmoid_raw(a)


def _tanh(a):
    return _rnn_kernels.np_tanh(a) if a.dtype == numpy.float32 else _xp_of(a).tanh(a)


def _activation(mode, a):
    xp = _xp_of(a)
    if mode == "rnn_relu":
        return xp.where(a < 0, a.dtype.type(0), a)
    return _tanh(a)


# ----------------------------------------------------------------------------- forward
def _run_direction(mode, x2, steps, batch, w, b, h0, c0, reverse, keep):
    """One direction of one layer over the sequence. ``x2``: the inputs of every step,
    ``(T*N, input)``. Returns ``(y (T, N, state), h_T, c_T, saved)``; ``saved`` holds what the
    backward needs when ``keep``."""
    if _rnn_kernels.usable(x2, *w, *b, h0, *([] if c0 is None else [c0])):
        return _run_direction_f32(mode, x2, steps, batch, w, b, h0, c0, reverse, keep)
    xp = _xp_of(x2)
    wx, wh = w[0], w[1]
    wr = w[2] if len(w) > 2 else None
    bx, bh = b
    hidden = wh.shape[0] // _GATES[mode]
    gx = (x2 @ wx.T).reshape(steps, batch, -1)      # every step's input projection at once
    gx += bx
    y = xp.empty((steps, batch, h0.shape[1]), dtype=x2.dtype)
    h, c = h0, c0
    # The gates' activations: every step's when the backward needs them, else one step's.
    gated = mode in ("lstm", "gru")
    acts = xp.empty((steps if keep else 1,) + gx.shape[1:], dtype=x2.dtype) if gated else None
    cells = xp.empty((steps, batch, hidden), dtype=x2.dtype) if keep and mode == "lstm" else None
    extra = xp.empty((steps, batch, hidden), dtype=x2.dtype) if keep and (
        mode == "gru" or wr is not None) else None
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    for t in order:
        gh = h @ wh.T
        gh += bh
        act = acts[t if keep else 0] if gated else None
        if mode == "lstm":
            gh += gx[t]
            act[...] = _sigmoid(gh)
            act[:, 2 * hidden:3 * hidden] = _tanh(gh[:, 2 * hidden:3 * hidden])
            i, f, g, o = (act[:, k * hidden:(k + 1) * hidden] for k in range(4))
            c = f * c + i * g
            m = o * _tanh(c)
            if keep:
                cells[t] = c
                if wr is not None:
                    extra[t] = m
            h = m if wr is None else m @ wr.T
        elif mode == "gru":
            ghn = gh[:, 2 * hidden:]
            act[:, :2 * hidden] = _sigmoid(gx[t, :, :2 * hidden] + gh[:, :2 * hidden])
            r, z = act[:, :hidden], act[:, hidden:2 * hidden]
            n = act[:, 2 * hidden:]
            n[...] = _tanh(gx[t, :, 2 * hidden:] + r * ghn)
            h = (1 - z) * n + z * h
            if keep:
                extra[t] = ghn
        else:
            gh += gx[t]
            h = _activation(mode, gh)
        y[t] = h
    saved = (acts, cells, extra) if keep else None
    return y, h, c, saved


def _run_direction_f32(mode, x2, steps, batch, w, b, h0, c0, reverse, keep):
    """``_run_direction`` for float32 NumPy arrays: each step's recurrent GEMM into one buffer
    and its gate math in one call of ``_rnn_kernels`` (numba, or its NumPy body: the same
    bits), writing straight into the output and the arrays the backward keeps."""
    wx, wh = w[0], w[1]
    wr = w[2] if len(w) > 2 else None
    bx, bh = b[0], numpy.ascontiguousarray(b[1])
    hidden = wh.shape[0] // _GATES[mode]
    f32 = numpy.float32
    gx = numpy.dot(x2, wx.T).reshape(steps, batch, -1)     # every step's input projection
    gx += bx
    y = numpy.empty((steps, batch, h0.shape[1]), dtype=f32)
    gh = numpy.empty((batch, wh.shape[0]), dtype=f32)
    h = numpy.ascontiguousarray(h0)
    gated = mode in ("lstm", "gru")
    acts = numpy.empty((steps if keep else 1, batch, wh.shape[0]), dtype=f32) if gated else None
    lstm = mode == "lstm"
    # The cell states: every step's when the backward needs them, else two that take turns.
    cells = numpy.empty((steps if keep else 2, batch, hidden), dtype=f32) if lstm else None
    # The GRU's recurrent new-gate product, or the LSTM's output before its projection.
    extra = None
    if mode == "gru" or wr is not None:
        extra = numpy.empty((steps if keep else 1, batch, hidden), dtype=f32)
    c = numpy.ascontiguousarray(c0) if lstm else None
    relu = mode == "rnn_relu"
    with one_blas_thread():
        for k, t in enumerate(range(steps - 1, -1, -1) if reverse else range(steps)):
            numpy.dot(h, wh.T, out=gh)
            if lstm:
                c_out = cells[t if keep else k % 2]
                m = y[t] if wr is None else extra[t if keep else 0]
                _rnn_kernels.lstm_forward(gx[t], gh, bh, c, acts[t if keep else 0], c_out, m)
                c = c_out
                if wr is not None:
                    numpy.dot(m, wr.T, out=y[t])
            elif mode == "gru":
                _rnn_kernels.gru_forward(gx[t], gh, bh, h, acts[t if keep else 0],
                                         extra[t if keep else 0], y[t])
            else:
                _rnn_kernels.rnn_forward(gx[t], gh, bh, y[t], relu)
            h = y[t]
    saved = (acts, cells, extra) if keep else None
    return y, h, c, saved


def _forward(mode, x, flat, hx, cx, shapes, p, training, ctx, keep):
    """The whole stack. Returns ``(y, hy, cy, tape)``; ``tape`` is None unless ``keep``."""
    xp = _xp_of(x)
    steps, batch = x.shape[0], x.shape[1]
    dirs = shapes.dirs
    hy = xp.empty(hx.shape, dtype=x.dtype)
    cy = xp.empty(cx.shape, dtype=x.dtype) if cx is not None else None
    tape = []
    layer_in = x
    for layer in range(shapes.layers):
        mask = None
        if layer and p > 0 and training:
            mask = _dropout_mask(xp, layer_in.shape, layer_in.dtype, p, ctx)
            layer_in = layer_in * mask
        x2 = layer_in.reshape(steps * batch, -1)
        outs, saved = [], []
        for d in range(dirs):
            k = layer * dirs + d
            w = [_view(flat, e) for e in shapes.weights[k]]
            b = [_view(flat, e) for e in shapes.biases[k]]
            c0 = cx[k] if cx is not None else None
            y, h, c, s = _run_direction(mode, x2, steps, batch, w, b, hx[k], c0, d == 1, keep)
            hy[k] = h
            if cy is not None:
                cy[k] = c
            outs.append(y)
            saved.append(s)
        if keep:
            tape.append((layer_in, mask, outs, saved))
        layer_in = outs[0] if dirs == 1 else xp.concatenate(outs, axis=2)
    return layer_in, hy, cy, (tape if keep else None)


def _dropout_mask(xp, shape, dtype, p, ctx):
    """Inverted dropout's mask, drawn as ``nd.Dropout`` draws its own (see docs/compat.md:
    MXNet's fused operator draws from another stream, so the masks differ)."""
    if p >= 1:
        return xp.zeros(shape, dtype=dtype)
    gen = _random.generator(ctx)
    with ctx.device_scope():
        u = gen.random_sample(shape, dtype=dtype) if ctx.is_gpu else gen.random(shape, dtype=dtype)
    return (u <= 1 - p).astype(dtype) * dtype.type(1 / (1 - p))


# ----------------------------------------------------------------------------- backward
def _back_direction(mode, x2, steps, batch, w, h0, c0, y, saved, dy, dh, dc, reverse,
                    gw, gb, need_dx=True):
    """Back through time for one direction: adds the weight and bias gradients into ``gw``
    and ``gb`` (views of the flat gradient), returns ``(dx2, dh0, dc0)``."""
    if _rnn_kernels.usable(x2, *w, y, h0, dy, dh, *([] if c0 is None else [c0, dc])):
        return _back_direction_f32(mode, x2, steps, batch, w, h0, c0, y, saved, dy, dh, dc,
                                   reverse, gw, gb, need_dx)
    xp = _xp_of(x2)
    wx, wh = w[0], w[1]
    wr = w[2] if len(w) > 2 else None
    acts, cells, extra = saved
    hidden = wh.shape[0] // _GATES[mode]
    dgx = xp.empty((steps, batch, wh.shape[0]), dtype=x2.dtype)
    # The recurrent product's gradient: the gates' own but for the GRU's new gate.
    dgh_all = xp.empty_like(dgx) if mode == "gru" else dgx
    dr_all = xp.empty(y.shape, dtype=y.dtype) if wr is not None else None
    order = range(steps) if reverse else range(steps - 1, -1, -1)
    first = steps - 1 if reverse else 0        # the step that read h0
    for t in order:
        dh = dy[t] + dh
        if mode == "lstm":
            i = acts[t, :, :hidden]
            f = acts[t, :, hidden:2 * hidden]
            g = acts[t, :, 2 * hidden:3 * hidden]
            o = acts[t, :, 3 * hidden:]
            c = cells[t]
            c_prev = c0 if t == first else cells[t + 1 if reverse else t - 1]
            if wr is not None:
                dr_all[t] = dh
                dm = dh @ wr
            else:
                dm = dh
            tc = _tanh(c)
            dc = dc + dm * o * (1 - tc * tc)
            da = dgx[t]
            da[:, :hidden] = dc * g * i * (1 - i)
            da[:, hidden:2 * hidden] = dc * c_prev * f * (1 - f)
            da[:, 2 * hidden:3 * hidden] = dc * i * (1 - g * g)
            da[:, 3 * hidden:] = dm * tc * o * (1 - o)
            dc = dc * f
            dgh = da
        elif mode == "gru":
            h_prev = h0 if t == first else y[t + 1 if reverse else t - 1]
            r = acts[t, :, :hidden]
            z = acts[t, :, hidden:2 * hidden]
            n = acts[t, :, 2 * hidden:]
            ghn = extra[t]
            dn = dh * (1 - z) * (1 - n * n)
            da = dgx[t]
            da[:, :hidden] = dn * ghn * r * (1 - r)
            da[:, hidden:2 * hidden] = dh * (h_prev - n) * z * (1 - z)
            da[:, 2 * hidden:] = dn
            dgh = dgh_all[t]
            dgh[:, :2 * hidden] = da[:, :2 * hidden]
            dgh[:, 2 * hidden:] = dn * r
            dh = dh * z
        else:
            if mode == "rnn_relu":
                da = dh * (y[t] > 0)
            else:
                da = dh * (1 - y[t] * y[t])
            dgx[t] = da
            dgh = da
        dh_rec = dgh @ wh
        dh = dh_rec if mode != "gru" else dh + dh_rec
    dx2 = _weight_gradients(x2, steps, batch, w, h0, y, extra, dgx, dgh_all, dr_all, reverse,
                            gw, gb, need_dx)
    return dx2, dh, (dc if mode == "lstm" else None)


def _back_direction_f32(mode, x2, steps, batch, w, h0, c0, y, saved, dy, dh, dc, reverse,
                        gw, gb, need_dx):
    """``_back_direction`` for float32 NumPy arrays: per step one call of ``_rnn_kernels``
    for the gate math and one recurrent GEMM into a buffer."""
    wh = w[1]
    wr = w[2] if len(w) > 2 else None
    acts, cells, extra = saved
    f32 = numpy.float32
    dgx = numpy.empty((steps, batch, wh.shape[0]), dtype=f32)
    dgh_all = numpy.empty_like(dgx) if mode == "gru" else dgx
    dr_all = numpy.empty(y.shape, dtype=f32) if wr is not None else None
    carry = numpy.array(dh, dtype=f32)            # the gradient reaching h from later steps
    dh = numpy.empty_like(carry)
    lstm = mode == "lstm"
    if lstm:
        dc = numpy.array(dc, dtype=f32)           # updated in place, step by step
        dm = numpy.empty((batch, cells.shape[2]), dtype=f32) if wr is not None else dh
        c0 = numpy.ascontiguousarray(c0)
    if mode == "gru":
        dhz = numpy.empty_like(carry)
        rec = numpy.empty_like(carry)
        h0 = numpy.ascontiguousarray(h0)
    relu = mode == "rnn_relu"
    order = range(steps) if reverse else range(steps - 1, -1, -1)
    first = steps - 1 if reverse else 0        # the step that read h0
    with one_blas_thread():
        for t in order:
            before = t + 1 if reverse else t - 1   # the step that ran before t
            numpy.add(dy[t], carry, out=dh)
            if lstm:
                if wr is not None:
                    dr_all[t] = dh
                    numpy.dot(dh, wr, out=dm)
                c_prev = c0 if t == first else cells[before]
                _rnn_kernels.lstm_backward(dm, acts[t], cells[t], c_prev, dc, dgx[t], dc)
                numpy.dot(dgx[t], wh, out=carry)
            elif mode == "gru":
                h_prev = h0 if t == first else y[before]
                _rnn_kernels.gru_backward(dh, acts[t], extra[t], h_prev, dgx[t], dgh_all[t],
                                          dhz)
                numpy.dot(dgh_all[t], wh, out=rec)
                numpy.add(dhz, rec, out=carry)
            else:
                _rnn_kernels.rnn_backward(dh, y[t], dgx[t], relu)
                numpy.dot(dgx[t], wh, out=carry)
    dx2 = _weight_gradients(x2, steps, batch, w, h0, y, extra, dgx, dgh_all, dr_all, reverse,
                            gw, gb, need_dx)
    return dx2, carry, (dc if lstm else None)


def _weight_gradients(x2, steps, batch, w, h0, y, extra, dgx, dgh_all, dr_all, reverse, gw, gb,
                      need_dx):
    """Every step's weight and bias gradients at once (one GEMM each) from the gates' gradients
    of every step; returns the input's gradient ``(T*N, input)`` when ``need_dx``."""
    xp = _xp_of(x2)
    wx, wr = w[0], (w[2] if len(w) > 2 else None)
    # Every step's recurrent weights at once, against the state each step read.
    h_prev_all = xp.empty(y.shape, dtype=y.dtype)
    if reverse:
        h_prev_all[:-1] = y[1:]
        h_prev_all[-1] = h0
    else:
        h_prev_all[1:] = y[:-1]
        h_prev_all[0] = h0
    dgh2 = dgh_all.reshape(steps * batch, -1)
    gw[1] += dgh2.T @ h_prev_all.reshape(steps * batch, -1)
    bias_sum = dgh2.sum(axis=0)
    gb[1] += bias_sum
    if wr is not None:
        # The projection's weights likewise, against every step's unprojected output.
        gw[2] += dr_all.reshape(steps * batch, -1).T @ extra.reshape(steps * batch, -1)
    dgx2 = dgx.reshape(steps * batch, -1)
    gw[0] += dgx2.T @ x2                         # every step's input weights at once
    # The gates' gradients are the recurrent product's too, but for the GRU's new gate.
    gb[0] += bias_sum if dgh_all is dgx else dgx2.sum(axis=0)
    return dgx2 @ wx if need_dx else None


def _backward(mode, x, flat, hx, cx, shapes, tape, dy, dhy, dcy, need_x):
    """Gradients of the data, the flat parameters and the begin states."""
    xp = _xp_of(flat)
    steps, batch = x.shape[0], x.shape[1]
    dirs, state = shapes.dirs, shapes.state
    gflat = xp.zeros(flat.shape, dtype=flat.dtype)
    dhx = xp.empty(hx.shape, dtype=hx.dtype)
    dcx = xp.empty(cx.shape, dtype=cx.dtype) if cx is not None else None
    for layer in range(shapes.layers - 1, -1, -1):
        layer_in, mask, outs, saved = tape[layer]
        x2 = layer_in.reshape(steps * batch, -1)
        dx2 = None
        for d in range(dirs):
            k = layer * dirs + d
            w = [_view(flat, e) for e in shapes.weights[k]]
            gw = [_view(gflat, e) for e in shapes.weights[k]]
            gb = [_view(gflat, e) for e in shapes.biases[k]]
            dyd = dy[:, :, d * state:(d + 1) * state] if dirs == 2 else dy
            dc_last = dcy[k] if dcy is not None else None
            c0 = cx[k] if cx is not None else None
            part, dh0, dc0 = _back_direction(mode, x2, steps, batch, w, hx[k], c0, outs[d],
                                             saved[d], dyd, dhy[k], dc_last, d == 1, gw, gb,
                                             layer > 0 or need_x)
            dhx[k] = dh0
            if dcx is not None:
                dcx[k] = dc0
            dx2 = part if dx2 is None else dx2 + part
        if layer or need_x:
            dy = dx2.reshape(steps, batch, -1)
            if mask is not None:
                dy = dy * mask
    dx = dy if need_x else None
    return dx, gflat, dhx, dcx


# ----------------------------------------------------------------------------- the op
def RNN(data=None, parameters=None, state=None, state_cell=None, sequence_length=None,
        state_size=None, num_layers=None, bidirectional=False, mode=None, p=0.0,
        state_outputs=False, projection_size=None, lstm_state_clip_min=None,
        lstm_state_clip_max=None, lstm_state_clip_nan=False, use_sequence_length=False,
        **kwargs):
    """MXNet's fused recurrent operator over ``data`` of shape ``(T, N, input)``.

    ``state`` (and ``state_cell`` for an LSTM) have shape ``(num_layers * directions, N,
    state)``. Returns the output sequence ``(T, N, directions * state)``, and with
    ``state_outputs`` also the final hidden state (and cell state): a list, as MXNet returns.
    ``p`` is the dropout rate on the inputs of every layer but the first, in training mode.
    """
    if mode not in _GATES:
        raise ValueError("RNN: mode must be one of %s, got %r" % (sorted(_GATES), mode))
    if state_size is None or num_layers is None:
        raise ValueError("RNN: state_size and num_layers are required")
    if use_sequence_length or sequence_length is not None:
        raise NotImplementedError(
            "RNN: use_sequence_length is not supported (MXNet 1.9.1 has it on cuDNN only); "
            "see docs/compat.md")
    if lstm_state_clip_min is not None or lstm_state_clip_max is not None:
        raise NotImplementedError(
            "RNN: LSTM state clipping is not supported (MXNet 1.9.1 has it on cuDNN only); "
            "see docs/compat.md")
    if projection_size and mode != "lstm":
        raise ValueError("RNN: projection is only supported for LSTM")
    lstm = mode == "lstm"
    if lstm and state_cell is None:
        raise ValueError("RNN: mode 'lstm' needs state_cell")
    x, flat, hx = data._data, parameters._data, state._data
    if x.ndim != 3:
        raise ValueError("RNN: data must have shape (seq_len, batch, input_size), got %s"
                         % (x.shape,))
    dirs = 2 if bidirectional else 1
    shapes = _Shapes(mode, x.shape[2], int(state_size), int(num_layers), dirs,
                     int(projection_size) if projection_size else None)
    if flat.shape != (shapes.size,):
        raise ValueError("RNN: parameters must have shape (%d,) for %s, got %s"
                         % (shapes.size, mode, flat.shape))
    want = (shapes.layers * dirs, x.shape[1], shapes.state)
    if hx.shape != want:
        raise ValueError("RNN: state must have shape %s, got %s" % (want, hx.shape))
    cx = state_cell._data if lstm else None
    if lstm and cx.shape != want[:2] + (shapes.hidden,):
        raise ValueError("RNN: state_cell must have shape %s, got %s"
                         % (want[:2] + (shapes.hidden,), cx.shape))
    inputs = (data, parameters, state) + ((state_cell,) if lstm else ())
    recording = _recording_for(*inputs)
    ctx = data._ctx
    y, hy, cy, tape = _forward(mode, x, flat, hx, cx, shapes, float(p), _ag.is_training(),
                               ctx, recording)
    parts = [y, hy] + ([cy] if lstm else [])
    if not recording:
        outs = [_wrap(a, ctx) for a in parts]
    else:
        outs = _recorded_outputs(parts, ctx, inputs, lambda grads, needs: _vjp(
            mode, x, flat, hx, cx, shapes, tape, grads, needs))
    if not state_outputs:
        return outs[0]
    return outs


def _vjp(mode, x, flat, hx, cx, shapes, tape, grads, needs):
    dy, dhy = grads[0], grads[1]
    dcy = grads[2] if len(grads) > 2 else None
    dx, gflat, dhx, dcx = _backward(mode, x, flat, hx, cx, shapes, tape, dy, dhy, dcy,
                                    needs[0])
    out = (dx, gflat if needs[1] else None, dhx if needs[2] else None)
    if len(needs) > 3:
        out += (dcx if needs[3] else None,)
    return out


def _recorded_outputs(parts, ctx, inputs, vjp):
    """Several outputs of one recorded computation.

    The outputs are views into one flat buffer, recorded as one node (the "hub") whose
    gradient is that buffer's; each output is a node over the hub that places its gradient in
    its own stretch, so that the tape adds them up and the hub's ``vjp`` runs once with every
    output's gradient (zeros for an output nothing used)."""
    xp = _xp_of(parts[0])
    sizes = [a.size for a in parts]
    bounds = numpy.cumsum([0] + sizes).tolist()
    packed = xp.empty(bounds[-1], dtype=parts[0].dtype)
    views = []
    for a, lo, hi in zip(parts, bounds[:-1], bounds[1:]):
        view = packed[lo:hi].reshape(a.shape)
        view[...] = a
        views.append(view)

    def hub_vjp(g, needs):
        grads = [g[lo:hi].reshape(a.shape) for a, lo, hi in zip(parts, bounds[:-1], bounds[1:])]
        return vjp(grads, needs)
    hub = _recorded(packed, ctx, inputs, hub_vjp)

    def place(lo, hi):
        def out_vjp(g, needs):
            full = xp.zeros(bounds[-1], dtype=g.dtype)
            full[lo:hi] = g.reshape(-1)
            return (full,)
        return out_vjp
    return [_recorded(view, ctx, (hub,), place(lo, hi))
            for view, lo, hi in zip(views, bounds[:-1], bounds[1:])]
