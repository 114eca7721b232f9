"""``ndarray.interop``: what it returns, and that the layers above ``ndarray/`` use it instead of an
array's private fields (DESIGN.md, layer 2)."""
import ast
import pathlib

import numpy as np

from trainer_cli import autograd, nd
from trainer_cli.context import cpu
from trainer_cli.ndarray import interop

PACKAGE = pathlib.Path(interop.__file__).resolve().parents[1]
ARRAY_FIELDS = {"_data", "_ctx", "_node", "_grad", "_grad_req", "_fresh_grad", "_xp", "_mark",
                "_receive_grad"}
# Layer 2 itself (ndarray/ and autograd) owns the fields.
OWNERS = ("ndarray/", "autograd.py")
# ``Parameter._data`` (its list of per-device copies) is gluon's own field, not an array's.
PARAMETER_DATA = {("gluon/block.py", "p"), ("gluon/trainer.py", "param"),
                  ("gluon/cached_plan.py", "param"), ("gluon/_shape_inference.py", "param"),
                  ("gluon/symbol_block.py", "param")}


def test_raw_wrap_transfer_share_memory():
    x = nd.array([1.0, 2.0, 3.0])
    data = interop.raw(x)
    assert type(data) is np.ndarray
    data[0] = 7.0
    assert x.asnumpy()[0] == 7.0
    y = interop.wrap(data, cpu())
    assert interop.raw(y) is data and y.context == cpu()
    assert interop.transfer(data, cpu()) is data
    copied = interop.transfer(data, cpu(), copy=True)
    assert copied is not data and np.array_equal(copied, data)
    assert interop.array_module(x) is np


def test_grad_buffer_and_freshness_follow_backward():
    x = nd.array([1.0, 2.0])
    assert interop.grad_buffer(x) is None and not interop.needs_grad(x)
    buf = nd.zeros((2,))
    interop.attach_grad_buffer(x, buf, "add")
    assert interop.grad_buffer(x) is buf and interop.grad_req(x) == "add"
    assert interop.needs_grad(x) and not interop.is_fresh(x)
    for _ in range(2):
        with autograd.record():
            y = (x * x).sum()
        y.backward()
    assert interop.is_fresh(x)
    np.testing.assert_array_equal(buf.asnumpy(), [4.0, 8.0])      # "add" accumulates
    interop.mark_stale(x)
    assert not interop.is_fresh(x)
    interop.attach_grad_buffer(x, None, "null")
    assert interop.grad_buffer(x) is None and interop.grad_req(x) == "null"


def _outside_owners():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith(OWNERS):
            yield rel, ast.parse(path.read_text(), filename=str(path))


def test_no_private_array_field_read_outside_ndarray():
    found = []
    for rel, tree in _outside_owners():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr in ARRAY_FIELDS):
                continue
            base = node.value
            if isinstance(base, ast.Name) and (base.id == "self"
                                               or (rel, base.id) in PARAMETER_DATA):
                continue
            found.append("%s:%d %s" % (rel, node.lineno, ast.unparse(node)))
    assert not found, "private NDArray fields read outside ndarray/: %s" % found


def test_no_private_ndarray_name_imported_outside_ndarray():
    found = []
    for rel, tree in _outside_owners():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and "ndarray" in node.module:
                found += ["%s:%d %s" % (rel, node.lineno, a.name) for a in node.names
                          if a.name.startswith("_")]
    assert not found, "private ndarray names imported outside ndarray/: %s" % found
