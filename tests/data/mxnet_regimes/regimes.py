"""Cases in the regimes where a formula's details show, written once against MXNet's API.

``run_all(mx)`` runs every case with ``mx`` the ``mxnet`` module (``make_regimes.py``, in a venv
with MXNet 1.9.1, records ``regimes.json``) or the ``trainer_cli`` module (the test replays the
same code and compares): Gluon code that runs by changing only its import.

The regimes:

* small gradients (``|g|^2`` far below eps, magnitudes from 1e-6 to 1e-2): where eps goes inside
  or outside a square root, and which of the two it is added to, decides the step (AdaGrad dense
  and row_sparse, Adam, RMSProp, AdaDelta, Nadam, FTML, LAMB);
* per-Parameter ``lr_mult`` / ``wd_mult`` through ``gluon.Trainer``, with one and two devices and
  each way the Trainer updates (its own updaters, or the kvstore's), including a weight with no
  gradient and ``wd_mult=0`` that must not move;
* ``clip_global_norm`` on arrays whose norm is small enough for its epsilon (1e-8) to show;
* a learning rate of +0.0 and -0.0 on weights of both signed zeros (the signs of the results);
* float16 weights with ``multi_precision``: steps below float16's resolution that only the
  float32 master copy keeps;
* SGD after an infinite gradient: the weights it makes infinite turn NaN at the next step, the
  decay term computed at wd=0 too; NAG without momentum and LBSGD, whose single-tensor update
  scales the weight by ``1 - lr*wd`` instead (other roundings, infinities kept); Signum, whose
  sign of NaN and of -0.0 is +0.0, and whose momentum state rounds as MXNet's product
  ``(1-momentum)*rescale_grad*g`` does;
* every deterministic optimizer's weights and states with a rescale_grad that rounds (0.3), with
  and without clipping and decay: a product formed in another order than MXNet's shows in the
  state before it reaches the weight; and on float16 weights with and without
  multi_precision, the states' dtypes included.

Inputs come from ``numpy.random.RandomState`` (whose streams NumPy keeps fixed across versions)
and are recorded beside the results, so that a drift of the inputs shows as such.
"""
import numpy as np

STEPS = 3


def _tolist(x):
    return np.asarray(x).astype(np.float64).tolist()


def _mixed_magnitudes(rng, shape):
    """Gaussian values scaled by 10**U(-6, -2): gradients whose squares are far below eps."""
    return (rng.randn(*shape) * 10.0 ** rng.uniform(-6, -2, shape)).astype(np.float32)


SMALL_GRAD_OPTIMIZERS = [
    ("adagrad", {}), ("adagrad", {"eps": 1e-5, "wd": 1e-3}), ("adam", {}),
    ("adam", {"epsilon": 1e-6}), ("rmsprop", {}), ("rmsprop", {"centered": True}),
    ("adadelta", {}), ("nadam", {}), ("ftml", {}), ("lamb", {}),
]


def small_gradients(mx):
    cases = {}
    for name, params in SMALL_GRAD_OPTIMIZERS:
        rng = np.random.RandomState(1)
        w0 = rng.randn(3, 4).astype(np.float32)
        grads = [_mixed_magnitudes(rng, (3, 4)) for _ in range(STEPS)]
        opt = mx.optimizer.create(name, learning_rate=0.01, **params)
        updater = mx.optimizer.get_updater(opt)
        w = mx.nd.array(w0)
        weights = []
        for g in grads:
            updater(0, mx.nd.array(g), w)
            weights.append(_tolist(w.asnumpy()))
        key = name + "".join("_%s=%g" % kv for kv in sorted(params.items()))
        cases[key] = {"inputs": [_tolist(w0)] + [_tolist(g) for g in grads], "weights": weights}
    return cases


def small_gradients_row_sparse(mx):
    """AdaGrad with row_sparse gradients (MXNet's sparse adagrad_update: the rows present)."""
    cases = {}
    for eps, clip in ((1e-7, None), (1e-5, None), (1e-7, 1e-3)):
        rng = np.random.RandomState(2)
        w0 = rng.randn(6, 5).astype(np.float32)
        steps = []
        for rows in ([0, 2, 5], [1, 2], [0, 3, 4, 5]):
            steps.append((rows, _mixed_magnitudes(rng, (len(rows), 5))))
        opt = mx.optimizer.create("adagrad", learning_rate=0.05, eps=eps, clip_gradient=clip)
        updater = mx.optimizer.get_updater(opt)
        w = mx.nd.array(w0)
        weights = []
        for rows, values in steps:
            g = mx.nd.sparse.row_sparse_array((mx.nd.array(values), mx.nd.array(rows, dtype="int64")),
                                              shape=w0.shape)
            updater(0, g, w)
            weights.append(_tolist(w.asnumpy()))
        cases["adagrad_eps=%g%s" % (eps, "" if clip is None else "_clip=%g" % clip)] = {
            "inputs": [_tolist(w0)] + [[rows, _tolist(v)] for rows, v in steps],
            "weights": weights}
    return cases


