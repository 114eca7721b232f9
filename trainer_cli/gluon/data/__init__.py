"""Datasets, samplers and the DataLoader (``gluon.data``); ``vision``: image data sets and
transforms (loaded on first use)."""
import importlib

from .dataloader import DataLoader, default_batchify_fn
from .dataset import ArrayDataset, Dataset, RecordFileDataset, SimpleDataset
from .sampler import BatchSampler, FilterSampler, RandomSampler, Sampler, SequentialSampler


def __getattr__(name):
    if name == "vision":
        module = importlib.import_module(".vision", __name__)
        globals()["vision"] = module
        return module
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
