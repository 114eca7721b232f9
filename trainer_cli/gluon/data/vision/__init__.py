"""``gluon.data.vision``: image data sets read from local files, and image transforms."""
from . import transforms
from .datasets import (CIFAR10, CIFAR100, MNIST, DatasetFileError, FashionMNIST,
                       ImageFolderDataset, ImageListDataset, ImageRecordDataset)
from .image_file import ImageFileError

__all__ = ["MNIST", "FashionMNIST", "CIFAR10", "CIFAR100", "ImageFolderDataset",
           "ImageListDataset", "ImageRecordDataset", "transforms", "DatasetFileError",
           "ImageFileError"]
