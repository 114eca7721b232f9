"""``mx.profiler``: time spent per operator, as MXNet 1.9.1's profiler reports it.

``set_config(...)`` then ``set_state('run')`` starts it, ``set_state('stop')`` stops it;
``pause()``/``resume()`` suspend the recording in between. ``dumps()`` is a table of the
operators' count and total, min, max and average time; ``dump()`` writes the recorded events
to the configured ``filename`` in Chrome's trace format (``chrome://tracing``), as MXNet does.

What is timed: every operator of ``nd`` (and of the modules the layers call), the NDArray
arithmetic operators (``a + b``, ``a[i]``), the backward pass of each recorded operator
(``_backward_<name>``) and each optimizer update (``<optimizer>_update``, the Updater's
``update_lists`` or, for a Trainer's kept step, ``update_again``). An operator that
calls others counts as one: only the outermost call is timed. On a GPU each timed call waits
for the device, so the times are the work's, not the launch's.

``Domain`` (with its ``Task``, ``Frame``, ``Counter`` and ``Marker``) and ``Event`` mark up
one's own code, as MXNet's do: their spans, values and instants go into the same table (a
section a category) and trace (``_profile_objects``).

Cost when not running: none. ``set_state('run')`` puts timing wrappers in place of the
operators (module attributes and NDArray methods) and ``set_state('stop')`` puts the originals
back, so no operator checks a flag while the profiler is off.
"""
from __future__ import annotations

import json
import os
import sys
import time

from ._atomic import write_text_atomic
from ._profile_objects import Counter, Domain, Event, Frame, Marker, Task
from ._profile_record import MAX_EVENTS, OPERATOR, RECORD as _PROFILER
from .base import missing_attribute

__all__ = ["set_config", "set_state", "state", "pause", "resume", "dumps", "dump",
           "dump_profile", "profiler_set_config", "profiler_set_state", "MAX_EVENTS", "Domain",
           "Task", "Frame", "Event", "Counter", "Marker"]

_CONFIG_KEYS = {"filename", "profile_all", "profile_symbolic", "profile_imperative",
                "profile_memory", "profile_api", "contiguous_dump", "continuous_dump",
                "dump_period", "aggregate_stats", "profile_process"}

# NDArray methods timed, and the operator name each is reported under (MXNet's).
_METHODS = {
    "__add__": "elemwise_add", "__radd__": "elemwise_add", "__iadd__": "elemwise_add",
    "__sub__": "elemwise_sub", "__rsub__": "elemwise_sub", "__isub__": "elemwise_sub",
    "__mul__": "elemwise_mul", "__rmul__": "elemwise_mul", "__imul__": "elemwise_mul",
    "__truediv__": "elemwise_div", "__rtruediv__": "elemwise_div",
    "__itruediv__": "elemwise_div", "__pow__": "_power", "__neg__": "negative",
    "__getitem__": "slice", "__setitem__": "_set_value", "copyto": "_copyto",
    "astype": "Cast",
}
# Private helpers the layers call directly, under their operator's name.
_PRIVATE = {("ops", "_fully_connected"): "FullyConnected", ("nn", "_convolution"): "Convolution",
            ("losses", "softmax_ce_batch_mean"): "softmax_cross_entropy",
            ("losses", "l2_loss_batch_mean"): "l2_loss"}
_MODULES = ("ops", "nn", "more_ops", "creation", "normalization", "padding", "deconvolution",
            "rnn", "ctc", "losses", "random", "sampling")


def _wait(result):
    # Only GPU arrays need it; a host array's wait_to_read is a type check.
    if hasattr(result, "wait_to_read"):
        result.wait_to_read()
    elif isinstance(result, (list, tuple)):
        for item in result:
            if hasattr(item, "wait_to_read"):
                item.wait_to_read()


