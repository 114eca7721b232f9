"""numba, loaded on first need: the one place that imports it for the CPU kernels.

The kernels (the optimizer rules through ``optimizer.kernels``, FullyConnected's element-wise
passes in ``ndarray._fc_kernels``) are optional. Each runs the same operations as a NumPy body, one element
at a time in the same order and precision, and the NumPy body stays the reference: without numba,
with ``TRAINER_NO_NUMBA=1``, or for arrays too small to pay for numba, the NumPy body runs and
gives bitwise the same numbers. Without fastmath LLVM neither reassociates nor contracts a
multiply-add into an FMA, so every element rounds as it does in NumPy; ``error_model="numpy"``
makes division follow IEEE (inf/nan) instead of raising, which is also what lets LLVM vectorize.

numba is imported, and a kernel compiled or loaded from numba's on-disk cache, only on the first
call that qualifies: about 0.3 s for the import and 0.5 s for the first kernel from the cache,
once per process. Small models never pay it. The runner pays it before its training clock
starts (:func:`warm_up`), so that a run's steps/s and ETA measure training alone.
"""
from __future__ import annotations

import hashlib
import os
import types

__all__ = ["COMPILING", "enabled", "jit", "Kernel", "loaded", "on_first_compile", "ready",
           "warm_up"]

_numba = None        # the module once imported; False when unavailable or turned off
_waiting = []        # on_first_compile blocks entered before numba was imported


def enabled() -> bool:
    """Whether kernels may run (numba importable and not turned off)."""
    global _numba
    if _numba is None:
        if os.environ.get("TRAINER_NO_NUMBA", "") not in ("", "0"):
            _numba = False
        else:
            try:
                import numba
            except ImportError:
                _numba = False
            else:
                _numba = numba
                for watch in _waiting[:]:
                    watch._listen()
                _waiting.clear()
    return _numba is not False


def jit(pyfunc, inline=False):
    """``pyfunc`` compiled without the GIL, cached on disk where that is possible; ``inline``:
    compiled into each kernel that calls it (numba's ``inline='always'``) instead of called."""
    if not enabled():
        raise RuntimeError("numba is not available (or TRAINER_NO_NUMBA is set)")
    options = dict(nogil=True, error_model="numpy", inline="always" if inline else "never")
    try:
        return _numba.njit(pyfunc, cache=True, **options)
    except Exception:       # no writable cache location: compile in memory each run
        return _numba.njit(pyfunc, **options)


def loaded() -> bool:
    """Whether numba is already imported (by a kernel's first call, or ``warm_up``): then a
    small call costs only its own dispatch."""
    return _numba is not None and _numba is not False


def ready() -> bool:
    """``enabled()``, at the cost of one comparison once numba is loaded (the per-call check)."""
    return _numba is not False and (_numba is not None or enabled())


class Kernel:
    """``pyfunc`` (a loop over one element at a time) compiled on its first call.

    A loop may call other kernels by name: ``helpers`` maps each name it uses to a ``Kernel``.
    numba resolves a function's globals when it compiles it, so the loop is compiled as a copy
    of itself whose globals are its module's with those names bound to the compiled helpers;
    the module itself is never changed (in pure Python the names keep meaning the plain
    functions, which compute the same). ``qualname`` names the copy where one loop is compiled
    with different helpers (the multi-tensor drivers): numba's disk cache tells functions of
    one file apart by it. The copy's name also carries a digest of its helpers' code, because
    numba checks only the loop's own file before reusing a cached build.

    ``inline``: a helper called once per short stretch (a row of an embedding table, a span of
    an image row) is compiled into its callers; a call per stretch would cost as much as the
    stretch's arithmetic and keep LLVM from specializing the loop.
    """

    __slots__ = ("pyfunc", "_compiled", "helpers", "qualname", "inline")

    def __init__(self, pyfunc, helpers=None, qualname=None, inline=False):
        if helpers is not None and not isinstance(helpers, dict):
            raise TypeError("Kernel(pyfunc, {name: kernel}): helpers are a dict (the former "
                            "Kernel(pyfunc, name, callee) rebound module globals)")
        self.pyfunc = pyfunc
        self._compiled = None
        self.helpers = dict(helpers or {})
        self.qualname = qualname
        self.inline = inline

    def __call__(self, *args):
        return (self._compiled or self.compiled())(*args)

    def compiled(self):
        if self._compiled is None:
            self._compiled = jit(self.linked(), self.inline)
        return self._compiled

    def linked(self):
        """``pyfunc`` with its helpers bound, compiled, in a namespace of its own."""
        pyfunc = self.pyfunc
        if not self.helpers and self.qualname is None:
            return pyfunc
        namespace = dict(pyfunc.__globals__)
        for name, helper in self.helpers.items():
            namespace[name] = helper.compiled() if isinstance(helper, Kernel) else helper
        func = types.FunctionType(pyfunc.__code__, namespace, pyfunc.__name__,
                                  pyfunc.__defaults__, pyfunc.__closure__)
        func.__qualname__ = "%s__%s" % (self.qualname or pyfunc.__qualname__, self.digest())
        return func

    def digest(self) -> str:
        """A digest of the code this kernel compiles: its loop's and its helpers'."""
        parts = [_code_text(self.pyfunc.__code__) + ("|inline" if self.inline else "")]
        for name in sorted(self.helpers):
            helper = self.helpers[name]
            parts.append(name + (helper.digest() if isinstance(helper, Kernel) else ""))
        return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:12]


