"""The numba kernels of the optimizer rules give bitwise the numbers of the NumPy bodies.

The NumPy body is the reference (the golden tests run on it); a kernel only moves the same
element-wise operations into one pass, so every case here compares raw bits, NaN and infinities
included. Skipped where numba is not installed.
"""
import itertools
import os
import select
import signal
import subprocess
import sys

import numpy
import pytest

import trainer_cli
from trainer_cli import _jit
from trainer_cli.optimizer import adam, kernels as _fused, sgd

numba = pytest.importorskip("numba")

SIZE = 5000     # above the MIN_SIZE the tests set, below the default one


def _data(dtype, seed, positive=False):
    rng = numpy.random.default_rng(seed)
    a = rng.standard_normal(SIZE) * 10.0 ** rng.integers(-8, 4, SIZE)
    special = [numpy.nan, numpy.inf, -numpy.inf, 0.0, -0.0, 1e-45, -1e-45, 3e38, -3e38, 1e-38,
               0.5, 2.0, -7.0, 1e20, -1e20]
    a[:len(special)] = special
    a = a.astype(dtype)
    return numpy.abs(a) if positive else a


def _bits(a):
    return a.view(numpy.uint32 if a.dtype == numpy.float32 else numpy.uint64)


def _both_ways(monkeypatch, rule, arrays, **kw):
    """Run ``rule`` on copies through NumPy (kernels out of reach) and through the kernel."""
    numpy_side = [a.copy() for a in arrays]
    fused_side = [a.copy() for a in arrays]
    with numpy.errstate(all="ignore"):
        monkeypatch.setattr(_fused, "MIN_SIZE", 1 << 60)
        rule(*numpy_side, **kw)
        monkeypatch.setattr(_fused, "MIN_SIZE", 1024)
        rule(*fused_side, **kw)
    for x, y in zip(numpy_side, fused_side):
        numpy.testing.assert_array_equal(_bits(x), _bits(y))


DTYPES = [numpy.float32, numpy.float64]
CLIPS = [None, 0.5]
WDS = [0.0, 1e-3]
RESCALES = [1.0, 1 / 64, 0.37]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_sgd_kernel_is_bitwise_the_numpy_rule(fused_on, dtype, momentum):
    for k, (clip, wd, rescale) in enumerate(itertools.product(CLIPS, WDS, RESCALES)):
        arrays = [_data(dtype, 3 * k), _data(dtype, 3 * k + 1)]
        if momentum:
            arrays.append(_data(dtype, 3 * k + 2))

        def rule(w, g, mom=None, **kw):
            sgd.sgd_rule(w, g, mom, **kw)
        _both_ways(fused_on, rule, arrays, lr=0.1, wd=wd, momentum=momentum, rescale=rescale,
                   clip=clip)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("which", ["adam", "adamw"])
def test_adam_kernels_are_bitwise_the_numpy_rules(fused_on, dtype, which):
    for k, (clip, wd, rescale) in enumerate(itertools.product(CLIPS, WDS, RESCALES)):
        arrays = [_data(dtype, 4 * k), _data(dtype, 4 * k + 1), _data(dtype, 4 * k + 2),
                  _data(dtype, 4 * k + 3, positive=True)]
        common = dict(wd=wd, beta1=0.9, beta2=0.999, epsilon=1e-8, rescale=rescale, clip=clip)
        if which == "adam":
            _both_ways(fused_on, adam.adam_rule, arrays, lr=1.23e-3, **common)
        else:
            _both_ways(fused_on, adam.adamw_rule, arrays, eta=1.23e-3, **common)


def test_kernels_leave_layouts_they_do_not_handle_to_numpy(fused_on):
    fused_on.setattr(_fused, "MIN_SIZE", 16)
    w = numpy.ones(64, numpy.float32)
    kernel = sgd.SGD_KERNEL
    assert kernel.fits(w, numpy.ones(64, numpy.float32))
    assert not kernel.fits(w, numpy.ones(64, numpy.float64))             # mixed dtypes
    assert not kernel.fits(w, numpy.ones(128, numpy.float32)[::2])       # strided
    assert kernel.fits(w[:32], numpy.ones(32, numpy.float32))            # a view, apart
    assert not kernel.fits(w[:48], w[16:])                               # partial overlap
    assert not kernel.fits(numpy.ones(8, numpy.float32), numpy.ones(8, numpy.float32))  # small
    assert not kernel.fits(numpy.ones(64, numpy.float16), numpy.ones(64, numpy.float16))


