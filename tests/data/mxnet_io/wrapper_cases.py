"""``mx.io.ResizeIter`` and ``mx.io.PrefetchingIter`` as MXNet 1.9.1 runs them, written once
against MXNet's API (``record(mx)``): the batches (data, label, pad) of two epochs of a shorter
and a longer resize, with and without ``reset_internal``, and of a prefetch over two iterators
with renamed data and labels.

    /tmp/mxvenv/bin/python tests/data/mxnet_io/make_wrappers.py

records ``wrappers.json``; tests/test_io_wrappers.py replays ``record`` with trainer_cli."""
import numpy as np


def _epochs(it, count=2):
    out = []
    for _ in range(count):
        epoch = []
        for batch in it:
            epoch.append({"data": [d.asnumpy().tolist() for d in batch.data],
                          "label": [l.asnumpy().tolist() for l in batch.label or []],
                          "pad": batch.pad})
        out.append(epoch)
        it.reset()
    return out


def record(mx):
    data = np.arange(20, dtype=np.float32).reshape(10, 2)
    label = np.arange(10, dtype=np.float32)
    out = {}

    def base(**kw):
        return mx.io.NDArrayIter(data, label, batch_size=3, **kw)
    out["resize_longer"] = _epochs(mx.io.ResizeIter(base(), 6))
    out["resize_shorter"] = _epochs(mx.io.ResizeIter(base(), 2))
    out["resize_no_reset"] = _epochs(mx.io.ResizeIter(base(), 2, reset_internal=False), 3)
    out["resize_pad"] = _epochs(mx.io.ResizeIter(base(last_batch_handle="pad"), 5))
    resized = mx.io.ResizeIter(base(), 3)
    out["resize_provide"] = [[d.name, list(d.shape)] for d in resized.provide_data + resized.provide_label]
    first = mx.io.NDArrayIter(data, label, batch_size=4, last_batch_handle="pad")
    second = mx.io.NDArrayIter(data * 10, label * 10, batch_size=4, last_batch_handle="pad",
                               data_name="other", label_name="other_label")
    prefetch = mx.io.PrefetchingIter([first, second],
                                     rename_data=[{"data": "a"}, {"other": "b"}],
                                     rename_label=[{"softmax_label": "la"},
                                                   {"other_label": "lb"}])
    out["prefetch_provide"] = [[d.name, list(d.shape)]
                               for d in prefetch.provide_data + prefetch.provide_label]
    out["prefetch_batch_size"] = prefetch.batch_size
    out["prefetch"] = _epochs(prefetch)
    single = mx.io.PrefetchingIter(mx.io.NDArrayIter(data, label, batch_size=5))
    out["prefetch_single"] = _epochs(single)
    return out