class _TimedVjp:
    """A recorded node's backward function, timed as ``_backward_<op>``."""

    __slots__ = ("fn", "name")

    def __init__(self, fn, name):
        self.fn = fn
        self.name = name

    def __call__(self, out_grad, needs):
        prof = _PROFILER
        local = prof.local
        if not prof.running or prof.paused or local.depth:
            return self.fn(out_grad, needs)
        local.depth += 1
        start = time.perf_counter()
        try:
            result = self.fn(out_grad, needs)
            _wait(result)
        finally:
            local.depth -= 1
        prof.add(self.name, start, time.perf_counter() - start)
        return result


def _tag_nodes(result, backward_name):
    items = result if isinstance(result, (list, tuple)) else (result,)
    for item in items:
        node = getattr(item, "_node", None)
        if node is not None and node.vjp is not None and type(node.vjp) is not _TimedVjp:
            node.vjp = _TimedVjp(node.vjp, backward_name)


def _timed(fn, name):
    backward_name = "_backward_" + name

    def timed(*args, **kwargs):
        prof = _PROFILER
        local = prof.local
        if prof.paused:
            return fn(*args, **kwargs)
        if local.depth:
            return fn(*args, **kwargs)
        local.depth += 1
        start = time.perf_counter()
        try:
            result = fn(*args, **kwargs)
            _wait(result)
        finally:
            local.depth -= 1
        prof.add(name, start, time.perf_counter() - start)
        _tag_nodes(result, backward_name)
        return result

    timed.__wrapped__ = fn
    timed.__name__ = getattr(fn, "__name__", name)
    timed.__doc__ = getattr(fn, "__doc__", None)
    return timed


def _timed_update(fn):
    def timed(self, *args, **kwargs):
        prof = _PROFILER
        local = prof.local
        if prof.paused or local.depth:
            return fn(self, *args, **kwargs)
        local.depth += 1
        start = time.perf_counter()
        try:
            result = fn(self, *args, **kwargs)
        finally:
            local.depth -= 1
        prof.add(type(self.optimizer).__name__.lower() + "_update", start,
                 time.perf_counter() - start)
        return result

    timed.__wrapped__ = fn
    return timed


def _targets():
    """(owner, attribute name, reported name) of everything timed."""
    import importlib

    from . import ndarray as nd
    from .ndarray import NDArray
    from .optimizer import updater
    found = []
    for module_name in _MODULES:
        module = importlib.import_module(".ndarray." + module_name, __name__.rpartition(".")[0])
        for name in getattr(module, "__all__", ()):
            if (module_name, name) in _PRIVATE:
                continue
            if callable(getattr(module, name, None)) and not isinstance(getattr(module, name),
                                                                         type):
                found.append((module, name, name))
    for (module_name, attr), op_name in _PRIVATE.items():
        module = importlib.import_module(".ndarray." + module_name, __name__.rpartition(".")[0])
        if hasattr(module, attr):
            found.append((module, attr, op_name))
    for name in nd.__all__:
        value = getattr(nd, name, None)
        if callable(value) and not isinstance(value, type) and not hasattr(value, "__path__"):
            found.append((nd, name, name))
    for method, op_name in _METHODS.items():
        if method in vars(NDArray):
            found.append((NDArray, method, op_name))
    found.append((updater.Updater, "update_lists", None))
    found.append((updater.Updater, "update_again", None))  # a Trainer's kept step
    return found


def _install():
    seen, wrappers = set(), {}
    for owner, attr, op_name in _targets():
        key = (id(owner), attr)
        if key in seen:
            continue
        seen.add(key)
        original = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
        if getattr(original, "_profiled", False):
            continue
        wrapper = wrappers.get(id(original))
        if wrapper is None:
            wrapper = _timed_update(original) if op_name is None else _timed(original, op_name)
            wrapper._profiled = True
            wrappers[id(original)] = wrapper
        _PROFILER.patched.append((owner, attr, original))
        setattr(owner, attr, wrapper)
    # Modules that imported an operator by name (``from ..ndarray.losses import ...``) hold
    # the function itself: time those calls too.
    # NDArray's methods named as the operators (``x.sum()``) are the functions themselves too.
    from .ndarray import NDArray
    package = __name__.rpartition(".")[0] + "."
    originals = {id(original): original for _, _, original in _PROFILER.patched}
    holders = [NDArray] + [module for name, module in list(sys.modules.items())
                           if name.startswith(package) and name != __name__ and module is not None]
    for module in holders:
        for attr, value in list(vars(module).items()):
            wrapper = wrappers.get(id(value))
            if wrapper is not None and originals.get(id(value)) is value and \
                    (id(module), attr) not in seen:
                seen.add((id(module), attr))
                _PROFILER.patched.append((module, attr, value))
                setattr(module, attr, wrapper)


