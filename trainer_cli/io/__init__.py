"""``mx.io``: MXNet's data iterators (``NDArrayIter``, ``CSVIter``, ``MNISTIter``,
``ImageRecordIter``, ``ImageRecordUInt8Iter``, ``LibSVMIter``), the wrappers (``ResizeIter``,
``PrefetchingIter``) and their batch types.

MXNet's other C++ iterators (``ImageDetRecordIter``, ...) are not provided: naming one says so
(docs/porting.md).
"""
from ..base import missing_attribute
from .csv_iter import CSVIter
from .data_batch import DataBatch, DataDesc, DataIter
from .image_record_iter import ImageRecordIter, ImageRecordUInt8Iter
from .libsvm_iter import LibSVMIter
from .mnist_iter import MNISTIter
from .ndarray_iter import NDArrayIter
from .wrappers import PrefetchingIter, ResizeIter

__all__ = ["DataBatch", "DataDesc", "DataIter", "NDArrayIter", "CSVIter", "MNISTIter",
           "ImageRecordIter", "ImageRecordUInt8Iter", "LibSVMIter", "ResizeIter", "PrefetchingIter"]

_ABSENT = {
    "MXDataIter": "C++ data iterator wrapper", "ImageRecordInt8Iter": "RecordIO image iterator "
    "(int8 output: use ImageRecordIter or ImageRecordUInt8Iter)",
    "ImageDetRecordIter": "RecordIO detection iterator",
}


def __getattr__(name):
    raise missing_attribute(__name__, name, _ABSENT)