# (name, lr_mult, wd_mult, gradient coefficient scale): "still" has no gradient and wd_mult=0.
MULTIPLIER_PARAMS = [("plain", 1.0, 1.0, 1.0), ("half_lr_no_wd", 0.5, 0.0, 1.0),
                     ("double_lr_triple_wd", 2.0, 3.0, 1.0), ("still", 1.0, 0.0, 0.0),
                     ("decay_only", 1.0, 2.0, 0.0)]
TRAINER_FLOWS = [(1, "device", None), (2, "device", None), (2, "device", False),
                 (2, "local", True), (2, "local", False)]
TRAINER_OPTIMIZERS = [("sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.05}),
                      ("adam", {"learning_rate": 0.01, "wd": 0.05}),
                      ("rmsprop", {"learning_rate": 0.01, "wd": 0.05})]


def trainer_multipliers(mx):
    cases = {}
    for opt_name, opt_params in TRAINER_OPTIMIZERS:
        for num_ctx, kvstore, update_on_kvstore in TRAINER_FLOWS:
            rng = np.random.RandomState(3)
            ctxs = [mx.cpu(i) for i in range(num_ctx)]
            params, coefs, inits = [], [], []
            for name, lr_mult, wd_mult, scale in MULTIPLIER_PARAMS:
                init = np.ones((2, 3), np.float32) if name == "still" else \
                    rng.randn(2, 3).astype(np.float32)
                coef = [(rng.randn(2, 3) * scale).astype(np.float32) for _ in ctxs]
                p = mx.gluon.Parameter("regime_" + name, shape=(2, 3), lr_mult=lr_mult,
                                       wd_mult=wd_mult)
                p.initialize(ctx=ctxs)
                p.set_data(mx.nd.array(init))
                params.append(p)
                coefs.append(coef)
                inits.append(_tolist(init))
            trainer = mx.gluon.Trainer(params, opt_name, dict(opt_params), kvstore=kvstore,
                                       update_on_kvstore=update_on_kvstore)
            weights = []
            for step in range(STEPS):
                for k, ctx in enumerate(ctxs):
                    with mx.autograd.record():
                        loss = None
                        for p, coef in zip(params, coefs):
                            term = (p.data(ctx) * mx.nd.array(coef[k] * (step + 1), ctx=ctx)).sum()
                            loss = term if loss is None else loss + term
                    loss.backward()
                trainer.step(2)
                weights.append([_tolist(p.data(ctxs[0]).asnumpy()) for p in params])
            key = "%s_ctx%d_%s_uok=%s" % (opt_name, num_ctx, kvstore, update_on_kvstore)
            cases[key] = {"inputs": inits, "weights": weights}
    return cases


def clip_global_norm(mx):
    cases = {}
    for scale, max_norm in [(1e-6, 5e-7), (1e-4, 5e-5), (1e-3, 5e-4), (1.0, 0.5), (1e-3, 1.0)]:
        rng = np.random.RandomState(4)
        arrays = [(rng.randn(3, 4) * scale).astype(np.float32),
                  (rng.randn(5) * scale).astype(np.float32)]
        nds = [mx.nd.array(a) for a in arrays]
        total = mx.gluon.utils.clip_global_norm(nds, max_norm)
        cases["scale=%g_max=%g" % (scale, max_norm)] = {
            "inputs": [_tolist(a) for a in arrays], "total_norm": float(total),
            "arrays": [_tolist(x.asnumpy()) for x in nds]}
    return cases


def zero_rates(mx):
    """lr of +0.0 and -0.0: the results' zeros keep the signs IEEE arithmetic gives them."""
    cases = {}
    w0 = np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, 0.0, -0.0], np.float32)
    g0 = np.array([1.0, 1.0, -1.0, -1.0, 0.0, -0.0, 0.0, -0.0], np.float32)
    for name, params in [("sgd", {}), ("sgd", {"momentum": 0.9}), ("sgd", {"wd": 0.1}),
                         ("sgd", {"momentum": 0.9, "wd": 0.1}), ("adam", {}), ("nag", {"momentum": 0.9}),
                         ("nag", {}), ("lbsgd", {})]:
        for lr in (0.0, -0.0):
            for calls in ("per_param", "grouped"):
                opt = mx.optimizer.create(name, learning_rate=lr, **params)
                updater = mx.optimizer.get_updater(opt)
                ws = [mx.nd.array(w0), mx.nd.array(-w0)]
                weights = []
                for step in range(2):
                    gs = [mx.nd.array(g0), mx.nd.array(g0[::-1].copy())]
                    if calls == "grouped":
                        updater([0, 1], gs, ws)
                    else:
                        for i, (g, w) in enumerate(zip(gs, ws)):
                            updater(i, g, w)
                    weights.append([_tolist(w.asnumpy()) for w in ws])
                key = "%s%s_lr=%r_%s" % (name, "".join("_%s=%g" % kv for kv in sorted(params.items())),
                                         lr, calls)
                cases[key] = {"weights": weights}
    return cases