def _uninstall():
    while _PROFILER.patched:
        owner, attr, original = _PROFILER.patched.pop()
        setattr(owner, attr, original)


# ------------------------------------------------------------------------------- public API
def set_config(**kwargs):
    """Set the profiler's options: ``filename`` (where ``dump()`` writes, ``profile.json`` by
    default), ``aggregate_stats``, and MXNet's other switches (``profile_all``,
    ``profile_imperative``, ``profile_memory``, ...), which are accepted; operators are always
    profiled."""
    unknown = sorted(set(kwargs) - _CONFIG_KEYS)
    if unknown:
        raise ValueError("profiler.set_config: unknown option(s) %s; the options are %s"
                         % (", ".join(unknown), ", ".join(sorted(_CONFIG_KEYS))))
    if "filename" in kwargs:
        kwargs["filename"] = os.fspath(kwargs["filename"])
    _PROFILER.config.update(kwargs)


profiler_set_config = set_config


def set_state(state="stop", profile_process="worker"):
    """``'run'`` starts timing the operators, ``'stop'`` stops (the records stay for
    ``dumps()``/``dump()``)."""
    if state not in ("run", "stop"):
        raise ValueError("profiler.set_state: state must be 'run' or 'stop', got %r" % (state,))
    with _PROFILER.lock:
        if state == "run" and not _PROFILER.running:
            _install()
            _PROFILER.running = True
            _PROFILER.paused = False
        elif state == "stop" and _PROFILER.running:
            _PROFILER.running = False
            _uninstall()


profiler_set_state = set_state


def state():
    """``'run'`` or ``'stop'``."""
    return "run" if _PROFILER.running else "stop"


def pause(profile_process="worker"):
    """Stop recording until ``resume()`` (the profiler stays in the 'run' state)."""
    _PROFILER.paused = True


def resume(profile_process="worker"):
    """Record again after ``pause()``."""
    _PROFILER.paused = False


_HEADER = "%-*s  %12s  %14s  %14s  %14s  %14s"
_COUNTER_HEADER = "%-*s  %12s  %14s  %14s  %14s"


