"""Run configs: the pydantic schema, YAML loading with positions, ``-o`` overrides, and error
reports that name the file, line, column and key of every problem at once.

Typical use::

    from trainer_cli.config import load_config, ConfigError
    try:
        cfg = load_config("configs/mlp.yaml", ["optimizer.params.learning_rate=0.1"])
    except ConfigError as err:
        print(err)          # one paragraph per problem; exit code 2
    text = cfg.resolved_yaml()
"""
from .errors import ConfigError, ConfigIssue
from .load import load_config, validate_config_data, validate_config_text
from .resolved import json_schema, resolved_dict, resolved_yaml
from .schema import (CheckpointSection, CompressionSection, CsvData, DataSection,
                     EarlyStoppingSection, InitSection, KeepBestSection, KVStoreSection,
                     LossSection, LRSchedulerSection, MetricSection, ModelSection, NpyData, NpzData,
                     OptimizerSection, RunConfig, SklearnData, SplitSection, SyntheticData)

__all__ = [
    "ConfigError", "ConfigIssue", "load_config", "validate_config_text", "validate_config_data",
    "json_schema", "resolved_dict", "resolved_yaml", "RunConfig", "ModelSection", "InitSection",
    "DataSection", "SyntheticData", "NpzData", "NpyData", "CsvData", "SklearnData", "SplitSection",
    "LossSection", "MetricSection", "OptimizerSection", "LRSchedulerSection", "KVStoreSection",
    "CompressionSection", "EarlyStoppingSection", "CheckpointSection", "KeepBestSection",
]