def test_trainer_numbers_do_not_depend_on_numba(tmp_path):
    """A few Adam and SGD steps through gluon.Trainer, with kernels and with TRAINER_NO_NUMBA=1."""
    script = r"""
import sys, numpy
from trainer_cli import autograd, gluon, nd
from trainer_cli.optimizer import kernels
kernels.MIN_SIZE = 256
out = {}
for name, params in [("adam", {"learning_rate": 0.01, "wd": 0.01, "clip_gradient": 0.5}),
                     ("sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.001})]:
    net = gluon.nn.Dense(32, in_units=20)
    net.initialize()
    for i, p in enumerate(net.collect_params().values()):
        p.set_data(nd.array(numpy.random.RandomState(i).standard_normal(p.shape)))
    trainer = gluon.Trainer(net.collect_params(), name, params)
    x = nd.array(numpy.random.RandomState(7).standard_normal((16, 20)))
    for _ in range(3):
        with autograd.record():
            loss = (net(x) ** 2).mean()
        loss.backward()
        trainer.step(16)
    for p in net.collect_params().values():
        out[name + p.name] = p.data().asnumpy()
numpy.savez(sys.argv[1], **out)
from trainer_cli.optimizer import adam, sgd
print("compiled", adam.ADAM_KERNEL.cpu._compiled is not None,
      sgd.SGD_MOM_KERNEL.cpu._compiled is not None)
"""
    results = []
    for flag in ("0", "1"):
        path = tmp_path / ("numba%s.npz" % flag)
        env = dict(os.environ, TRAINER_NO_NUMBA=flag)
        proc = subprocess.run([sys.executable, "-c", script, str(path)], check=True, env=env,
                              capture_output=True, text=True)
        assert proc.stdout.split()[-2:] == (["True", "True"] if flag == "0" else ["False", "False"])
        results.append(numpy.load(path))
    with_numba, without = results
    assert sorted(with_numba.files) == sorted(without.files)
    for key in with_numba.files:
        numpy.testing.assert_array_equal(with_numba[key].view(numpy.uint32),
                                         without[key].view(numpy.uint32))


def test_no_numba_switch_turns_kernels_off(monkeypatch):
    monkeypatch.setattr(_jit, "_numba", None)
    monkeypatch.setenv("TRAINER_NO_NUMBA", "1")
    assert not _fused.enabled()
    monkeypatch.setattr(_fused, "MIN_SIZE", 16)
    w = numpy.ones(64, numpy.float32)
    assert not sgd.SGD_KERNEL.fits(w, numpy.ones(64, numpy.float32))


# ----------------------------------------------------------------------------- many tensors
def _tensor_set(seed):
    """Weights and gradients of mixed sizes, shapes and dtypes, one strided (NumPy path)."""
    rng = numpy.random.default_rng(seed)
    shapes = [(40, 50), (7,), (1,), (300,), (20, 30), (3, 4, 5), (2000,), (64,)]
    dtypes = [numpy.float32, numpy.float32, numpy.float32, numpy.float64, numpy.float32,
              numpy.float64, numpy.float32, numpy.float16]
    weights = [rng.standard_normal(s).astype(t) for s, t in zip(shapes, dtypes)]
    weights.append(rng.standard_normal(600).astype(numpy.float32)[::2])   # not contiguous
    grads = [(rng.standard_normal(w.shape) * 3).astype(w.dtype) for w in weights]
    return weights, grads


def _run_updates(name, params, weights, grads, steps=3, ctx=None):
    """``steps`` updates of every tensor through an Updater; names give the biases no decay."""
    from trainer_cli import cpu, nd
    from trainer_cli.optimizer import Updater, create
    ctx = ctx or cpu(0)
    idx2name = {i: ("p%d_bias" if i % 3 == 1 else "p%d_weight") % i for i in range(len(weights))}
    opt = create(name, param_idx2name=idx2name, **params)
    opt.set_lr_mult({2: 0.5})
    updater = Updater(opt)
    ws = [nd.array(w, dtype=w.dtype, ctx=ctx) for w in weights]
    gs = [nd.array(g, dtype=g.dtype, ctx=ctx) for g in grads]
    for w, a in zip(ws, weights):
        if not a.flags.c_contiguous:        # nd.array copies: put a strided view back
            spread = ctx.xp.zeros(a.size * 2, a.dtype)
            spread[::2] = ctx.xp.asarray(a)
            w._data = spread[::2]
    for _ in range(steps):
        updater(list(range(len(ws))), gs, ws)
    return [w.asnumpy() for w in ws], updater


