"""Datasets, samplers and the DataLoader (``gluon.data``)."""
from .dataloader import DataLoader, default_batchify_fn
from .dataset import ArrayDataset, Dataset, SimpleDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler
