"""Eight running sums over a stretch of an array, as one vector of eight lanes when compiled.

NumPy's pairwise summation adds a block of up to 128 values in eight running sums, sum ``k``
taking the values at offsets ``k``, ``k + 8``, ``k + 16``, ... (``_pairwise.pairwise``). Written
as eight scalar variables, LLVM kept them scalar: eight dependent chains of scalar adds, about
half a cycle a value, which was a third of LayerNorm's time. Lane ``k`` of one vector of eight
holds sum ``k``, and a vector add is each lane's scalar add, the same IEEE operation in the same
order, so the sums are the same bits; on AVX2 a float32 block takes one add per eight values.

``lane_sums(a, s, whole)`` returns the eight sums of ``a[s:s + whole]`` (``whole`` a multiple of 8,
at least 8) as a tuple, each started from the value at its own offset as NumPy starts it. In
Python (no numba) it is plain code; compiled (``LANE_SUMS``, a ``_jit.Kernel`` whose compiled form
is a numba intrinsic) it loads eight values at a time: as one vector from a contiguous array,
or lane by lane at the array's stride from any other.
"""
from __future__ import annotations

from .. import _jit

__all__ = ["lane_sums", "LANE_SUMS"]


def lane_sums(a, s, whole):
    r0, r1, r2, r3 = a[s], a[s + 1], a[s + 2], a[s + 3]
    r4, r5, r6, r7 = a[s + 4], a[s + 5], a[s + 6], a[s + 7]
    for i in range(s + 8, s + whole, 8):
        r0, r1, r2, r3 = r0 + a[i], r1 + a[i + 1], r2 + a[i + 2], r3 + a[i + 3]
        r4, r5, r6, r7 = r4 + a[i + 4], r5 + a[i + 5], r6 + a[i + 6], r7 + a[i + 7]
    return r0, r1, r2, r3, r4, r5, r6, r7


class _LaneSumsKernel(_jit.Kernel):
    """``lane_sums`` compiled as a numba intrinsic that adds vectors of eight lanes."""

    __slots__ = ()
    _intrinsic = None      # kept apart from _compiled, which holds a compiled function's dispatcher

    def compiled(self):
        if _LaneSumsKernel._intrinsic is None:
            _LaneSumsKernel._intrinsic = _make_intrinsic()
        return _LaneSumsKernel._intrinsic


def _make_intrinsic():
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def lane_sums_vector(typingctx, a, s, whole):
        if not (isinstance(a, types.Array) and a.ndim == 1 and isinstance(a.dtype, types.Float)
                and isinstance(s, types.Integer) and isinstance(whole, types.Integer)):
            return None
        result = types.UniTuple(a.dtype, 8)

        def codegen(context, builder, sig, args):
            array_type = sig.args[0]
            array = context.make_array(array_type)(context, builder, args[0])
            index = context.get_value_type(types.intp)
            start = context.cast(builder, args[1], sig.args[1], types.intp)
            count = context.cast(builder, args[2], sig.args[2], types.intp)
            element = context.get_value_type(array_type.dtype)
            vector = ir.VectorType(element, 8)
            lanes = [ir.Constant(ir.IntType(32), k) for k in range(8)]
            contiguous = array_type.layout == "C"
            stride = None if contiguous else builder.extract_value(array.strides, 0)
            base = builder.ptrtoint(array.data, index)
            size = ir.Constant(index, context.get_abi_sizeof(element))

            def load8(offset):
                """The eight values from position ``offset`` on, as one vector."""
                if contiguous:
                    at = builder.add(base, builder.mul(offset, size))
                    pointer = builder.inttoptr(at, vector.as_pointer())
                    return builder.load(pointer, align=context.get_abi_sizeof(element))
                value = ir.Constant(vector, ir.Undefined)
                for k in range(8):
                    at = builder.add(base, builder.mul(builder.add(offset, ir.Constant(index, k)),
                                                       stride))
                    one = builder.load(builder.inttoptr(at, element.as_pointer()))
                    value = builder.insert_element(value, one, lanes[k])
                return value

            total = cgutils.alloca_once_value(builder, load8(start))
            stop = builder.add(start, count)
            with cgutils.for_range_slice(builder, builder.add(start, ir.Constant(index, 8)), stop,
                                         ir.Constant(index, 8), index) as (offset, _):
                builder.store(builder.fadd(builder.load(total), load8(offset)), total)
            summed = builder.load(total)
            return context.make_tuple(builder, sig.return_type,
                                      [builder.extract_element(summed, k) for k in lanes])
        return result(a, s, whole), codegen
    return lane_sums_vector


LANE_SUMS = _LaneSumsKernel(lane_sums)
