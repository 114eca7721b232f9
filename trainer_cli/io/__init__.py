"""``mx.io``: MXNet's data iterators (``NDArrayIter``, ``CSVIter``, ``MNISTIter``), the
wrappers (``ResizeIter``, ``PrefetchingIter``) and their batch types.

MXNet's C++ record iterators (``ImageRecordIter``, ``LibSVMIter``, ...) are not provided: naming
one says so (docs/porting.md).
"""
from ..base import missing_attribute
from .csv_iter import CSVIter
from .data_batch import DataBatch, DataDesc, DataIter
from .mnist_iter import MNISTIter
from .ndarray_iter import NDArrayIter
from .wrappers import PrefetchingIter, ResizeIter

__all__ = ["DataBatch", "DataDesc", "DataIter", "NDArrayIter", "CSVIter", "MNISTIter",
           "ResizeIter", "PrefetchingIter"]

_ABSENT = {
    "MXDataIter": "C++ data iterator wrapper", "ImageRecordIter": "RecordIO image iterator",
    "ImageRecordUInt8Iter": "RecordIO image iterator", "ImageRecordInt8Iter": "RecordIO image iterator",
    "ImageDetRecordIter": "RecordIO detection iterator", "LibSVMIter": "LibSVM file iterator",
}


def __getattr__(name):
    raise missing_attribute(__name__, name, _ABSENT)