def nonfinite_sgd(mx):
    """An infinite gradient, then finite ones: MXNet's SGD computes its decay term ``lr*wd*w``
    also at wd=0, so an infinite weight turns NaN at its next step (0 * inf)."""
    cases = {}
    w0 = np.array([1.0, -2.0, 0.0, 3.0, -0.0, 5.0], np.float32)
    first = np.array([np.inf, -np.inf, np.inf, 0.5, -np.inf, np.nan], np.float32)
    later = np.array([0.5, 0.5, -np.inf, 0.5, 0.5, 0.5], np.float32)
    for params in ({}, {"momentum": 0.9}, {"wd": 0.01}, {"momentum": 0.9, "wd": 0.01},
                   {"clip_gradient": 1.0}):
        for calls in ("per_param", "grouped"):
            opt = mx.optimizer.create("sgd", learning_rate=0.1, rescale_grad=0.5, **params)
            updater = mx.optimizer.get_updater(opt)
            ws = [mx.nd.array(w0), mx.nd.array(w0[::-1].copy())]
            weights = []
            for step in range(3):
                g = first if step == 0 else later
                gs = [mx.nd.array(g), mx.nd.array(g[::-1].copy())]
                if calls == "grouped":
                    updater([0, 1], gs, ws)
                else:
                    for i, (gi, w) in enumerate(zip(gs, ws)):
                        updater(i, gi, w)
                weights.append([_tolist(w.asnumpy()) for w in ws])
            key = "sgd%s_%s" % ("".join("_%s=%g" % kv for kv in sorted(params.items())), calls)
            cases[key] = {"weights": weights}
    return cases


def single_tensor_sgd(mx):
    """NAG without momentum and LBSGD run MXNet's single-tensor ``sgd_update``, whose weight decay
    is a factor, ``(1 - lr*wd)*w - lr*g``: rounded otherwise than SGD's ``w - lr*wd*w - lr*g``,
    and an infinite weight stays infinite."""
    rng = np.random.RandomState(3)
    w0 = rng.randn(40).astype(np.float32)
    g0 = rng.randn(40).astype(np.float32)
    g0[:3] = [np.inf, -np.inf, np.nan]
    cases = {}
    for name in ("nag", "lbsgd"):
        for params in ({"wd": 0.013}, {"wd": 0.013, "clip_gradient": 0.5}, {}):
            opt = mx.optimizer.create(name, learning_rate=0.37, rescale_grad=0.7, **params)
            updater = mx.optimizer.get_updater(opt)
            w = mx.nd.array(w0)
            weights = []
            for step in range(2):
                updater(0, mx.nd.array(g0 if step == 0 else g0[::-1].copy()), w)
                weights.append(_tolist(w.asnumpy()))
            cases[name + "".join("_%s=%g" % kv for kv in sorted(params.items()))] = {
                "weights": weights}
    return cases


def signum_signs(mx):
    """Signum and signSGD where the sign is taken of zeros, infinities and NaN: MXNet's sign is
    +0.0 for a zero of either sign and for NaN, so a NaN momentum leaves the weight where it is."""
    w0 = np.array([1.0, -2.0, 0.0, -0.0, 0.0, -0.0, 5.0, 0.25], np.float32)
    first = np.array([np.inf, -np.inf, np.inf, 0.0, -0.0, 0.5, np.nan, -0.0], np.float32)
    later = np.array([0.5, 0.5, -np.inf, 0.0, -0.0, -0.0, 0.5, 0.0], np.float32)
    cases = {}
    for params in ({}, {"momentum": 0.0}, {"wd": 0.01, "wd_lh": 0.02}):
        opt = mx.optimizer.create("signum", learning_rate=0.1, rescale_grad=0.5, **params)
        updater = mx.optimizer.get_updater(opt)
        w = mx.nd.array(w0)
        weights = []
        for step in range(3):
            updater(0, mx.nd.array(first if step == 0 else later), w)
            weights.append(_tolist(w.asnumpy()))
        cases["signum" + "".join("_%s=%g" % kv for kv in sorted(params.items()))] = {
            "weights": weights}
    return cases


