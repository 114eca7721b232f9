"""The root of the errors MXNet raises as ``MXNetError`` (``mx.base.MXNetError``).

MXNet reports a failure inside its engine (no GPU, input shapes that do not fit an operator, a
storage type it does not know, a damaged parameter file) as ``mxnet.base.MXNetError``, a
``RuntimeError``; Gluon code catches it by that name, most often to fall back to the CPU::

    try:
        nd.zeros((1,), ctx=mx.gpu())
    except mx.base.MXNetError:
        ctx = mx.cpu()

The errors trainer_cli raises in those places are instances of ``MXNetError`` and also of the
built-in type they were before (``ShapeError`` is a ``ValueError`` too), so both MXNet code and
ordinary ``except ValueError`` catch them. This module imports nothing of trainer_cli: every
layer may raise these.
"""

import os

__all__ = ["MXNetError", "ShapeError", "IndexRangeError", "StorageTypeError",
           "NotInTrainerCLIError", "data_dir", "integer_types", "numeric_types", "string_types"]

# MXNet's type tuples, which Gluon code (custom blocks and losses, MXNet's examples) uses in
# isinstance checks; integer_types and numeric_types come from __getattr__ below.
string_types = (str,)


class MXNetError(RuntimeError):
    """Default error thrown by MXNet functions (MXNet's own class is a ``RuntimeError`` too)."""


class ShapeError(MXNetError, ValueError):
    """Input shapes that do not fit an operator (MXNet: ``MXNetError: Shape inconsistent``)."""


class IndexRangeError(MXNetError, IndexError):
    """An index outside an axis where an operator must refuse it (``take(mode='raise')``)."""


class StorageTypeError(MXNetError, ValueError):
    """A storage type that is not ``default``, ``row_sparse`` or ``csr``, or a conversion
    between storage types that MXNet does not make."""


class NotDownloadedError(MXNetError, FileNotFoundError):
    """A file ``download`` was asked for is not in place: trainer_cli downloads nothing."""


class NotInTrainerCLIError(MXNetError, AttributeError):
    """An MXNet name that trainer_cli deliberately does not provide (docs/porting.md lists them).

    An ``AttributeError``, so ``hasattr(mod.absent_thing, "x")`` and ``getattr(..., default)``
    still answer that the name is absent; the message says it is absent on purpose.
    """


def absent_message(qualname: str, what: str) -> str:
    return ("%s is MXNet's %s, which trainer_cli does not provide; see docs/porting.md for what "
            "exists and what to use instead, docs/compat.md for the differences." % (qualname, what))


def missing_attribute(module_name: str, name: str, absent: dict) -> AttributeError:
    """The error for a module's missing ``name`` (for its ``__getattr__`` to raise):
    ``NotInTrainerCLIError`` saying so when ``absent`` (MXNet name -> what it is) lists it,
    else a plain ``AttributeError``."""
    what = absent.get(name)
    if what is None:
        return AttributeError("module %r has no attribute %r" % (module_name, name))
    return NotInTrainerCLIError(absent_message(module_name + "." + name, what))


class AbsentModule:
    """Stands for an MXNet module trainer_cli does not provide, such as ``mx.sym``.

    ``from trainer_cli import sym`` succeeds (a file that imports it but uses it only on some
    paths still runs); the first use of anything in it (``sym.var``, ``sym(...)``) raises
    ``NotInTrainerCLIError`` saying what is missing.
    """

    __slots__ = ("_qualname", "_what")

    def __init__(self, qualname: str, what: str):
        object.__setattr__(self, "_qualname", qualname)
        object.__setattr__(self, "_what", what)

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            # Introspection (copy, pickle, doctest, IPython) asks for dunders: answer as absent.
            raise AttributeError(name)
        raise NotInTrainerCLIError(absent_message("%s.%s" % (self._qualname, name), self._what))

    def __setattr__(self, name, value):
        raise NotInTrainerCLIError(absent_message(self._qualname, self._what))

    def __call__(self, *args, **kwargs):
        raise NotInTrainerCLIError(absent_message(self._qualname, self._what))

    def __repr__(self):
        return "<absent MXNet module %s: %s (see docs/porting.md)>" % (self._qualname, self._what)


class AbsentModuleFinder:
    """On ``sys.meta_path`` after the ordinary finders: ``import trainer_cli.recordio`` (a module
    MXNet has and trainer_cli deliberately lacks) fails with a message that says so instead of
    a bare "No module named". It answers only for the names it was given; a module that exists
    is found by the ordinary finders first."""

    def __init__(self, package: str, absent: dict):
        self._package = package
        self._absent = absent

    def find_spec(self, fullname, path=None, target=None):
        parent, _, name = fullname.rpartition(".")
        if parent == self._package and name in self._absent:
            raise ModuleNotFoundError(absent_message(fullname, self._absent[name]), name=fullname)
        return None


def data_dir() -> str:
    """MXNet's data folder: ``$MXNET_HOME``, else ``~/.mxnet``."""
    return os.getenv("MXNET_HOME", os.path.join(os.path.expanduser("~"), ".mxnet"))


def __getattr__(name):
    # NumPy only when a type tuple is first asked for: every layer imports this module, and
    # importing it loads nothing. Numpy scalars are numbers; of numpy's integers only int32 and
    # int64 count as integers, as in MXNet.
    if name in ("integer_types", "numeric_types"):
        import numpy
        globals().update(integer_types=(int, numpy.int32, numpy.int64),
                         numeric_types=(float, int, numpy.generic))
        return globals()[name]
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