def _table(sort_by="total", ascending=False):
    columns = {"total": 1, "avg": None, "min": 2, "max": 3, "count": 0}
    if sort_by not in columns:
        raise ValueError("profiler.dumps: sort_by must be one of %s" % ", ".join(columns))
    with _PROFILER.lock:
        spans = {cat: [(name,) + tuple(v) for name, v in entries.items()]
                 for cat, entries in _PROFILER.spans.items()}
        counters = {cat: dict(entries) for cat, entries in _PROFILER.counters.items()}
        marks = {cat: dict(entries) for cat, entries in _PROFILER.marks.items()}

    def key(row):
        if sort_by == "avg":
            return row[2] / row[1]
        return row[1 + columns[sort_by]]
    width = max([len("Name")] + [len(r[0]) for rows in spans.values() for r in rows] +
                [len(n) for e in list(counters.values()) + list(marks.values()) for n in e])
    lines = ["", "Profile Statistics:", "\tNote the difference in units for different entries."]
    # One section a category, in MXNet's order (by name: a domain's own before its frames').
    for category in sorted(set(spans) | set(counters) | set(marks)):
        lines += ["", category, "================="]
        rows = sorted(spans.get(category, ()), key=key, reverse=not ascending)
        if rows:
            lines += [_HEADER % (width, "Name", "Total Count", "Time (ms)", "Min Time (ms)",
                                 "Max Time (ms)", "Avg Time (ms)"),
                      _HEADER % (width, "----", "-----------", "---------", "-------------",
                                 "-------------", "-------------")]
        for name, count, total, low, high in rows:
            lines.append("%-*s  %12d  %14.4f  %14.4f  %14.4f  %14.4f" % (
                width, name, count, total * 1e3, low * 1e3, high * 1e3, total * 1e3 / count))
        if category in marks:
            lines += ["%-*s  %12s" % (width, "Marker", "Total Count"),
                      "%-*s  %12s" % (width, "------", "-----------")]
            for name, count in sorted(marks[category].items()):
                lines.append("%-*s  %12d" % (width, name, count))
        if category in counters:
            lines += [_COUNTER_HEADER % (width, "Counter", "Changes", "Min Value", "Max Value",
                                         "Last Value"),
                      _COUNTER_HEADER % (width, "-------", "-------", "---------", "---------",
                                         "----------")]
            for name, (changes, low, high, last) in sorted(counters[category].items()):
                lines.append("%-*s  %12d  %14d  %14d  %14d" % (width, name, changes, low, high,
                                                               last))
    if _PROFILER.dropped:
        lines += ["", "(%d events past the first %d are counted above but not kept for dump())"
                  % (_PROFILER.dropped, MAX_EVENTS)]
    return "\n".join(lines) + "\n"


def dumps(reset=False, format="table", sort_by="total", ascending=False):  # noqa: A002
    """The table of what was timed, a section a category (``operator``, and those of
    ``Domain``'s objects and ``Event``s): count, total, min, max and average time in ms;
    counters' changes and values; markers' counts (``format='json'``: the same as JSON).
    ``reset`` clears the records."""
    if format not in ("table", "json"):
        raise ValueError("profiler.dumps: format must be 'table' or 'json', got %r" % (format,))
    if format == "json":
        with _PROFILER.lock:
            doc = {cat: {name: {"Count": v[0], "Total": v[1] * 1e3, "Min": v[2] * 1e3,
                                "Max": v[3] * 1e3, "Avg": v[1] * 1e3 / v[0]}
                         for name, v in entries.items()}
                   for cat, entries in _PROFILER.spans.items()}
            for cat, entries in _PROFILER.counters.items():
                doc.setdefault(cat, {}).update(
                    {name: {"Count": v[0], "Min": v[1], "Max": v[2], "Last": v[3]}
                     for name, v in entries.items()})
            for cat, entries in _PROFILER.marks.items():
                doc.setdefault(cat, {}).update({name: {"Count": n} for name, n in entries.items()})
            doc.setdefault(OPERATOR, {})
            doc["Unit"] = {"Time": "ms"}
            text = json.dumps(doc, sort_keys=True)
    else:
        text = _table(sort_by, ascending)
    if reset:
        with _PROFILER.lock:
            _PROFILER.reset()
    return text


def _trace_event(event, origin, pid):
    category, name, phase, start, seconds, tid, extra = event
    out = {"name": name, "cat": category, "ph": phase, "pid": pid, "tid": tid,
           "ts": round((start - origin) * 1e6, 3)}
    if phase == "X":
        out["dur"] = round(seconds * 1e6, 3)
    elif phase == "C":
        out["args"] = extra
    else:
        out["s"] = extra
    return out


def dump(finished=True, profile_process="worker"):
    """Write the recorded events to the configured ``filename`` in Chrome's trace format
    (atomically); ``finished`` also stops the profiler, as MXNet's."""
    if finished:
        set_state("stop")
    with _PROFILER.lock:
        origin = _PROFILER.origin
        pid = os.getpid()
        events = [_trace_event(event, origin, pid) for event in _PROFILER.events]
    path = _PROFILER.config["filename"]
    write_text_atomic(path, json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
    return path


dump_profile = dump


def __getattr__(name):
    raise missing_attribute(__name__, name, {})