def _code_text(code) -> str:
    consts = [_code_text(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts]
    return "%s|%s|%s" % (code.co_code.hex(), consts, code.co_names)


def _first_kernel(x):
    x[0] += 1.0


_FIRST = Kernel(_first_kernel)


def warm_up() -> bool:
    """Import numba and load one kernel from its cache now (numba's first load also sets up its
    code generator and BLAS bindings): most of the one-time cost of the first kernel call.
    False when kernels are off."""
    if not enabled():
        return False
    import numpy

    _FIRST(numpy.zeros(1, dtype=numpy.float32))
    return True


# Told once when a command waits for numba to compile kernels: a first run on a machine (or after
# an upgrade) would otherwise sit silent for up to a minute before its first line, or stall at a
# step that meets a new kind of layer.
COMPILING = ("compiling the CPU kernels for this machine's processor, once: later runs load "
             "them from numba's cache (a small CNN: about half a minute on 2 cores)")


class on_first_compile:
    """A ``with`` block in which ``tell()`` is called once, when numba first compiles a kernel
    (not when it loads one from its cache), from the thread that compiles; ``told`` says
    whether it was. Compiling is what a first run on a machine waits for: about 30 s of a small
    CNN's first steps on a 2-core machine, against 0.5 s to load the same kernels from the
    cache. Entered before numba is imported, the block starts listening when a kernel imports
    it (``enabled``), so that a command importing nothing does not pay for the import."""

    def __init__(self, tell):
        self._tell = tell
        self.told = False
        self._listener = None

    def __enter__(self):
        if loaded():
            self._listen()
        elif _numba is None:
            _waiting.append(self)
        return self

    def _listen(self):
        from numba.core import event

        watch = self

        class Listener(event.Listener):
            def on_start(self, ev):
                if not watch.told:
                    watch.told = True
                    try:
                        watch._tell()
                    except Exception:   # noqa: BLE001 - a notice must not stop the compile
                        pass

            def on_end(self, ev):
                pass

        self._listener = Listener()
        event.register("numba:compile", self._listener)

    def __exit__(self, *exc):
        if self in _waiting:
            _waiting.remove(self)
        if self._listener is not None:
            from numba.core import event

            event.unregister("numba:compile", self._listener)
            self._listener = None
        return False


# Column ``c`` of row ``k`` of an int64 table whose rows are (size, address, address, ...): that
# address as a flat array of ``size`` elements of ``like``'s dtype. A kernel over many arrays
# takes one such table instead of the arrays (numba unboxes each array argument at every call,
# and compiles anew for each number of them). Compiled on first use, when numba is imported.
def _column_loop(table, k, c, like):
    return _carray(_pointer(table[k, c], like), (table[k, 0],))  # noqa: F821


class _ColumnKernel(Kernel):
    __slots__ = ()

    def compiled(self):
        if self._compiled is None:
            from numba import types
            from numba.extending import intrinsic

            @intrinsic
            def pointer(typingctx, address, like):
                # An int64 address as a pointer to like's dtype.
                signature = types.CPointer(like.dtype)(address, like)

                def codegen(context, builder, sig, args):
                    return builder.inttoptr(args[0], context.get_value_type(sig.return_type))
                return signature, codegen

            self.helpers = {"_carray": _numba.carray, "_pointer": pointer}
        return super().compiled()


column = _ColumnKernel(_column_loop)


def address_table(*columns):
    """The int64 table ``column`` reads: a row per array of ``columns[0]``, its element count,
    then the address of that position's array in each column. The addresses stay valid while
    the arrays live: whoever keeps the table keeps the arrays."""
    import numpy

    return numpy.array([[arrays[0].size] + [a.__array_interface__["data"][0] for a in arrays]
                        for arrays in zip(*columns)], dtype=numpy.int64).reshape(
        len(columns[0]), 1 + len(columns))
