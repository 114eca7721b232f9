"""``autograd.grad(..., create_graph=True)``: gradients that are themselves recorded arrays.

The ordinary backward pass runs each node's vector-Jacobian product on raw arrays, which is what
keeps it fast, but leaves nothing to differentiate again. With ``create_graph`` the pass below
walks the same nodes and computes each product with ``nd`` ops instead, inside
``autograd.record()``, so the gradients it returns carry a graph (a gradient penalty then
back-propagates through them).

Which op made a node is read from its vjp: the vjp functions are closures of a few known
functions (``_unary``, ``_binary``, ``_reduce``, ``dot``, ``_fully_connected``, ...), and their
closed-over values (the element-wise gradient rule, the reduced axes, the transposes) say the
rest. Reading it there, instead of storing an op tag on every node, keeps ordinary recording
exactly as cheap as before. The ops covered are those MXNet 1.9.1 gives a differentiable
gradient (its tests/python/unittest/test_higher_order_grad.py: the trigonometric and hyperbolic
functions and their inverses, log/log2/log10/log1p, expm1, exp, square, sqrt, cbrt, rsqrt,
rcbrt, reciprocal, abs, clip, relu, sigmoid, tanh, Dropout, FullyConnected, element-wise
arithmetic), and a few more MXNet lacks there: +, -, *, /, ** between arrays of any broadcast
(MXNet's broadcast ops are not twice differentiable), maximum, minimum, negation, softrelu,
sum, mean, dot and reshape-like views. Any other node raises ``NotImplementedError`` naming the
op.
"""
from __future__ import annotations

import types

import numpy

from .. import autograd as _ag
from . import ndarray as _core
from . import ops as _ops
from .ndarray import NDArray, _wrap

__all__ = ["grad_with_graph"]


def _inner_code(func, name):
    """The code object of the function ``name`` defined inside ``func``."""
    for const in func.__code__.co_consts:
        if isinstance(const, types.CodeType) and const.co_name == name:
            return const
    raise LookupError("%s defines no %s" % (func.__qualname__, name))


def _inner_codes(func):
    return [c for c in func.__code__.co_consts if isinstance(c, types.CodeType)]


def _closure(fn) -> dict:
    cells = fn.__closure__ or ()
    return dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in cells)))


def _const(raw, like):
    """A raw array (a mask, say) as a constant NDArray beside ``like``."""
    return _wrap(raw, like._ctx)


