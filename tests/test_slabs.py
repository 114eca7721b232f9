"""Parameters, gradients and optimizer states packed into large buffers (``ndarray.slabs``)."""
import gc
import threading
import weakref

import numpy
import pytest

from trainer_cli import autograd, gluon, nd, optimizer
from trainer_cli.context import cpu
from trainer_cli.ndarray import slabs
from trainer_cli.ndarray.slabs import MIN_BYTES, Slabs

BIG = MIN_BYTES // 4 * 3          # float32 elements: above the packing threshold
SMALL = MIN_BYTES // 4 // 2


def _address(a):
    return a.__array_interface__["data"][0]


def test_large_arrays_are_packed_aligned_and_staggered():
    pool = Slabs(stagger=1024)
    first = pool.zeros((BIG,), numpy.float32, cpu())._data
    second = pool.zeros((3, BIG), numpy.float64, cpu())._data
    assert first.base is not None and first.base is second.base      # one buffer
    assert first.flags.c_contiguous and first.flags.writeable and second.shape == (3, BIG)
    assert _address(first) % 4096 == 1024
    assert _address(second) % 64 == 0
    assert _address(second) >= _address(first) + first.nbytes
    assert not first.any() and not second.any()


def test_an_array_of_whole_pages_is_followed_by_a_gap():
    # Two streams starting at the same offset within a page alias each other in the CPU.
    pool = Slabs()
    pages = pool.zeros((MIN_BYTES // 4,), numpy.float32, cpu())._data      # 16 pages
    after = pool.zeros((BIG,), numpy.float32, cpu())._data
    gap = (_address(after) - _address(pages)) % 4096
    assert 1024 <= gap <= 4096 - 1024


def test_small_and_huge_arrays_get_their_own_memory():
    pool = Slabs()
    small = pool.zeros((SMALL,), numpy.float32, cpu())._data
    assert small.base is None and not small.any()
    huge = pool.zeros((slabs.MAX_SLAB // 4 + 1,), numpy.float32, cpu())._data
    assert huge.base is None and huge.size == slabs.MAX_SLAB // 4 + 1


def test_copy_keeps_values_dtype_and_shape():
    pool = Slabs()
    source = nd.array(numpy.arange(2 * BIG, dtype=numpy.float64).reshape(2, BIG), dtype=numpy.float64)
    copy = pool.copy(source, cpu())
    assert copy._data.base is not None and copy.dtype == numpy.float64
    assert numpy.array_equal(copy.asnumpy(), source.asnumpy())
    copy[:] = 0                       # a copy, not a view of the source
    assert source.asnumpy()[1, 5] == BIG + 5


def test_a_full_buffer_is_freed_with_its_last_array():
    pool = Slabs()
    arrays = [pool.zeros((slabs.FIRST_SLAB // 8,), numpy.float32, cpu()) for _ in range(2)]
    buffer = weakref.ref(arrays[0]._data.base)
    # Fill it and move on to the next buffer.
    later = [pool.zeros((slabs.FIRST_SLAB // 8,), numpy.float32, cpu()) for _ in range(2)]
    assert later[-1]._data.base is not buffer()
    del arrays
    gc.collect()
    assert buffer() is None
    assert later[0]._data.base is not None


def test_threads_never_get_overlapping_arrays():
    pool, out = Slabs(), []

    def take():
        for _ in range(20):
            out.append(pool.zeros((BIG,), numpy.float32, cpu())._data)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spans = sorted((_address(a), _address(a) + a.nbytes) for a in out)
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))


@pytest.fixture
def fresh_slabs(monkeypatch):
    """Empty slabs of each kind, as in a new process: which arrays share a buffer depends on
    what earlier tests left in the process-wide ones (a buffer can fill between two states)."""
    from trainer_cli.gluon import parameter
    from trainer_cli.optimizer import updater
    for module, name in ((parameter, "_DATA_SLABS"), (parameter, "_GRAD_SLABS"),
                         (optimizer.optimizer, "STATE_SLABS"), (updater, "STATE_SLABS")):
        old = getattr(module, name)
        if name == "STATE_SLABS" and module is updater:
            monkeypatch.setattr(module, name, optimizer.optimizer.STATE_SLABS)
        else:
            monkeypatch.setattr(module, name, Slabs(stagger=old._stagger))


def test_parameters_gradients_and_states_live_in_their_own_buffers(fresh_slabs):
    net = gluon.nn.Dense(BIG // 8, in_units=8)
    net.initialize()
    w = net.weight
    data, grad = w.data()._data, w.grad()._data
    assert data.base is not None and grad.base is not None and data.base is not grad.base
    assert (_address(grad) - _address(data)) % 4096 != 0
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 0.1})
    with autograd.record():
        loss = net(nd.ones((2, 8))).sum()
    loss.backward()
    trainer.step(2)
    mean, var = trainer._updaters[0].states[trainer._param2idx[w.name]]
    assert mean._data.base is not None and mean._data.base is var._data.base
    assert mean._data.base is not data.base
    # set_data writes into the packed buffer, not a new array.
    w.set_data(nd.ones(w.shape))
    assert w.data()._data is data and data.min() == 1


def test_loaded_states_are_packed_too(tmp_path):
    net = gluon.nn.Dense(BIG // 8, in_units=8)
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    for _ in range(2):
        with autograd.record():
            loss = net(nd.ones((2, 8))).sum()
        loss.backward()
        trainer.step(2)
    path = str(tmp_path / "states")
    trainer.save_states(path)
    index = trainer._param2idx[net.weight.name]
    before = trainer._updaters[0].states[index].asnumpy()
    trainer.load_states(path)
    with autograd.record():
        loss = net(nd.ones((2, 8))).sum()
    loss.backward()
    loaded = trainer._updaters[0].states[index]
    assert numpy.array_equal(loaded.asnumpy(), before)
    assert loaded._data.base is not optimizer.optimizer.STATE_SLABS._buffer
    trainer.step(2)
    state = trainer._updaters[0].states[index]
    assert state._data.base is not None and state._data.base is optimizer.optimizer.STATE_SLABS._buffer
    assert not numpy.array_equal(state.asnumpy(), before)


def test_a_gradient_starts_a_stagger_after_its_weight_when_the_slabs_have_diverged():
    # Weights without gradients (BatchNorm's running statistics, frozen layers) take room in the
    # weights' slab only; the gradients that follow must still not alias their weights.
    for rows in (BIG // 8 + 3, BIG // 8 + 77):
        frozen = gluon.Parameter("frozen%d" % rows, shape=(rows, 8), grad_req="null")
        frozen.initialize()
        net = gluon.nn.Dense(BIG // 8, in_units=8)
        net.initialize()
        data, grad = net.weight.data()._data, net.weight.grad()._data
        assert (_address(grad) - _address(data)) % 4096 == 1024