MULTI_CASES = [
    ("sgd", {"learning_rate": 0.1, "wd": 1e-3}),
    ("sgd", {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3, "clip_gradient": 0.5}),
    ("adam", {"learning_rate": 0.01, "wd": 1e-3, "rescale_grad": 1 / 64}),
    ("adam", {"learning_rate": 0.01, "clip_gradient": 0.5}),
    ("adamw", {"learning_rate": 0.01, "wd": 1e-2, "clip_gradient": 0.5}),
]


@pytest.mark.filterwarnings("ignore:Accumulating with float16")
@pytest.mark.parametrize("name,params", MULTI_CASES)
def test_multi_tensor_kernels_are_bitwise_the_numpy_rules(fused_on, name, params):
    weights, grads = _tensor_set(1)
    with numpy.errstate(all="ignore"):
        fused_on.setattr(_fused, "MIN_SIZE", 1 << 60)
        reference, _ = _run_updates(name, params, weights, grads)
        fused_on.setattr(_fused, "MIN_SIZE", 256)
        fused, updater = _run_updates(name, params, weights, grads)
    prepared, = updater._prepared.values()          # the Updater's prepared step...
    (groups, rest), = prepared.step._splits.values()     # ...and its kernel groups
    # float32 and float64 groups; the float16 and the strided tensors step through NumPy.
    assert sorted(len(group[0]) for group in groups) == [2, 5]
    assert len(rest) == 2
    for a, b in zip(reference, fused):
        assert a.dtype == b.dtype
        numpy.testing.assert_array_equal(a.view(numpy.uint8), b.view(numpy.uint8))


def test_small_models_never_load_numba(fused_on):
    fused_on.setattr(_jit, "_numba", None)
    weights, grads = _tensor_set(2)
    _run_updates("sgd", {"momentum": 0.9}, weights[:3], grads[:3])      # 2 500 values in all
    assert _jit._numba is None


def test_an_inlined_helper_is_a_different_build():
    # numba's disk cache keys a loop by its own file and name: the name's digest must change
    # when a helper goes from called to inlined, or a stale build would be reused.
    def loop(x):
        x[0] += 1.0
    called = _jit.Kernel(loop, {"one": _jit.Kernel(loop)}, qualname="t")
    inlined = _jit.Kernel(loop, {"one": _jit.Kernel(loop, inline=True)}, qualname="t")
    assert called.digest() != inlined.digest()
    assert called.linked().__qualname__ != inlined.linked().__qualname__


def test_row_sparse_only_steps_keep_no_groups():
    from trainer_cli.optimizer.optimizer import PreparedStep, SparseRows
    w = numpy.ones((4, 3), numpy.float32)
    g = SparseRows(numpy.array([1], numpy.int64), numpy.ones((1, 3), numpy.float32), (4, 3))
    step = PreparedStep([w], [g], [None])
    groups, rest = step.split(sgd.SGD_KERNEL, lambda: (step.weights, step.grads))
    assert list(groups) == [] and list(rest) == [0] and not step._splits


def test_kernel_groups_are_kept_by_the_prepared_step_while_the_arrays_are_the_same(fused_on):
    from trainer_cli.optimizer.optimizer import PreparedStep
    fused_on.setattr(_fused, "MIN_SIZE", 16)
    ws = [numpy.ones(32, numpy.float32), numpy.ones((4, 8), numpy.float32)]
    gs = [numpy.ones(32, numpy.float32), numpy.ones((4, 8), numpy.float32)]
    step = PreparedStep(ws, gs, [None, None])
    first = step.split(sgd.SGD_KERNEL, lambda: (step.weights, step.grads))
    assert step.split(sgd.SGD_KERNEL, lambda: (step.weights, step.grads)) is first
    (positions, table, spans), = first[0]
    assert positions == [0, 1] and first[1] == []
    # A row per tensor: its size, then the address of its weight and of its gradient.
    assert table.dtype == numpy.int64
    assert table.tolist() == [[a.size, a.ctypes.data, b.ctypes.data] for a, b in zip(ws, gs)]
    replaced = [numpy.ones(32, numpy.float32), gs[1]]
    step.new_grads(replaced)
    again = step.split(sgd.SGD_KERNEL, lambda: (step.weights, step.grads))
    assert again is not first and again[0][0][1][0, 2] == replaced[0].ctypes.data
    # A gradient overlapping its weight other than exactly is left to NumPy.
    base = numpy.ones(48, numpy.float32)
    groups, rest = _fused.groups(([base[:32]], [base[16:]]))
    assert groups == [] and rest == [0]


