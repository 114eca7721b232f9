"""``mx.contrib.io.DataLoaderIter``: a Gluon ``DataLoader`` as an ``mx.io.DataIter``.

As MXNet's: the first batch fixes ``batch_size``, ``provide_data`` and ``provide_label``
(``data_name``/``label_name``, in ``dtype``); each batch's data and label are cast to ``dtype``;
a shorter last batch is filled up to ``batch_size`` and ``pad`` says by how many. The filling is
zeros in ``dtype`` (MXNet's is uninitialised memory, and float32 whatever ``dtype`` is).
"""
from __future__ import annotations

from ..io import DataDesc, DataIter
from ..ndarray import creation

__all__ = ["DataLoaderIter"]


class DataLoaderIter(DataIter):
    """Batches of ``loader`` (yielding ``(data, label)``) through the ``DataIter`` protocol."""

    def __init__(self, loader, data_name="data", label_name="softmax_label", dtype="float32"):
        super().__init__()
        self._loader = loader
        self._iter = iter(loader)
        try:
            data, label = next(self._iter)
        except StopIteration:
            raise ValueError("DataLoaderIter: the loader gives no batch") from None
        self.batch_size = data.shape[0]
        self.dtype = dtype
        self.provide_data = [DataDesc(data_name, data.shape, dtype)]
        self.provide_label = [DataDesc(label_name, label.shape, dtype)]
        self._current_batch = None
        self.reset()

    def reset(self):
        self._iter = iter(self._loader)

    def iter_next(self):
        self._current_batch = next(self._iter, None)
        return self._current_batch is not None

    def _filled(self, array):
        array = array.astype(self.dtype)
        if array.shape[0] == self.batch_size:
            return [array]
        full = creation.zeros((self.batch_size,) + array.shape[1:], ctx=array.context,
                              dtype=self.dtype)
        full[:array.shape[0]] = array
        return [full]

    def getdata(self):
        return self._filled(self._current_batch[0])

    def getlabel(self):
        return self._filled(self._current_batch[1])

    def getpad(self):
        return self.batch_size - self._current_batch[0].shape[0]

    def getindex(self):
        return None
