"""Building the network a config names: a ``models/<name>.py`` file's ``build(**args)``, or
``path/to/file.py:factory``.

The file is executed as a module object that is never entered in ``sys.modules``, so a user's
``models/mlp.py`` cannot shadow or be shadowed by an installed package of the same name, and two
runs in one process each get a fresh copy. Only files the config names are executed; a run
directory's files never are (``resume`` reads only its ``config.yaml``).
"""
from __future__ import annotations

import hashlib
import importlib.util
import math
from pathlib import Path
from types import SimpleNamespace

import numpy

from ..config import names as _config_names
from ..config.schema.model import MODEL_FACTORY
from ..gluon.parameter import allocation_check
from .user_code import explain, user_frame
from ..config.schema.zoo import ZOO_PREFIX, is_zoo

__all__ = ["ModelError", "ModelCodeError", "ModelFileError", "model_source", "load_factory",
           "build_network", "parameter_bytes", "names", "create"]


class ModelError(RuntimeError):
    """The model file could not be loaded or its factory failed (the run fails, exit 1)."""


class ModelCodeError(ModelError):
    """The user's model code raised while building or running the network; the message names
    the block, the shapes and the user's file:line (see :mod:`.user_code`) and is shown whole."""

    complete_message = True


class ModelFileError(ModelError):
    """The model file itself is unusable: it fails or exits while being loaded, or defines no
    factory. Bad input: the CLI exits 2."""


def model_source(model_section, config_dir=None, forbid=None) -> tuple[Path, str]:
    """``(file, factory name)`` for a ModelSection; never a file inside the folder ``forbid``
    (a run directory being resumed: its files are data, not code)."""
    name = model_section.name
    if is_zoo(name):
        # The package's own code: model.json records it as built in, like builtin_models/.
        return zoo_file(), name
    if ":" in name:
        file, _, factory = name.rpartition(":")
        file = Path(file)
    else:
        # names.model_files' search order, minus any folder inside ``forbid``.
        folders = [d for d in _config_names.model_dirs(config_dir)
                   if forbid is None or not _inside(d, forbid)]
        found = [d / (name + ".py") for d in folders if (d / (name + ".py")).is_file()]
        file, factory = (found[0] if found else None), MODEL_FACTORY
        if file is None:
            dirs = ", ".join(str(d) for d in _config_names.model_dirs(config_dir)) or "none found"
            raise ModelError("model %r: no models/%s.py in the model folders (%s)" % (name, name, dirs))
    if forbid is not None and _inside(file, forbid):
        from .layout import RunDirError
        raise RunDirError("%s: the model file is inside the run directory %s, whose files are "
                          "never executed" % (file, forbid))
    return file, factory


def _inside(path, folder) -> bool:
    try:
        Path(path).resolve().relative_to(Path(folder).resolve())
    except ValueError:
        return False
    return True


def zoo_file() -> Path:
    """The file standing for every model-zoo network (``zoo:NAME``)."""
    from ..gluon.model_zoo import vision
    return Path(vision.__file__).resolve()