def _trajectory(mx, name, params, w0, grads):
    """The weights and the flattened states after each update of ``w0`` by ``grads`` through
    MXNet's single-tensor updater, and the states' dtypes."""
    opt = mx.optimizer.create(name, learning_rate=0.01, rescale_grad=0.3, **params)
    updater = mx.optimizer.get_updater(opt)
    w = mx.nd.array(w0, dtype=w0.dtype)
    weights, states = [], []
    for g in grads:
        updater(0, mx.nd.array(g, dtype=g.dtype), w)
        weights.append(_tolist(w.asnumpy()))
        states.append([_tolist(x.asnumpy()) for x in _state_arrays(updater.states[0])])
    return weights, states, [np.dtype(x.dtype).name for x in _state_arrays(updater.states[0])]


def _state_arrays(state):
    if state is None:
        return []
    if isinstance(state, (tuple, list)):
        return [x for part in state for x in _state_arrays(part)]
    return [state]


def _key(name, params):
    return name + "".join("_%s=%s" % kv for kv in sorted(params.items()))


def signum_momentum_rounding(mx):
    """Signum's momentum state, where only its sign reaches the weight at first: MXNet forms
    (1-momentum)*rescale_grad before it multiplies the gradient (without clipping), and computes
    the decay term at wd=0 too (an infinite weight then makes its momentum NaN)."""
    cases = {}
    for params in ({}, {"clip_gradient": 0.5}, {"wd": 0.01}, {"wd": 0.01, "clip_gradient": 0.5}):
        rng = np.random.RandomState(11)
        w0 = rng.randn(6, 5).astype(np.float32)
        w0[0, :2] = [np.inf, -np.inf]
        grads = [(3 * rng.randn(6, 5)).astype(np.float32) for _ in range(STEPS)]
        weights, states, _ = _trajectory(mx, "signum", dict(params, momentum=0.9, wd_lh=0.001),
                                         w0, grads)
        key = "signum" + "".join("_%s=%g" % kv for kv in sorted(params.items()))
        cases[key] = {"inputs": [_tolist(w0)] + [_tolist(g) for g in grads],
                      "weights": weights, "states": [s[0] for s in states]}
    return cases


# Every deterministic optimizer with its state kinds (SGLD draws noise; DCASGD with momentum
# fails in MXNet 1.9.1, see docs/compat.md).
STATE_SWEEP = [("sgd", {}), ("sgd", {"momentum": 0.9}), ("nag", {}), ("nag", {"momentum": 0.9}),
               ("adam", {}), ("adagrad", {}), ("adadelta", {}), ("adamax", {}), ("nadam", {}),
               ("ftml", {}), ("ftrl", {}), ("rmsprop", {}), ("rmsprop", {"centered": True}),
               ("signum", {}), ("signum", {"momentum": 0.0}), ("dcasgd", {}), ("lamb", {}),
               ("lars", {}), ("lars", {"momentum": 0.9}), ("lbsgd", {}),
               ("lbsgd", {"momentum": 0.9})]


def _sweep_inputs(dtype):
    rng = np.random.RandomState(3)
    w0 = rng.randn(3, 4).astype(dtype)
    return w0, [(3 * rng.randn(3, 4)).astype(dtype) for _ in range(STEPS)]


def states_rescaled(mx):
    """Every optimizer's weights and states, step by step, with a rescale_grad that rounds
    (0.3): where a product's order differs from MXNet's, the state shows it before the weight."""
    cases = {}
    for name, base in STATE_SWEEP:
        for extra in ({}, {"clip_gradient": 0.5}, {"wd": 0.01}):
            params = dict(base, **extra)
            w0, grads = _sweep_inputs(np.float32)
            weights, states, _ = _trajectory(mx, name, params, w0, grads)
            cases[_key(name, params)] = {"inputs": [_tolist(w0)] + [_tolist(g) for g in grads],
                                         "weights": weights, "states": states}
    return cases


