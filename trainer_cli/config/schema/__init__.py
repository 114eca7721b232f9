"""The pydantic schema of a run config; ``RunConfig`` is the whole file."""
from .base import Section
from .component import Component, NamedComponent
from .data import (DATASET_TYPES, SKLEARN_SETS, CsvData, DataSection, Dataset, NpyData, NpzData,
                   SklearnData, SplitSection, SyntheticData)
from .model import InitSection, ModelSection
from .objective import LossSection, MetricSection
from .optim import (COMPRESSION_TYPES, KVSTORE_TYPES, CompressionSection, KVStoreSection,
                    LRSchedulerSection, OptimizerSection)
from .run import RunConfig
from .training import CheckpointSection, EarlyStoppingSection, KeepBestSection

__all__ = [
    "RunConfig", "Section", "Component", "NamedComponent", "ModelSection", "InitSection",
    "DataSection", "Dataset", "SyntheticData", "NpzData", "NpyData", "CsvData", "SklearnData",
    "SplitSection", "LossSection", "MetricSection", "OptimizerSection", "LRSchedulerSection",
    "KVStoreSection", "CompressionSection", "EarlyStoppingSection", "CheckpointSection",
    "KeepBestSection", "DATASET_TYPES", "SKLEARN_SETS", "KVSTORE_TYPES", "COMPRESSION_TYPES",
]
