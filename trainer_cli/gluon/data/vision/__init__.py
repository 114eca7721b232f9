"""``gluon.data.vision``: image data sets read from local files, and image transforms."""
from . import transforms
from .datasets import (CIFAR10, CIFAR100, MNIST, DatasetFileError, FashionMNIST,
                       ImageFolderDataset, ImageListDataset)
from .image_file import ImageFileError

__all__ = ["MNIST", "FashionMNIST", "CIFAR10", "CIFAR100", "ImageFolderDataset",
           "ImageListDataset", "transforms", "DatasetFileError", "ImageFileError"]


def __getattr__(name):
    if name == "ImageRecordDataset":
        from ....base import NotInTrainerCLIError, absent_message
        raise NotInTrainerCLIError(absent_message(__name__ + "." + name,
                                                  "RecordIO image data set"))
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
