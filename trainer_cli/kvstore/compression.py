"""Gradient compression with error feedback, bit for bit as MXNet's kvstore does it.

Two codecs, each a pair of pure functions over raw float32 arrays of either backend (numpy or cupy,
picked from the arrays themselves):

``2bit`` (MXNet 1.9, ``src/kvstore/gradient_compression-inl.h``)
    ``r += g``; ``r >= thr`` sends code ``11`` (decoded ``+thr``) and does ``r -= thr``;
    ``r <= -thr`` sends ``10`` (decoded ``-thr``) and does ``r += thr``; anything else sends ``00``
    and keeps ``r``. Sixteen values per float32 word: value ``i`` sits in word ``i // 16``, byte
    ``(i % 16) // 4`` in memory order, bits ``7-6, 5-4, 3-2, 1-0`` for ``i % 4 = 0..3``; padding is 0.
    Equivalently: byte ``i // 4`` of the payload's bytes, first value in the high bits.

``1bit`` (MXNet master/2.0 only, PR #17952; 1.9.1 rejects it)
    ``r += g``; ``r > thr`` sends bit 1 (decoded ``+1``) and does ``r -= 1``; otherwise bit 0
    (decoded ``-1``) and ``r += 1``. The decoded values are ±1, not ±thr. Thirty-two values per
    word: value ``i`` is bit ``0x80 >> (i % 8)`` of byte ``i // 8`` in memory order; padding is 0.

The payload is a float32 array only because MXNet ships it as one; its words are bit patterns
(some are NaNs), so move them as bytes and never do arithmetic on them.

Residual buffers belong to the caller (the KVStore keeps one per key and source position): the
quantizers update them in place and never allocate one.
"""
from __future__ import annotations

import functools
import math
import operator
import sys
from collections.abc import Mapping

import numpy

from ..context import array_module_of

__all__ = [
    "GradientCompression",
    "quantize_2bit",
    "dequantize_2bit",
    "quantize_1bit",
    "dequantize_1bit",
]

if sys.byteorder != "little":
    # The packers read eight bool bytes as one uint64 and rely on byte 0 being its low byte.
    raise ImportError("trainer_cli.kvstore.compression needs a little-endian machine")

TYPES = ("2bit", "1bit")
_PARAM_KEYS = ("type", "threshold")
_DEFAULT_THRESHOLD = 0.5  # MXNet's GradientCompressionParam default, for both types

# numpy works through the arrays this many values at a time so that the dozen temporaries of one
# step stay in cache; one pass per operation over a whole 10M-value gradient is ~2x slower.
# cupy takes the whole array in one go (a chunk loop would only add kernel launches).
_CPU_SPAN = 1 << 17

# Packing without a per-value loop: eight per-value bytes are read as one little-endian uint64
# and multiplied by a constant whose partial products land every input bit at its output bit
# with no two of them overlapping (checked exhaustively in the tests), so no carries occur.
# 2bit: 2**30 + 2**20 + 2**10 + 1 moves the codes c0..c3 of bytes 0..3 to bits 31-30, 29-28,
# 27-26, 25-24 (byte 3 of the product) and c4..c7 to byte 7. A code is 3*pos + 2*neg, so the
# two bool arrays are multiplied by 3x and 2x the constant and OR-ed (their bits are disjoint).
_SPREAD_2BIT = 0x40100401
_POS_2BIT = numpy.uint64(3 * _SPREAD_2BIT)
_NEG_2BIT = numpy.uint64(2 * _SPREAD_2BIT)
# 1bit: the bool in byte i goes to bit 63 - i, so byte 7 of the product is the MSB-first byte.
_GATHER_1BIT = numpy.uint64(0x8040201008040201)


# --------------------------------------------------------------------------------------------
# 2-bit