def _dtype_sweep(mx, dtype, variants):
    """Every optimizer of STATE_SWEEP with each of ``variants`` on ``dtype`` weights: weights,
    states and the states' dtypes, or the error MXNet raised."""
    cases = {}
    for name, base in STATE_SWEEP:
        for extra in variants:
            params = dict(base, **extra)
            w0, grads = _sweep_inputs(dtype)
            try:
                weights, states, dtypes = _trajectory(mx, name, params, w0, grads)
            except Exception as exc:    # noqa: BLE001 - what MXNet raised is the record
                cases[_key(name, params)] = {"error": type(exc).__name__}
                continue
            cases[_key(name, params)] = {"weights": weights, "states": states,
                                         "state_dtypes": dtypes}
    return cases


def states_float16(mx):
    """Every optimizer on float16 weights, with and without multi_precision: weights, states and
    the states' dtypes. MXNet 1.9.1 fails in its update operator for some optimizers without
    multi_precision (states made float32 beside a float16 weight): recorded as that error."""
    return _dtype_sweep(mx, np.float16, ({"multi_precision": False},
                                         {"multi_precision": True}))


def states_float64(mx):
    """Every optimizer on float64 weights: MXNet's C++ rules hold their parameters (lr, wd,
    rescale_grad, momentum, betas, epsilon, ...) as float32 fields, widened for the float64
    arithmetic; the rules written in Python (AdaGrad, AdaDelta, Adamax, Nadam, DCASGD) compute
    with Python's doubles. Recorded as for float16 (AdaGrad, AdaDelta, Ftrl and RMSProp fail)."""
    return _dtype_sweep(mx, np.float64, ({}, {"wd": 0.01, "clip_gradient": 0.5}))


def float16_multi_precision(mx):
    cases = {}
    for name, params in [("sgd", {}), ("sgd", {"momentum": 0.9}), ("sgd", {"momentum": 0.9, "wd": 0.01}),
                         ("nag", {"momentum": 0.9}), ("adam", {})]:
        rng = np.random.RandomState(5)
        w0 = (1.0 + 0.1 * rng.randn(4, 3)).astype(np.float16)
        grads = [rng.randn(4, 3).astype(np.float16) for _ in range(6)]
        # Steps of about 1e-4 on weights near 1, where float16's spacing is 1e-3.
        opt = mx.optimizer.create(name, learning_rate=1e-4, multi_precision=True, **params)
        updater = mx.optimizer.get_updater(opt)
        w = mx.nd.array(w0, dtype="float16")
        weights = []
        for g in grads:
            updater(0, mx.nd.array(g, dtype="float16"), w)
            weights.append(_tolist(w.asnumpy()))
        key = name + "".join("_%s=%g" % kv for kv in sorted(params.items()))
        cases[key] = {"inputs": [_tolist(w0)] + [_tolist(g) for g in grads], "weights": weights}
    return cases


# Schedulers on their default arguments and at the edges of their ranges (the other golden
# cases pass every argument explicitly).
SCHEDULERS = [
    ("FactorScheduler", {"step": 2}), ("FactorScheduler", {"step": 1, "factor": 0.0}),
    ("PolyScheduler", {"max_update": 10}),
    ("MultiFactorScheduler", {"step": [1, 4], "warmup_steps": 3, "warmup_mode": "constant",
                              "warmup_begin_lr": 0.001}),
    ("PolyScheduler", {"max_update": 6, "warmup_steps": 4, "warmup_mode": "constant",
                       "warmup_begin_lr": 0.001}),
    ("CosineScheduler", {"max_update": 5, "warmup_steps": 4, "final_lr": 0.1}),
    ("CosineScheduler", {"max_update": 1}),
    ("FactorScheduler", {"step": 3, "warmup_steps": 2, "warmup_begin_lr": 0.01,
                         "base_lr": 0.01}),
]


def lr_scheduler_edges(mx):
    cases = {}
    for name, params in SCHEDULERS:
        sched = getattr(mx.lr_scheduler, name)(**params)
        key = name + "".join("_%s=%s" % kv for kv in sorted(params.items()))
        cases[key] = {"lr": [float(sched(n)) for n in range(12)]}
    return cases


REGIMES = {"small_gradients": small_gradients,
           "small_gradients_row_sparse": small_gradients_row_sparse,
           "trainer_multipliers": trainer_multipliers, "clip_global_norm": clip_global_norm,
           "zero_rates": zero_rates, "float16_multi_precision": float16_multi_precision,
           "lr_scheduler_edges": lr_scheduler_edges, "nonfinite_sgd": nonfinite_sgd,
           "single_tensor_sgd": single_tensor_sgd, "signum_signs": signum_signs,
           "signum_momentum_rounding": signum_momentum_rounding,
           "states_rescaled": states_rescaled, "states_float16": states_float16,
           "states_float64": states_float64}


def run_all(mx):
    return {name: run(mx) for name, run in REGIMES.items()}
