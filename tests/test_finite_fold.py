"""The NaN/Inf check folded into the optimizer's kernels: once a training loop asks the Updater
whether an update's arrays are finite, Adam's kernels tell, from the values in their registers,
whether every gradient they read and every value they wrote was finite; the numbers stay bitwise
those of the kernels that do not look, and the answer stays the full check's (tensors no kernel
took, and rules without a checking loop, are read again after the update)."""
import numpy
import pytest

from trainer_cli import nd
from trainer_cli.ndarray.interop import raw
from trainer_cli.optimizer import Updater, create, kernels as _fused

pytest.importorskip("numba")

CASES = [
    ("adam", {"learning_rate": 0.01, "wd": 1e-3, "rescale_grad": 1 / 64}),
    ("adam", {"learning_rate": 0.01, "clip_gradient": 0.5}),
    ("adamw", {"learning_rate": 0.01, "wd": 1e-2, "clip_gradient": 0.5}),
]


def _tensors(seed):
    """Sizes around the kernels' stretch of 1024, both float dtypes, and two tensors no kernel
    takes (strided)."""
    rng = numpy.random.default_rng(seed)
    sizes = [(3000,), (1024,), (1023,), (40, 50), (7,), (2049,)]
    dtypes = [numpy.float32, numpy.float32, numpy.float64, numpy.float32, numpy.float32,
              numpy.float64]
    weights = [rng.standard_normal(s).astype(t) for s, t in zip(sizes, dtypes)]
    weights.append(rng.standard_normal(128).astype(numpy.float64)[::2])
    weights.append(rng.standard_normal(600).astype(numpy.float32)[::2])
    grads = [(rng.standard_normal(w.shape) * 3).astype(w.dtype) for w in weights]
    return weights, grads


def _updater(name, params, weights, grads):
    opt = create(name, **params)
    updater = Updater(opt)
    ws = [nd.array(w, dtype=w.dtype) for w in weights]
    gs = [nd.array(g, dtype=g.dtype) for g in grads]
    for w, a in zip(ws, weights):
        if not a.flags.c_contiguous:        # nd.array copies: put a strided view back
            spread = numpy.zeros(a.size * 2, a.dtype)
            spread[::2] = a
            w._data = spread[::2]
    return updater, ws, gs


def _everything(updater, ws):
    arrays = [w.asnumpy() for w in ws]
    for i in sorted(updater.states):
        state = updater.states[i]
        for leaf in state if isinstance(state, tuple) else [state]:
            if leaf is not None:
                arrays.append(leaf.asnumpy())
    return arrays


@pytest.mark.parametrize("threads", ["1", "3"])
@pytest.mark.parametrize("name,params", CASES)
def test_watched_updates_are_bitwise_the_unwatched_ones(fused_on, name, params, threads):
    fused_on.setattr(_fused, "PARALLEL_MIN_SIZE", 0)
    fused_on.setenv("TRAINER_NUM_THREADS", threads)
    weights, grads = _tensors(1)
    results = []
    for watched in (False, True):
        updater, ws, gs = _updater(name, params, weights, grads)
        indices = list(range(len(ws)))
        with numpy.errstate(all="ignore"):
            for _ in range(4):
                updater(indices, gs, ws)
                if watched:
                    assert updater.updated_finite(with_grads=True) is True
        step = updater._last.step
        assert step.watch is watched
        if watched:     # the kernels looked at every tensor they took, and found nothing
            (groups, rest), = step._splits.values()
            taken = {p for group in groups for p in group[0]}
            assert step.seen == (0, taken) and taken | set(rest) == set(indices)
            assert sorted(not step.weights[p].flags.c_contiguous for p in indices) == \
                [False] * 6 + [True] * 2 and all(not step.weights[p].flags.c_contiguous
                                                 for p in rest)
        results.append(_everything(updater, ws))
    for a, b in zip(*results):
        numpy.testing.assert_array_equal(a.view(numpy.uint8), b.view(numpy.uint8))


def _watched(name, params, weights, grads):
    updater, ws, gs = _updater(name, params, weights, grads)
    indices = list(range(len(ws)))
    updater(indices, gs, ws)
    assert updater.updated_finite() is True          # from here on the kernels count
    return updater, ws, gs, indices


@pytest.mark.parametrize("name,params", CASES)
def test_the_kernels_count_every_nan_they_read_or_wrote(fused_on, name, params):
    weights, grads = _tensors(2)
    updater, ws, gs, indices = _watched(name, params, weights, grads)
    raw(gs[0])[[5, 1500, 2999]] = numpy.nan            # three NaN gradients in one stretch and two
    with numpy.errstate(all="ignore"):
        updater(indices, gs, ws)
    assert updater._last.step.seen[0] >= 1              # spans that met one
    assert updater.updated_finite() is False
    assert updater.updated_finite(with_grads=True) is False


@pytest.mark.parametrize("clip", [None, 1.0])
def test_an_update_that_overflows_is_found_by_the_kernel(fused_on, clip):
    # Finite in, inf out: the second moment of a huge gradient (the weight itself stays finite).
    weights, grads = _tensors(3)
    updater, ws, gs, indices = _watched("adam", {"learning_rate": 0.01, "clip_gradient": clip},
                                        weights, grads)
    raw(gs[3])[0, 0] = 3e30 if clip is None else numpy.inf    # clipped to 1: only g is not
    with numpy.errstate(all="ignore"):
        updater(indices, gs, ws)
    assert updater._last.step.seen[0] == 1
    assert updater.updated_finite(with_grads=True) is False
    assert updater.updated_finite() is (clip is not None)     # the update itself was finite
    assert numpy.isfinite(raw(ws[3])).all()


def test_a_rule_without_a_checking_loop_leaves_the_answer_to_the_full_check(fused_on):
    weights, grads = _tensors(5)
    updater, ws, gs, indices = _watched("sgd", {"learning_rate": 1.0, "momentum": 0.9},
                                        weights, grads)
    raw(ws[3])[0, 0], raw(gs[3])[0, 0] = 3e38, -3e38
    updater(indices, gs, ws)
    assert updater._last.step.watch and updater._last.step.seen is None
    assert updater.updated_finite() is False


@pytest.mark.parametrize("position", [6, 7])
def test_tensors_no_kernel_took_are_read_again(fused_on, position):
    weights, grads = _tensors(4)
    updater, ws, gs, indices = _watched("adam", {"learning_rate": 0.01}, weights, grads)
    raw(gs[position])[1] = numpy.inf          # strided: the NumPy body's tensors
    with numpy.errstate(all="ignore"):
        updater(indices, gs, ws)
    assert updater._last.step.seen[0] == 0
    assert updater.updated_finite() is False
    assert updater.updated_finite(with_grads=True) is False


def test_a_state_outside_the_kernels_arrays_is_not_counted_as_looked_at(fused_on):
    from trainer_cli.optimizer.optimizer import PreparedStep
    from trainer_cli.optimizer import sgd
    w, g, m = (numpy.ones(2048, numpy.float32) for _ in range(3))
    step = PreparedStep([w], [g], [m])
    step.split(sgd.SGD_KERNEL, lambda: ([w], [g]))        # a kernel that leaves the state out
    step.saw(sgd.SGD_KERNEL, [0], 0)
    assert step.seen == (0, frozenset())