def test_spans_cover_every_element_once_in_aligned_shares(monkeypatch):
    monkeypatch.setenv("TRAINER_NUM_THREADS", "3")
    monkeypatch.setattr(_fused, "PARALLEL_MIN_SIZE", 0)
    sizes = [5, 1000, 1, 333, 40]
    spans = _fused._spans(sizes)
    assert len(spans) == 3
    covered = [numpy.zeros(s, int) for s in sizes]
    for part in spans:
        for k, start, stop in part:
            covered[k][start:stop] += 1
    assert all((c == 1).all() for c in covered)
    share = -(-sum(sizes) // 3)
    share += -share % 16
    assert [int((p[:, 2] - p[:, 1]).sum()) for p in spans[:-1]] == [share, share]
    monkeypatch.setattr(_fused, "PARALLEL_MIN_SIZE", 1 << 60)
    assert len(_fused._spans(sizes)) == 1


@pytest.mark.parametrize("name,params", MULTI_CASES[1:3])
def test_threads_do_not_change_a_number(fused_on, name, params):
    weights, grads = _tensor_set(4)
    fused_on.setattr(_fused, "MIN_SIZE", 256)
    fused_on.setattr(_fused, "PARALLEL_MIN_SIZE", 0)
    results = []
    with numpy.errstate(all="ignore"):
        for threads in ("1", "3"):
            fused_on.setenv("TRAINER_NUM_THREADS", threads)
            results.append(_run_updates(name, params, weights[:7], grads[:7])[0])
    for a, b in zip(*results):
        numpy.testing.assert_array_equal(a.view(numpy.uint8), b.view(numpy.uint8))


# ----------------------------------------------------------------------------- GPU kernels
def _gpu_both_ways(monkeypatch, rule, arrays, **kw):
    """``rule`` on CuPy copies through the per-operation path and through the ElementwiseKernel."""
    cupy = pytest.importorskip("cupy")
    unfused = [cupy.asarray(a) for a in arrays]
    fused = [cupy.asarray(a) for a in arrays]
    with monkeypatch.context() as m:
        m.setattr(_fused, "cuda_handles", lambda *a: False)
        rule(*unfused, **kw)
    assert _fused.cuda_handles(*fused)
    rule(*fused, **kw)
    for x, y in zip(unfused, fused):
        numpy.testing.assert_array_equal(_bits(cupy.asnumpy(x)), _bits(cupy.asnumpy(y)))


needs_gpu = pytest.mark.skipif(not trainer_cli.num_gpus(), reason="no GPU visible to CuPy")


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("clip,wd,rescale", list(itertools.product(CLIPS, WDS, RESCALES)))
def test_gpu_sgd_kernel_is_bitwise_the_cupy_rule(monkeypatch, dtype, momentum, clip, wd, rescale):
    arrays = [_data(dtype, 1), _data(dtype, 2)] + ([_data(dtype, 3)] if momentum else [])

    def rule(w, g, mom=None, **kw):
        sgd.sgd_rule(w, g, mom, **kw)
    _gpu_both_ways(monkeypatch, rule, arrays, lr=0.1, wd=wd, momentum=momentum, rescale=rescale,
                   clip=clip)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("which", ["adam", "adamw"])
@pytest.mark.parametrize("clip,wd,rescale", list(itertools.product(CLIPS, WDS, RESCALES)))
def test_gpu_adam_kernels_are_bitwise_the_cupy_rules(monkeypatch, dtype, which, clip, wd, rescale):
    arrays = [_data(dtype, 4), _data(dtype, 5), _data(dtype, 6), _data(dtype, 7, positive=True)]
    common = dict(wd=wd, beta1=0.9, beta2=0.999, epsilon=1e-8, rescale=rescale, clip=clip)
    if which == "adam":
        _gpu_both_ways(monkeypatch, adam.adam_rule, arrays, lr=1.23e-3, **common)
    else:
        _gpu_both_ways(monkeypatch, adam.adamw_rule, arrays, eta=1.23e-3, **common)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("name,params", [("sgd", {"momentum": 0.9, "wd": 1e-4}), ("sgd", {}),
                                         ("adam", {"clip_gradient": 1.0}), ("adamw", {}),
                                         ("rmsprop", {}), ("nag", {"momentum": 0.9})])
def test_gpu_optimizer_steps_never_wait_for_the_device(name, params):
    """An update queues its kernels and returns: no hidden synchronization (an exact overlap test
    or a host read would cost a round trip per tensor; CuPy's shares_memory did, 1 ms each)."""
    import cupyx
    from trainer_cli import gpu, nd, optimizer
    updater = optimizer.get_updater(optimizer.create(name, learning_rate=0.01, **params))
    weights = [nd.array(_data(numpy.float32, k), ctx=gpu(0)) for k in range(4)]
    grads = [nd.array(_data(numpy.float32, 10 + k), ctx=gpu(0)) for k in range(4)]
    updater(list(range(4)), grads, weights)         # states made, kernels compiled
    with cupyx.allow_synchronize(False):
        for _ in range(2):
            updater(list(range(4)), grads, weights)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("name,params", MULTI_CASES)
def test_gpu_multi_tensor_launches_are_bitwise_one_kernel_per_tensor(monkeypatch, name, params):
    """A step's CuPy tensors go through one launch per dtype and distinct row of scalars (here
    three: a halved rate, biases without decay); each tensor comes out as from its own
    ElementwiseKernel. Float16 and a strided view take the per-tensor path."""
    from trainer_cli import gpu
    weights, grads = _tensor_set(8)
    launches = []
    real = _fused._CudaGroup.run
    monkeypatch.setattr(_fused._CudaGroup, "run",
                        lambda self, *a: launches.append(len(self.positions)) or real(self, *a))
    with numpy.errstate(all="ignore"):
        multi, _ = _run_updates(name, params, weights, grads, ctx=gpu(0))
        assert launches and sum(launches) == 3 * 7       # every float32/float64 tensor, 3 steps
        monkeypatch.setattr(_fused, "_cuda_flat", lambda arrays: False)
        single, _ = _run_updates(name, params, weights, grads, ctx=gpu(0))
    for a, b in zip(multi, single):
        numpy.testing.assert_array_equal(a.view(numpy.uint8), b.view(numpy.uint8))


def test_gpu_kernels_are_not_used_for_numpy_arrays():
    assert not _fused.cuda_handles(numpy.ones(4, numpy.float32), numpy.ones(4, numpy.float32))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_splits_updates_with_its_own_threads(fused_on):
    fused_on.setattr(_fused, "MIN_SIZE", 256)
    fused_on.setattr(_fused, "PARALLEL_MIN_SIZE", 0)
    fused_on.setenv("TRAINER_NUM_THREADS", "2")
    weights, grads = _tensor_set(5)
    expected = _run_updates("sgd", {"momentum": 0.9}, weights[:7], grads[:7])[0]   # pool made
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                    # the child: the same update must finish and agree
        try:
            got = _run_updates("sgd", {"momentum": 0.9}, weights[:7], grads[:7])[0]
            ok = all(numpy.array_equal(a, b) for a, b in zip(expected, got))
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    ready, _, _ = select.select([read], [], [], 60)     # a child stuck on dead threads hangs
    if not ready:
        os.kill(pid, signal.SIGKILL)
    answer = os.read(read, 1) if ready else b"hung"
    os.waitpid(pid, 0)
    assert answer == b"1"


@pytest.mark.filterwarnings("ignore:Accumulating with float16")
def test_sgd_scalar_tables_follow_every_change_of_rate(fused_on):
    """The kernel's table of per-tensor scalars is reused only while its values stay the same:
    a schedule changes it at every step, and a rate of -0.0 is not served 0.0's table."""
    from trainer_cli import lr_scheduler
    weights, grads = _tensor_set(3)
    for w, g in zip(weights, grads):
        n = min(3, w.size)
        w.reshape(-1)[:n] = -0.0            # where the sign of a zero step shows
        g.reshape(-1)[:n] = [1.0, -1.0, 0.0][:n]
    cases = [
        {"momentum": 0.9,
         "lr_scheduler": lambda: lr_scheduler.FactorScheduler(step=1, factor=0.5, base_lr=0.1)},
        {"learning_rate": 0.0, "momentum": 0.9},
        {"learning_rate": -0.0, "momentum": 0.9},
        {"learning_rate": -0.0},
        {"learning_rate": 0.0},
    ]
    for case in cases:
        params = {k: v() if callable(v) else v for k, v in case.items()}
        with numpy.errstate(all="ignore"):
            fused_on.setattr(_fused, "MIN_SIZE", 1 << 60)
            reference, _ = _run_updates("sgd", params, weights, grads, steps=4)
            params = {k: v() if callable(v) else v for k, v in case.items()}
            fused_on.setattr(_fused, "MIN_SIZE", 256)
            fused, _ = _run_updates("sgd", params, weights, grads, steps=4)
        for a, b in zip(reference, fused):
            numpy.testing.assert_array_equal(a.view(numpy.uint8), b.view(numpy.uint8))