def quantize_2bit(grad, residual, threshold, out=None):
    """Quantize ``grad`` with error feedback into ``ceil(n/16)`` float32 words (MXNet 1.9 2bit).

    ``residual`` (float32, C-contiguous, same size as ``grad``) is updated in place. ``out`` may
    be a float32 array of ``ceil(n/16)`` words to write into; it is returned.
    """
    xp = array_module_of(grad)
    g, r = _flat_pair(xp, grad, residual)
    thr = _float32_threshold(threshold, positive=True)
    n = g.size
    packed = _packed_out(xp, out, _words(n, 16))
    if n == 0:
        return packed
    payload = packed.reshape(-1).view(xp.uint8)
    neg_thr = -thr
    span = _span(xp, n, 16)
    pos = xp.zeros(span, dtype=bool)
    neg = xp.zeros(span, dtype=bool)
    step = xp.empty(span, dtype=xp.int8)
    delta = xp.empty(span, dtype=xp.float32)
    hi = xp.empty(span // 8, dtype=xp.uint64)
    lo = xp.empty(span // 8, dtype=xp.uint64)
    for start in range(0, n, span):
        stop = min(start + span, n)
        m = stop - start
        padded = _round_up(m, 16)
        r_ = r[start:stop]
        xp.add(r_, g[start:stop], out=r_)
        p, q = pos[:m], neg[:m]
        xp.greater_equal(r_, thr, out=p)
        xp.less_equal(r_, neg_thr, out=q)
        # r - (+thr, -thr or 0) rounds exactly as MXNet's `r -= thr` / `r += thr` / no-op.
        xp.subtract(p.view(xp.int8), q.view(xp.int8), out=step[:m])
        d = delta[:m]
        d[...] = step[:m]
        xp.multiply(d, thr, out=d)
        xp.subtract(r_, d, out=r_)
        if padded != m:
            pos[m:padded] = False
            neg[m:padded] = False
        k = padded // 8
        xp.multiply(pos[:padded].view(xp.uint64), _POS_2BIT, out=hi[:k])
        xp.multiply(neg[:padded].view(xp.uint64), _NEG_2BIT, out=lo[:k])
        xp.bitwise_or(hi[:k], lo[:k], out=hi[:k])
        payload[start // 4:(start + padded) // 4] = hi[:k].view(xp.uint8)[3::4]
    return packed


def dequantize_2bit(packed, n, threshold, out=None):
    """Decode ``n`` values from a 2bit payload: ``11`` → +thr, ``10`` → -thr, else 0 (float32).

    ``out`` may be a C-contiguous float32 array of ``n`` values (any shape); it is returned.
    """
    thr = _float32_threshold(threshold, positive=True)
    return _decode(packed, n, out, 16, lambda xp: _device_table(xp, "2bit", _f32_bits(thr)))


# --------------------------------------------------------------------------------------------
# 1-bit


def quantize_1bit(grad, residual, threshold, out=None):
    """Quantize ``grad`` with error feedback into ``ceil(n/32)`` float32 words (MXNet master 1bit).

    ``residual`` is updated in place by ``-1`` or ``+1`` per value; ``threshold`` may be zero or
    negative. ``out`` may be a float32 array of ``ceil(n/32)`` words; it is returned.
    """
    xp = array_module_of(grad)
    g, r = _flat_pair(xp, grad, residual)
    thr = _float32_threshold(threshold, positive=False)
    n = g.size
    packed = _packed_out(xp, out, _words(n, 32))
    if n == 0:
        return packed
    payload = packed.reshape(-1).view(xp.uint8)
    one = numpy.int8(1)
    span = _span(xp, n, 32)
    pos = xp.zeros(span, dtype=bool)
    step = xp.empty(span, dtype=xp.int8)
    delta = xp.empty(span, dtype=xp.float32)
    word = xp.empty(span // 8, dtype=xp.uint64)
    for start in range(0, n, span):
        stop = min(start + span, n)
        m = stop - start
        padded = _round_up(m, 32)
        r_ = r[start:stop]
        xp.add(r_, g[start:stop], out=r_)
        p = pos[:m]
        xp.greater(r_, thr, out=p)
        # r - (+1 or -1) rounds exactly as MXNet's `r -= 1` / `r += 1`.
        s = step[:m]
        xp.add(p.view(xp.int8), p.view(xp.int8), out=s)
        xp.subtract(s, one, out=s)
        d = delta[:m]
        d[...] = s
        xp.subtract(r_, d, out=r_)
        if padded != m:
            pos[m:padded] = False
        k = padded // 8
        xp.multiply(pos[:padded].view(xp.uint64), _GATHER_1BIT, out=word[:k])
        payload[start // 8:(start + padded) // 8] = word[:k].view(xp.uint8)[7::8]
    return packed


def dequantize_1bit(packed, n, threshold=None, out=None):
    """Decode ``n`` values from a 1bit payload: bit 1 → +1.0, bit 0 → -1.0 (float32).

    ``threshold`` is accepted for symmetry with the 2bit codec and, as in MXNet, not used.
    """
    return _decode(packed, n, out, 32, lambda xp: _device_table(xp, "1bit", 0))


# --------------------------------------------------------------------------------------------
# Parameters


class GradientCompression:
    """A compression setting as given to ``kv.set_gradient_compression`` / ``compression_params``.

    ``GradientCompression({'type': '2bit', 'threshold': 0.5})``. Values may be strings, as MXNet
    passes them. ``type`` is required; ``threshold`` defaults to 0.5 (MXNet's default for both
    types) and must be > 0 for 2bit; 1bit takes any finite threshold, zero and negative included.
    The arithmetic uses ``float32(threshold)``, as MXNet stores it.
    """

    TYPES = TYPES

    __slots__ = ("_type", "_threshold", "_thr32")

    def __init__(self, params):
        if isinstance(params, GradientCompression):
            params = params.to_dict()
        if not isinstance(params, Mapping):
            raise TypeError(
                "gradient compression parameters must be a dict such as "
                f"{{'type': '2bit', 'threshold': 0.5}}, got {type(params).__name__}"
            )
        unknown = [key for key in params if key not in _PARAM_KEYS]
        if unknown:
            # MXNet ignores unknown keys; a misspelt 'threshold' would then silently be 0.5.
            raise ValueError(
                f"unknown gradient compression parameter(s) {', '.join(map(repr, unknown))}; "
                "expected 'type' and optionally 'threshold'"
            )
        if "type" not in params:
            raise ValueError("gradient compression needs a 'type': one of '2bit', '1bit'")
        kind = params["type"]
        kind = kind.decode() if isinstance(kind, bytes) else str(kind)
        if kind not in TYPES:
            raise ValueError(
                f"unknown gradient compression type {kind!r}; expected one of '2bit', '1bit'"
            )
        threshold = _parse_threshold(params.get("threshold", _DEFAULT_THRESHOLD))
        thr32 = numpy.float32(threshold)
        if kind == "2bit" and not thr32 > 0:
            raise ValueError(
                f"threshold must be greater than 0 for 2bit compression, got {threshold!r}"
            )
        self._type = kind
        self._threshold = threshold
        self._thr32 = thr32

    @property
    def type(self) -> str:
        return self._type

    @property
    def threshold(self) -> float:
        return self._threshold

    def compressed_size(self, n: int) -> int:
        """The number of float32 words of the payload for ``n`` values."""
        return _words(_count(n), 16 if self._type == "2bit" else 32)

    def quantize(self, grad, residual, out=None):
        """Compress ``grad``; ``residual`` (the caller's, float32, same size) is updated in place."""
        if self._type == "2bit":
            return quantize_2bit(grad, residual, self._thr32, out=out)
        return quantize_1bit(grad, residual, self._thr32, out=out)

    def dequantize(self, packed, n, out=None):
        """Decode ``n`` float32 values from ``packed``."""
        if self._type == "2bit":
            return dequantize_2bit(packed, n, self._thr32, out=out)
        return dequantize_1bit(packed, n, self._thr32, out=out)

    def to_dict(self) -> dict:
        return {"type": self._type, "threshold": self._threshold}

    def __eq__(self, other):
        if not isinstance(other, GradientCompression):
            return NotImplemented
        return self._type == other._type and self._thr32 == other._thr32

    def __hash__(self):
        return hash((self._type, float(self._thr32)))

    def __repr__(self):
        return f"GradientCompression({self.to_dict()!r})"


# --------------------------------------------------------------------------------------------
# Helpers


def _parse_threshold(value) -> float:
    if isinstance(value, bool):
        raise ValueError(f"gradient compression threshold must be a number, got {value!r}")
    try:
        threshold = float(value.decode() if isinstance(value, bytes) else value)
    except (TypeError, ValueError):
        raise ValueError(
            f"gradient compression threshold must be a number, got {value!r}"
        ) from None
    if not math.isfinite(threshold) or abs(threshold) > float(numpy.finfo(numpy.float32).max):
        raise ValueError(
            f"gradient compression threshold must be a finite float32, got {value!r}"
        )
    return threshold


def _float32_threshold(threshold, positive: bool):
    thr = numpy.float32(_parse_threshold(threshold))
    if positive and not thr > 0:
        # With thr <= 0 the +thr and -thr branches overlap and the codes stop meaning anything.
        raise ValueError(f"2bit threshold must be greater than 0, got {threshold!r}")
    return thr


def _f32_bits(thr) -> int:
    return int(numpy.float32(thr).view(numpy.uint32))


def _count(n) -> int:
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"the number of values must be an int, got {type(n).__name__}") from None
    if n < 0:
        raise ValueError(f"the number of values must be >= 0, got {n}")
    return n


def _words(n: int, per_word: int) -> int:
    return -(-n // per_word)


def _round_up(m: int, align: int) -> int:
    return -(-m // align) * align


def _span(xp, n: int, align: int) -> int:
    return _round_up(min(n, _CPU_SPAN) if xp is numpy else n, align)


def _flat_pair(xp, grad, residual):
    for name, arr in (("grad", grad), ("residual", residual)):
        if array_module_of(arr) is numpy and not isinstance(arr, numpy.ndarray):
            # array_module_of only knows cupy once trainer_cli has imported it for a GPU context.
            raise TypeError(f"{name} must be a numpy or cupy array, got {type(arr).__name__}")
    if array_module_of(residual) is not xp:
        raise TypeError("grad and residual must be on the same device (both numpy or both cupy)")
    for name, arr in (("grad", grad), ("residual", residual)):
        if arr.dtype != numpy.float32:
            raise TypeError(f"gradient compression works on float32 arrays; {name} is {arr.dtype}")
    if grad.size != residual.size:
        raise ValueError(
            f"grad has {grad.size} values but residual has {residual.size}; they must match"
        )
    if not residual.flags.c_contiguous:
        raise ValueError("residual must be C-contiguous: it is updated in place")
    return grad.reshape(-1), residual.reshape(-1)


def _packed_out(xp, out, words: int):
    if out is None:
        return xp.empty(words, dtype=xp.float32)
    _check_buffer(xp, out, words, "out")
    return out


def _check_buffer(xp, arr, size: int, name: str):
    if array_module_of(arr) is not xp or (xp is numpy and not isinstance(arr, numpy.ndarray)):
        raise TypeError(f"{name} must be on the same device as the other arrays")
    if arr.dtype != numpy.float32:
        raise TypeError(f"{name} must be float32, got {arr.dtype}")
    if arr.size != size:
        raise ValueError(f"{name} must hold {size} float32 values, got {arr.size}")
    if not arr.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")


def _decode(packed, n, out, per_word: int, table_for):
    xp = array_module_of(packed)
    n = _count(n)
    _check_buffer(xp, packed, _words(n, per_word), "packed")
    if out is None:
        out = xp.empty(n, dtype=xp.float32)
    else:
        _check_buffer(xp, out, n, "out")
    if n == 0:
        return out
    per_byte = per_word // 4
    table = table_for(xp)
    payload = packed.reshape(-1).view(xp.uint8)
    flat = out.reshape(-1)
    full, rest = divmod(n, per_byte)
    if full:
        # One row of the 256-entry table per payload byte: 4 (2bit) or 8 (1bit) decoded values.
        _take_rows(xp, table, payload[:full], flat[:full * per_byte].reshape(full, per_byte))
    if rest:
        flat[full * per_byte:] = xp.take(table, payload[full:full + 1], axis=0)[0, :rest]
    return out


def _take_rows(xp, table, index, out):
    if xp is numpy:
        # uint8 indices cannot be out of range; mode='raise' would stage `out` in a temporary.
        numpy.take(table, index, axis=0, out=out, mode="clip")
    else:
        xp.take(table, index, axis=0, out=out)


@functools.lru_cache(maxsize=64)
def _host_table(kind: str, thr_bits: int) -> numpy.ndarray:
    byte = numpy.arange(256, dtype=numpy.uint8)[:, None]
    if kind == "2bit":
        thr = numpy.array(thr_bits, dtype=numpy.uint32).view(numpy.float32)[()]
        code = (byte >> numpy.array([6, 4, 2, 0], dtype=numpy.uint8)) & 3
        table = numpy.where(code == 3, thr, numpy.where(code == 2, -thr, numpy.float32(0)))
    else:
        bits = numpy.unpackbits(byte, axis=1, bitorder="big")
        table = numpy.where(bits == 1, numpy.float32(1), numpy.float32(-1))
    table = numpy.ascontiguousarray(table, dtype=numpy.float32)
    table.flags.writeable = False
    return table


def _device_table(xp, kind: str, thr_bits: int):
    if xp is numpy:
        return _host_table(kind, thr_bits)
    return _cupy_table(xp, kind, thr_bits, xp.cuda.Device().id)


@functools.lru_cache(maxsize=64)
def _cupy_table(xp, kind: str, thr_bits: int, device_id: int):
    with xp.cuda.Device(device_id):
        return xp.asarray(_host_table(kind, thr_bits))
