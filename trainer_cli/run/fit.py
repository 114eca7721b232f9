"""Whether a checkpoint's files fit the model, the optimizer and the config, checked before any
of them is loaded. Matching SHA-256s only say the files are those meta.json describes; a file
edited by hand (and meta.json with it) or written for another model must still be refused, not
broadcast into the weights or silently dropped.
"""
from __future__ import annotations

import re

import numpy

from ..context import cpu
from ..ndarray import NDArray
from ..ndarray import array as nd_array
from .layout import RunDirError

__all__ = ["check_params", "check_states", "check_residuals"]


def _finite(array) -> bool:
    return array.dtype.kind not in "fc" or bool(numpy.isfinite(array).all())


def check_params(path, arrays: dict, net) -> None:
    """``arrays`` (params.npz) hold exactly the model's parameters: names, shapes, dtypes, finite."""
    params = net._collect_params_with_prefix()
    missing = sorted(set(params) - set(arrays))
    extra = sorted(set(arrays) - set(params))
    if missing or extra:
        raise RunDirError("%s: does not fit the model in config.yaml (%s)" % (path, "; ".join(
            part for part in ("missing %s" % ", ".join(missing[:5]) if missing else "",
                              "not in the model: %s" % ", ".join(extra[:5]) if extra else "")
            if part)))
    for name, param in params.items():
        array = arrays[name]
        want_shape, want_dtype = tuple(param.shape or ()), numpy.dtype(param.dtype)
        # A deferred parameter knows only some dimensions (0: not known until the first batch).
        fits = len(array.shape) == len(want_shape) and all(
            w in (0, a) for w, a in zip(want_shape, array.shape))
        if not fits or array.dtype != want_dtype:
            raise RunDirError("%s: %s: shape %s %s, the model's is %s %s"
                              % (path, name, list(array.shape), array.dtype.name,
                                 list(want_shape), want_dtype.name))
        if not _finite(array):
            raise RunDirError("%s: %s holds NaN/Inf; resume from an earlier checkpoint with --from"
                              % (path, name))


def _layout(state):
    if state is None:
        return None
    if isinstance(state, (tuple, list)):
        return (type(state).__name__, tuple(_layout(s) for s in state))
    data = state.asnumpy() if isinstance(state, NDArray) else numpy.asarray(state)
    return (tuple(data.shape), data.dtype.name)


def _leaves(state):
    if isinstance(state, (tuple, list)):
        for s in state:
            yield from _leaves(s)
    elif state is not None:
        yield state.asnumpy() if isinstance(state, NDArray) else numpy.asarray(state)


def check_states(path, by_device: dict, optimizer, net, trainer, weights: dict) -> None:
    """The states file's optimizer is the config's, and it holds one state per trained
    parameter, each shaped and typed as that optimizer creates it (for the weight in
    ``weights``, params.npz's arrays, already checked), all finite."""
    if optimizer is None:
        raise RunDirError("%s: holds no optimizer" % path)
    want = trainer.optimizer.registry_name
    if optimizer.registry_name != want:
        raise RunDirError("%s: optimizer %r, but config.yaml trains with %r"
                          % (path, optimizer.registry_name, want))
    params = list(trainer._params)  # the Trainer's order is what state indices count
    names = {id(p): name for name, p in net._collect_params_with_prefix().items()}
    updated = {i for counts in optimizer._all_index_update_counts.values()
               for i, n in counts.items() if n > 0}
    for device, states in sorted(by_device.items()):
        for index in states:
            if not isinstance(index, int) or not 0 <= index < len(params) \
                    or params[index].grad_req == "null":
                raise RunDirError("%s: a state for parameter %r, which the model does not train"
                                  % (path, index))
        for index, param in enumerate(params):
            if param.grad_req == "null":
                continue
            if index not in states:
                if index in updated:
                    raise RunDirError("%s: no state for parameter %d (%s), which was updated"
                                      % (path, index, param.name))
                continue
            weight = nd_array(weights[names[id(param)]], ctx=cpu(0),
                              dtype=weights[names[id(param)]].dtype)
            expected = _layout(optimizer.create_state_multi_precision(index, weight))
            found = _layout(states[index])
            if found != expected:
                raise RunDirError("%s: the state of parameter %d (%s) is %s; %s creates %s"
                                  % (path, index, param.name, _text(found),
                                     optimizer.registry_name, _text(expected)))
            if not all(_finite(a) for a in _leaves(states[index])):
                raise RunDirError("%s: the state of parameter %d (%s) holds NaN/Inf; resume from "
                                  "an earlier checkpoint with --from" % (path, index, param.name))


def _text(layout) -> str:
    if layout is None:
        return "none"
    if isinstance(layout[0], str):
        return "%s(%s)" % (layout[0], ", ".join(_text(x) for x in layout[1]))
    return "%s %s" % (list(layout[0]), layout[1])


_NAME = re.compile(r"^r(\d+)_(w?)(\d+)$", re.ASCII)


def check_residuals(path, arrays: dict, kv, trainer, contexts) -> None:
    """kvstore.npz names only residuals this job's store keeps, each the size of its parameter."""
    compressing = kv is not None and getattr(kv, "gradient_compression", None) is not None
    if arrays and not compressing:
        raise RunDirError("%s: holds gradient-compression residuals, but config.yaml compresses "
                          "nothing" % path)
    params = list(trainer._params)  # kvstore keys are the Trainer's parameter indices
    dist = compressing and "dist" in kv.type
    for name, value in arrays.items():
        match = _NAME.match(name)
        if match is None or bool(match.group(2)) != dist:
            raise RunDirError("%s: %r is not a residual name of this %s store (r<key>_%s<n>)"
                              % (path, name[:60], "dist" if dist else "in-process",
                                 "w" if dist else ""))
        key, source = int(match.group(1)), int(match.group(3))
        if key >= len(params) or (not dist and source >= len(contexts)):
            raise RunDirError("%s: %s names a parameter or device this job does not have"
                              % (path, name))
        if value.dtype != numpy.float32 or value.size != int(numpy.prod(params[key].shape)):
            raise RunDirError("%s: %s is %s of %d values; parameter %d (%s) needs float32 of %d"
                              % (path, name, value.dtype.name, value.size, key, params[key].name,
                                 int(numpy.prod(params[key].shape))))
        if not _finite(value):
            raise RunDirError("%s: %s holds NaN/Inf" % (path, name))