def _unbroadcast(g, shape):
    """``g`` summed down to ``shape`` (the inverse of broadcasting), with nd ops."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shape)
                                      if n == 1 and g.shape[i + lead] != 1)
    if axes:
        g = _ops.sum(g, axis=axes, keepdims=True)
    return _ops.reshape(g, shape if shape else (1,))


# ---------------------------------------------------------------------- element-wise rules
def _unary_rules():
    """{code object of an op's gradient rule: f(g, x, rule's closure) -> input gradient}."""
    ln2, ln10 = float(numpy.log(2.0)), float(numpy.log(10.0))
    rules = {
        _ops.exp: lambda g, x, c: g * _ops.exp(x),
        _ops.expm1: lambda g, x, c: g * _ops.exp(x),
        _ops.log: lambda g, x, c: g / x,
        _ops.log2: lambda g, x, c: g / (x * ln2),
        _ops.log10: lambda g, x, c: g / (x * ln10),
        _ops.log1p: lambda g, x, c: g / (x + 1),
        _ops.sqrt: lambda g, x, c: g / (2 * _ops.sqrt(x)),
        _ops.rsqrt: lambda g, x, c: -0.5 * g * _ops.rsqrt(x) / x,
        _ops.cbrt: lambda g, x, c: g / (3 * _ops.square(_ops.cbrt(x))),
        _ops.rcbrt: lambda g, x, c: -g * _ops.rcbrt(x) / (3 * x),
        _ops.abs: lambda g, x, c: g * _const(_ops.sign(x)._data, x),
        _ops.reciprocal: lambda g, x, c: -g / _ops.square(x),
        _ops.sin: lambda g, x, c: g * _ops.cos(x),
        _ops.cos: lambda g, x, c: -(g * _ops.sin(x)),
        _ops.tan: lambda g, x, c: g / _ops.square(_ops.cos(x)),
        _ops.sinh: lambda g, x, c: g * _ops.cosh(x),
        _ops.cosh: lambda g, x, c: g * _ops.sinh(x),
        _ops.arcsin: lambda g, x, c: g / _ops.sqrt(1 - _ops.square(x)),
        _ops.arccos: lambda g, x, c: -g / _ops.sqrt(1 - _ops.square(x)),
        _ops.arctan: lambda g, x, c: g / (1 + _ops.square(x)),
        _ops.arcsinh: lambda g, x, c: g / _ops.sqrt(_ops.square(x) + 1),
        _ops.arccosh: lambda g, x, c: g / _ops.sqrt(_ops.square(x) - 1),
        _ops.arctanh: lambda g, x, c: g / (1 - _ops.square(x)),
        _ops.radians: lambda g, x, c: g * float(numpy.pi / 180),
        _ops.degrees: lambda g, x, c: g * float(180 / numpy.pi),
        _ops.softrelu: lambda g, x, c: g * _ops.sigmoid(x),
        _ops.clip: lambda g, x, c: g * _const(((x._data >= c["lo"]) & (x._data <= c["hi"]))
                                              .astype(x._data.dtype), x),
    }
    table = {}
    for op, rule in rules.items():
        for code in _inner_codes(op):
            table[code] = rule
    table[_ops._square_grad.__code__] = lambda g, x, c: 2 * g * x
    table[_ops._tanh_grad.__code__] = lambda g, x, c: g * (1 - _ops.square(_ops.tanh(x)))
    table[_ops._sigmoid_grad.__code__] = \
        lambda g, x, c: (lambda s: g * s * (1 - s))(_ops.sigmoid(x))
    table[_ops._relu_grad.__code__] = \
        lambda g, x, c: g * _const((x._data > 0).astype(x._data.dtype), x)
    table[_ops._zero_grad.__code__] = lambda g, x, c: _ops.zeros_like(x)
    return table


def _binary_rules():
    """{the ``_g_*`` gradient function: f(g, a, b, out) -> (ga, gb)} for two arrays."""
    def pow_rule(g, a, b, out):
        return g * b * a ** (b - 1), g * (a ** b) * _ops.log(a)

    def max_rule(g, a, b, out):
        mask = (a._data >= b._data)
        return (g * _const(mask.astype(a.dtype), a), g * _const((~mask).astype(a.dtype), a))

    def min_rule(g, a, b, out):
        mask = (a._data <= b._data)
        return (g * _const(mask.astype(a.dtype), a), g * _const((~mask).astype(a.dtype), a))
    return {
        _core._g_add: lambda g, a, b, out: (g, g),
        _core._g_sub: lambda g, a, b, out: (g, -g),
        _core._g_mul: lambda g, a, b, out: (g * b, g * a),
        _core._g_div: lambda g, a, b, out: (g / b, -(g * a) / (b * b)),
        _core._g_pow: pow_rule,
        _core._g_max: max_rule,
        _core._g_min: min_rule,
    }


def _scalar_rules():
    """{``_g_*`` function: f(g, a, c) -> ga} for an array ``a`` and a number ``c``."""
    return {
        _core._g_add: lambda g, a, c: g,
        _core._g_sub: lambda g, a, c: g,
        _core._g_mul: lambda g, a, c: g * c,
        _core._g_div: lambda g, a, c: g / c,
        _core._g_pow: lambda g, a, c: g * c * a ** (c - 1),
        _core._g_rsub: lambda g, a, c: -g,
        _core._g_rdiv: lambda g, a, c: -(g * c) / _ops.square(a),
        _core._g_rpow: lambda g, a, c: g * (c ** a) * float(numpy.log(c)),
        _core._g_max: lambda g, a, c: g * _const((a._data >= c).astype(a.dtype), a),
        _core._g_min: lambda g, a, c: g * _const((a._data <= c).astype(a.dtype), a),
    }


# ---------------------------------------------------------------------- per-vjp handlers
def _h_unary(node, env, g):
    grad = env["grad"]
    rule = _UNARY.get(grad.__code__)
    if rule is None:
        return None
    return (rule(g, node.inputs[0], _closure(grad)),)


def _h_binary(node, env, g):
    rule = _BINARY.get(env["grads"])
    if rule is None:
        return None
    a, b = node.inputs
    ga, gb = rule(g, a, b, None)
    return _unbroadcast(ga, a.shape), _unbroadcast(gb, b.shape)


def _h_binary_scalar(node, env, g):
    rule = _SCALAR.get(env["grads"])
    if rule is None:
        return None
    a = node.inputs[0]
    return (_unbroadcast(rule(g, a, env["bd"]), a.shape),)


def _h_reduce(node, env, g):
    x = node.inputs[0]
    grad = env["grad"]
    if grad not in (_ops._sum_grad, _ops._mean_grad):
        return None
    g = _ops.broadcast_to(_ops.reshape(g, env["kshape"]), x.shape)
    if grad is _ops._mean_grad:
        count = 1
        for i in env["axes"]:
            count *= x.shape[i]
        g = g / count
    return (g,)


def _h_neg(node, env, g):
    return (-g,)


def _h_dot(node, env, g):
    lhs, rhs = node.inputs
    ta, tb = env["transpose_a"], env["transpose_b"]
    a2 = _ops.reshape(lhs, (lhs.shape[0], -1) if ta else (-1, lhs.shape[-1]))
    b2 = _ops.reshape(rhs, (-1, rhs.shape[-1]) if tb else (rhs.shape[0], -1))
    am = _ops.transpose(a2) if ta else a2
    bm = _ops.transpose(b2) if tb else b2
    g2 = _ops.reshape(g, (am.shape[0], bm.shape[1]))
    gam = _ops.dot(g2, bm, transpose_b=True)
    gbm = _ops.dot(am, g2, transpose_a=True)
    ga = _ops.reshape(_ops.transpose(gam) if ta else gam, lhs.shape)
    gb = _ops.reshape(_ops.transpose(gbm) if tb else gbm, rhs.shape)
    return ga, gb


def _h_fully_connected(node, env, g):
    data, weight = node.inputs[0], node.inputs[1]
    if env["relu"]:
        g = g * _const((env["out"] > 0).astype(g.dtype), g)
    units = weight.shape[0]
    x2 = _ops.reshape(data, env["x2"].shape)
    g2 = _ops.reshape(g, (-1, units))
    gx = _ops.reshape(_ops.dot(g2, weight), data.shape)
    gw = _ops.dot(g2, x2, transpose_a=True)
    if len(node.inputs) == 3:
        return gx, gw, _ops.sum(g2, axis=0)
    return gx, gw


def _h_shape(node, env, g):
    """Reshape-like views: the gradient is the head's, in the input's shape."""
    x = node.inputs[0]
    return (_ops.reshape(g, x.shape),)


def _h_dropout(node, env, g):
    """Dropout: the same mask again (identity outside training)."""
    mask = env.get("mask")
    return (g if mask is None else g * _const(mask, g),)


def _handlers():
    table = {
        _inner_code(_ops._unary, "<lambda>"): _h_unary,
        _inner_code(_core._binary, "vjp"): _h_binary,
        _inner_code(_core._binary, "vjp1"): _h_binary_scalar,
        _inner_code(_ops._reduce, "vjp"): _h_reduce,
        _inner_code(NDArray.__neg__, "<lambda>"): _h_neg,
        _inner_code(_ops.dot, "vjp"): _h_dot,
        _inner_code(_ops._fully_connected, "vjp"): _h_fully_connected,
    }
    for code in _inner_codes(_ops._shape_op):
        table[code] = _h_shape
    from . import nn as _nn
    for code in _inner_codes(_nn.Dropout):
        table[code] = _h_dropout
    return table


_UNARY = _BINARY = _SCALAR = _HANDLERS = None


def _tables():
    global _UNARY, _BINARY, _SCALAR, _HANDLERS
    if _HANDLERS is None:
        _UNARY, _BINARY, _SCALAR = _unary_rules(), _binary_rules(), _scalar_rules()
        _HANDLERS = _handlers()
    return _HANDLERS


def _node_grads(node, g):
    vjp = node.vjp
    if vjp is None:
        raise RuntimeError("the graph was already freed by an earlier backward(); "
                           "pass retain_graph=True to differentiate through it twice")
    handler = _tables().get(vjp.__code__)
    result = None if handler is None else handler(node, _closure(vjp), g)
    if result is None and getattr(vjp, "cached_plan_of", None) is not None:
        raise NotImplementedError(
            "autograd.grad(create_graph=True): %r ran from its cached plan (hybridize()), whose "
            "gradient is not differentiable again, as MXNet's CachedOp's is not; call "
            "hybridize(False) on it to record its ops one by one" % vjp.cached_plan_of)
    if result is None:
        raise NotImplementedError(
            "autograd.grad(create_graph=True): the gradient of the op recorded by %s is not "
            "differentiable here (supported: element-wise arithmetic, exp, log, sqrt, square, "
            "trigonometric and hyperbolic functions, sigmoid, tanh, relu, softrelu, clip, "
            "Dropout, sum, mean, dot, FullyConnected, reshape)"
            % vjp.__qualname__.split(".<locals>")[0])
    return result


def grad_with_graph(heads, variables, head_grads, train_mode):
    """The gradients of ``heads`` with respect to ``variables`` as recorded NDArrays
    (``head_grads``: NDArrays, None for ones)."""
    node_grads, var_grads = {}, {}
    for head, hg in zip(heads, head_grads):
        if hg is None:
            hg = _ops.ones_like(head)
        if head._node is not None:
            prev = node_grads.get(head._node)
            node_grads[head._node] = hg if prev is None else prev + hg
        elif head._grad is not None:
            prev = var_grads.get(id(head))
            var_grads[id(head)] = hg if prev is None else prev + hg
        else:
            raise ValueError(
                "cannot differentiate: the head array was not computed inside autograd.record() "
                "from an array with attach_grad()")
    with _ag.record(train_mode):
        for node in _ag._topological_nodes(heads):
            g = node_grads.pop(node, None)
            if g is None:
                continue
            for x, gx in zip(node.inputs, _node_grads(node, g)):
                if gx is None or (x._node is None and x._grad is None):
                    continue
                if x._node is not None:
                    prev = node_grads.get(x._node)
                    node_grads[x._node] = gx if prev is None else prev + gx
                else:
                    prev = var_grads.get(id(x))
                    var_grads[id(x)] = gx if prev is None else prev + gx
    out = []
    for v in variables:
        g = var_grads.get(id(v))
        out.append(g if g is not None else _ops.zeros_like(v))
    return out