def load_factory(file: Path, factory: str):
    """The callable ``factory`` of the Python file ``file`` (``zoo:NAME``: the zoo's
    ``get_model`` for that network)."""
    if is_zoo(factory):
        import functools
        from ..gluon.model_zoo import vision
        return functools.partial(vision.get_model, factory[len(ZOO_PREFIX):])
    file = Path(file).resolve()
    # A private module name: the same file loaded twice gets two independent module objects.
    digest = hashlib.sha256(str(file).encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location("_trainer_model_%s_%s" % (file.stem, digest), file)
    if spec is None or spec.loader is None:
        raise ModelError("%s: cannot be loaded as a Python module" % file)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except SystemExit as exc:
        # sys.exit() in a model file must not end the run quietly (with exit 0).
        raise ModelFileError("%s: the model file called sys.exit(%r) while being loaded"
                             % (file, exc.code)) from None
    except Exception as exc:  # noqa: BLE001 - any failure of user code is reported the same way
        where = user_frame(exc, file)
        raise ModelFileError("%s: loading the model file failed%s: %s: %s"
                             % (file, " at %s" % where if where else "", type(exc).__name__,
                                exc)) from exc
    fn = getattr(module, factory, None)
    if not callable(fn):
        raise ModelFileError("%s: defines no callable %r" % (file.name, factory))
    return fn


def names(config_dir=None) -> list[str]:
    """The model names a config may use: the ``models/*.py`` files of the model folders (see
    :func:`trainer_cli.config.names.model_dirs`; ``file.py:factory`` and ``zoo:NAME`` names
    work too)."""
    return sorted(_config_names.model_files(config_dir))


def create(name, config_dir=None, **args):
    """The network that model ``name`` (a ``models/`` file's name, ``file.py:factory`` or
    ``zoo:NAME``) builds
    from ``args``, not yet initialized."""
    file, factory = model_source(SimpleNamespace(name=name), config_dir)
    return load_factory(file, factory)(**args)


def build_network(model_section, contexts, sample_x, config_dir=None, forbid=None,
                  sample_output: list | None = None):
    """The initialized network on ``contexts``, its parameters' shapes known.

    ``sample_x`` (a few training rows) is run through once in predict mode, so that deferred
    initialization happens now, in a fixed place of the random stream, rather than inside the
    first training step. ``sample_output``, when given, receives the shape of what the network
    returned (nothing when it was not run).
    """
    from .. import autograd, initializer
    from ..gluon.block import reset_name_counters
    from .data import as_batch

    file, factory = model_source(model_section, config_dir, forbid)
    fn = load_factory(file, factory)
    # Blocks made outside a name scope are numbered by a process-wide counter; starting it
    # afresh gives a run the same parameter names (and so the same Trainer order) every time.
    reset_name_counters()
    try:
        net = fn(**model_section.args)
    except Exception as exc:  # noqa: BLE001
        where = user_frame(exc, file)
        raise ModelCodeError("%s: %s(**%r) failed%s: %s: %s"
                             % (file.name, factory, model_section.args,
                                " at %s" % where if where else "", type(exc).__name__,
                                exc)) from exc
    if not hasattr(net, "collect_params") or not callable(net):
        raise ModelError("%s: %s() returned %r, expected a gluon Block" % (file.name, factory, net))
    init = initializer.create(model_section.init.name, **model_section.init.params)
    with allocation_check(_ParameterBudget(model_section.name)):
        net.initialize(init, ctx=contexts)
        dtype = numpy.dtype(model_section.dtype)
        if dtype != numpy.float32:
            net.cast(dtype.name)
        # A row_sparse weight is read through the Trainer's kvstore, which does not exist yet;
        # such weights have their shapes already, and so have the layers built beside them.
        if all(p.stype == "default" for p in net.collect_params().values()):
            with autograd.pause():
                try:
                    out = net(as_batch(sample_x.astype(dtype), contexts[0], dtype))
                except Exception as exc:  # noqa: BLE001 - told with its block and line, or as is
                    text = explain(exc, file)
                    if text is None:
                        raise
                    raise ModelCodeError("the model's first forward pass (on one training "
                                         "sample) failed: %s" % text) from exc
            if sample_output is not None and hasattr(out, "shape"):
                sample_output.append(tuple(out.shape))
    return net, file


class _ParameterBudget:
    """Refuses, before it is allocated, the parameter that takes the model's parameters and
    their gradients past the memory available (``hidden: [4000000000]``), with the estimate."""

    def __init__(self, model_name):
        self.model_name = model_name
        self.total = 0

    def __call__(self, param, nbytes):
        from .memory import check_fits

        self.total += 2 * nbytes  # the values and their gradients
        check_fits(self.total, "model %r: its parameters up to %r (shape %s), with their "
                   "gradients," % (self.model_name, param.name, "x".join(map(str, param.shape))))


def parameter_bytes(net) -> int:
    """The bytes of the parameters' values (a checkpoint holds them and the optimizer's states);
    0 for parameters not yet shaped."""
    total = 0
    for param in net.collect_params().values():
        if param.shape is not None and all(d > 0 for d in param.shape):
            total += math.prod(param.shape) * numpy.dtype(param.dtype).itemsize
    return total
