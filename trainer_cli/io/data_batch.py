"""``DataDesc``, ``DataBatch`` and the ``DataIter`` protocol, as MXNet 1.9.1's ``mx.io``."""
from __future__ import annotations

from collections import namedtuple

import numpy

__all__ = ["DataDesc", "DataBatch", "DataIter"]


class DataDesc(namedtuple("DataDesc", ["name", "shape"])):
    """The name, shape, dtype and layout of one input or label of a data iterator."""

    def __new__(cls, name, shape, dtype=numpy.float32, layout="NCHW"):
        ret = super(DataDesc, cls).__new__(cls, name, shape)
        ret.dtype = dtype
        ret.layout = layout
        return ret

    def __repr__(self):
        return "DataDesc[%s,%s,%s,%s]" % (self.name, self.shape, self.dtype, self.layout)

    @staticmethod
    def get_batch_axis(layout):
        """The axis of ``layout`` that is the batch (``N``); 0 without a layout."""
        if layout is None:
            return 0
        return layout.find("N")

    @staticmethod
    def get_list(shapes, types):
        """DataDescs from ``(name, shape)`` pairs and, optionally, ``(name, dtype)`` pairs."""
        if types is not None:
            type_dict = dict(types)
            return [DataDesc(x[0], x[1], type_dict[x[0]]) for x in shapes]
        return [DataDesc(x[0], x[1]) for x in shapes]


class DataBatch:
    """One batch: lists of data and label arrays, and ``pad``, the number of examples at its end
    that only fill it up (to be ignored in prediction)."""

    def __init__(self, data, label=None, pad=None, index=None, bucket_key=None,
                 provide_data=None, provide_label=None):
        if data is not None and not isinstance(data, (list, tuple)):
            raise AssertionError("Data must be list of NDArrays")
        if label is not None and not isinstance(label, (list, tuple)):
            raise AssertionError("Label must be list of NDArrays")
        self.data = data
        self.label = label
        self.pad = pad
        self.index = index
        self.bucket_key = bucket_key
        self.provide_data = provide_data
        self.provide_label = provide_label

    def __str__(self):
        data_shapes = [d.shape for d in self.data]
        label_shapes = [lab.shape for lab in self.label] if self.label else None
        return "{}: data shapes: {} label shapes: {}".format(
            self.__class__.__name__, data_shapes, label_shapes)


class DataIter:
    """The iterator protocol of MXNet's data iterators: ``next()`` gives a ``DataBatch`` until
    the data is used up (``StopIteration``); ``reset()`` starts the next pass."""

    def __init__(self, batch_size=0):
        self.batch_size = batch_size

    def __iter__(self):
        return self

    def reset(self):
        pass

    def next(self):
        if self.iter_next():
            return DataBatch(data=self.getdata(), label=self.getlabel(), pad=self.getpad(),
                             index=self.getindex())
        raise StopIteration

    def __next__(self):
        return self.next()

    def iter_next(self):
        pass

    def getdata(self):
        pass

    def getlabel(self):
        pass

    def getindex(self):
        return None

    def getpad(self):
        pass
