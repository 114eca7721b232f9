"""``mx.io.ResizeIter`` and ``mx.io.PrefetchingIter``: MXNet 1.9.1's batches
(tests/data/mxnet_io/wrappers.json, recorded from the real MXNet by the same
``wrapper_cases.record``), an iterator's error raised in the caller's thread, and no reader
thread left behind or left waiting."""
import json
import os
import sys
import threading

import numpy as np
import pytest

import trainer_cli as mx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "data", "mxnet_io"))
import wrapper_cases  # noqa: E402

RECORDED = json.load(open(os.path.join(HERE, "data", "mxnet_io", "wrappers.json")))["cases"]
OURS = wrapper_cases.record(mx)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_each_case_is_mxnets(name):
    assert OURS[name] == RECORDED[name]


class _Breaks(mx.io.DataIter):
    def __init__(self, after):
        super().__init__(batch_size=1)
        self.after, self.count = after, 0
        self.provide_data = [mx.io.DataDesc("data", (1, 2))]
        self.provide_label = []

    def next(self):
        self.count += 1
        if self.count > self.after:
            raise IOError("disk gone at batch %d" % self.count)
        return mx.io.DataBatch([mx.nd.ones((1, 2)) * self.count], [], pad=0)

    def reset(self):
        self.count = 0


def _prefetch_threads():
    return [t for t in threading.enumerate() if t.name == "trainer-cli-prefetch"]


def test_an_iterators_error_reaches_the_caller_and_keeps_reaching_it():
    it = mx.io.PrefetchingIter(_Breaks(2))
    assert [b.data[0].asnumpy()[0, 0] for b in (it.next(), it.next())] == [1, 2]
    for _ in range(2):
        with pytest.raises(IOError, match="disk gone at batch 3"):
            it.next()
    it.reset()
    assert it.next().data[0].asnumpy()[0, 0] == 1


def test_the_end_is_the_end_every_time_and_threads_stop():
    # Other tests' readers may still be ending meanwhile: none of this iterator's may remain.
    before = set(_prefetch_threads())
    it = mx.io.PrefetchingIter(mx.io.NDArrayIter(np.zeros((4, 2)), batch_size=2))
    assert len(list(it)) == 2
    for _ in range(3):
        with pytest.raises(StopIteration):
            it.next()
    for _ in range(3):          # reset mid-epoch: the readers stop and start again
        it.reset()
        it.next()
    del it
    assert not set(_prefetch_threads()) - before


def test_iterators_of_other_lengths_are_refused():
    it = mx.io.PrefetchingIter([mx.io.NDArrayIter(np.zeros((4, 2)), batch_size=2),
                                mx.io.NDArrayIter(np.zeros((2, 2)), batch_size=2)])
    it.next()
    with pytest.raises(ValueError, match="mismatches"):
        it.next()
    with pytest.raises(ValueError):
        mx.io.PrefetchingIter([])


def test_a_resized_epoch_goes_on_where_the_last_stopped_without_reset_internal():
    data = np.arange(10, dtype=np.float32).reshape(5, 2)
    it = mx.io.ResizeIter(mx.io.NDArrayIter(data, batch_size=2, last_batch_handle="discard"),
                          3, reset_internal=False)
    epochs = []
    for _ in range(2):
        epochs.append([b.data[0].asnumpy()[0, 0] for b in it])
        it.reset()
    assert epochs == [[0, 4, 0], [4, 0, 4]]
