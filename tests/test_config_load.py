"""Valid configs in every accepted form, the resolved round trip and the JSON schema."""
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainer_cli.config import (RunConfig, json_schema, load_config,
                                validate_config_data, validate_config_text)

BASE = """\
model: mlp
data: {train: {type: synthetic, task: classification, num_classes: 3}}
loss: softmax_cross_entropy
epochs: 2
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A folder with a config's neighbours: models/mlp.py and a few data files."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "mlp.py").write_text("def build(hidden=8):\n    return hidden\n")
    (tmp_path / "nets.py").write_text("def make_net(width=4):\n    return width\n")
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "train.npz", features=rng.normal(size=(20, 3)), label=np.arange(20) % 2)
    np.savez(tmp_path / "xy.npz", x=np.zeros((4, 2)), y=np.zeros(4))
    np.save(tmp_path / "table.npy", rng.normal(size=(20, 4)))
    np.save(tmp_path / "labels.npy", np.arange(20) % 2)
    (tmp_path / "table.csv").write_text("a,b,target\n1,2,0\n3,4,1\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def load(project, text, name="c.yaml", overrides=()):
    path = project / name
    path.write_text(textwrap.dedent(text))
    return load_config(path, overrides)


def test_minimal_config_gets_documented_defaults(project):
    cfg = load(project, BASE, name="my run.yaml")
    assert cfg.name == "my-run"  # from the file stem, made folder-safe
    assert cfg.run_dir == "runs" and cfg.seed == 0 and cfg.context == ["cpu:0"]
    assert cfg.optimizer.name == "sgd" and cfg.optimizer.params == {}
    assert cfg.kvstore.type == "device" and cfg.kvstore.update_on_kvstore is None
    assert cfg.lr_scheduler is None and cfg.compression is None
    assert cfg.model.init.name == "uniform" and cfg.model.dtype == "float32"
    assert cfg.data.batch_size == 32 and cfg.data.shuffle and cfg.data.last_batch == "keep"
    assert cfg.data.train.num_classes == 3 and cfg.data.train.seed == 0
    assert (cfg.epochs, cfg.steps, cfg.grad_clip, cfg.grad_accumulation) == (2, None, None, 1)
    assert cfg.nan_policy == "stop" and cfg.validate_every == "epoch" and cfg.log_every == 10
    assert cfg.checkpoint.every_epoch and cfg.checkpoint.keep_last == 3
    assert cfg.checkpoint.every_steps is None and cfg.checkpoint.keep_best is None


@pytest.mark.parametrize("text", [
    "optimizer: adam",
    "optimizer: {name: adam, learning_rate: 0.001, beta1: 0.8}",
    "optimizer: {type: adam, learning_rate: 0.001, beta1: 0.8}",
    "optimizer: {name: Adam, params: {learning_rate: 0.001, beta1: 0.8}}",
    "optimizer: {name: adam, learning_rate: 0.001, params: {beta1: 0.8}}",
    "optimizer:\n  type: adam\n  params:\n    learning_rate: 1e-3\n    beta1: 0.8",
])
def test_optimizer_forms_normalize_to_name_and_params(project, text):
    cfg = load(project, BASE + text)
    assert cfg.optimizer.name == "adam"
    assert cfg.optimizer.params in ({}, {"learning_rate": 0.001, "beta1": 0.8})


@pytest.mark.parametrize("text, expected", [
    ("lr_scheduler: {type: factor, step: 10, factor: 0.5}", ("factor", {"step": 10, "factor": 0.5})),
    ("lr_scheduler: {name: multifactor, params: {step: [5, 10], factor: 0.1}}",
     ("multifactor", {"step": [5, 10], "factor": 0.1})),
    ("lr_scheduler: {type: poly, max_update: 100, pwr: 2, warmup_steps: 10}",
     ("poly", {"max_update": 100, "pwr": 2, "warmup_steps": 10})),
    ("lr_scheduler: {type: cosine, max_update: 100, final_lr: 0.0, warmup_begin_lr: 0.001,"
     " warmup_mode: constant, warmup_steps: 5}",
     ("cosine", {"max_update": 100, "final_lr": 0.0, "warmup_begin_lr": 0.001,
                 "warmup_mode": "constant", "warmup_steps": 5})),
])
def test_scheduler_forms(project, text, expected):
    cfg = load(project, BASE + text)
    assert (cfg.lr_scheduler.type, cfg.lr_scheduler.params) == expected


@pytest.mark.parametrize("text, kv, uok", [
    ("kvstore: local", "local", None),
    ("kvstore: {name: dist_sync, update_on_kvstore: false}", "dist_sync", False),
    ("kvstore: {type: dist_device_async, update_on_kvstore: true}", "dist_device_async", True),
    ("kvstore: none", "none", None),
    ("kvstore: null", "none", None),
])
def test_kvstore_forms(project, text, kv, uok):
    cfg = load(project, BASE + text)
    assert (cfg.kvstore.type, cfg.kvstore.update_on_kvstore) == (kv, uok)
    assert cfg.kvstore_type == (None if kv == "none" else kv)


@pytest.mark.parametrize("text, params", [
    ("compression: 2bit", {"type": "2bit", "threshold": 0.5}),
    ("compression: {name: 2bit, threshold: 0.25}", {"type": "2bit", "threshold": 0.25}),
    ("compression: {type: 1bit, threshold: 0}", {"type": "1bit", "threshold": 0.0}),
    ("compression: none", None),
])
def test_compression_forms(project, text, params):
    cfg = load(project, BASE + "context: [cpu:0, cpu:1]\n" + text)
    assert cfg.compression_params == params


@pytest.mark.parametrize("text, expected", [
    ("context: cpu", ["cpu:0"]),
    ("context: gpu", ["gpu:0"]),
    ("context: GPU:1", ["gpu:1"]),
    ("context: 'gpu(2)'", ["gpu:2"]),
    ("context: [cpu:0, cpu:1]", ["cpu:0", "cpu:1"]),
])
def test_context_forms(project, text, expected):
    cfg = load(project, BASE + text)
    assert cfg.context == expected
    assert [str(c) for c in cfg.contexts()] == [d.replace(":", "(") + ")" for d in expected]


def test_model_forms(project):
    cfg = load(project, BASE.replace("model: mlp", "model: {name: nets.py:make_net, args: {width: 3},"
                                                   " init: {name: uniform, scale: 0.07}, dtype: float64}"))
    assert cfg.model.name == f"{project / 'nets.py'}:make_net"  # made absolute for resume
    assert cfg.model.args == {"width": 3} and cfg.model.dtype == "float64"
    assert (cfg.model.init.name, cfg.model.init.params) == ("uniform", {"scale": 0.07})
    cfg = load(project, BASE.replace("model: mlp", "model: {name: mlp, init: xavier}"))
    assert cfg.model.name == "mlp" and cfg.model.init.name == "xavier"


def test_loss_and_metrics_forms(project):
    cfg = load(project, BASE.replace("loss: softmax_cross_entropy",
                                     "loss: {name: huber, rho: 2.0}\nmetrics: mae"))
    assert (cfg.loss.name, cfg.loss.params) == ("huber", {"rho": 2.0})
    assert [m.name for m in cfg.metrics] == ["mae"]
    cfg = load(project, BASE + "metrics: [accuracy, {name: top_k_accuracy, top_k: 2}]")
    assert [(m.name, m.params) for m in cfg.metrics] == [("accuracy", {}),
                                                         ("top_k_accuracy", {"top_k": 2})]


@pytest.mark.parametrize("data, check", [
    ("data: xy.npz", lambda d: (d.train.type, d.train.x, d.train.y) == ("npz", "x", "y")),
    ("data: {path: train.npz, x: features, y: label, batch_size: 4}",
     lambda d: (d.train.type, d.train.x, d.batch_size) == ("npz", "features", 4)),
    ("data: {train: {type: npz, path: train.npz, x: features, y: label},"
     " val: {path: train.npz, x: features, y: label}}",
     lambda d: d.val.type == "npz" and d.has_validation),
    ("data: {train: table.npy}", lambda d: (d.train.type, d.train.label) == ("npy", -1)),
    ("data: {train: {path: table.npy, label_path: labels.npy}}",
     lambda d: d.train.label is None and d.train.label_path.endswith("labels.npy")),
    ("data: {train: {path: table.csv, label: target, columns: [a, 1]}, split: 0.25}",
     lambda d: (d.train.label, d.train.columns, d.split.val_fraction) == ("target", ["a", 1], 0.25)),
    ("data: {train: {type: csv, path: table.csv, header: false, label: 0, delimiter: ';'}}",
     lambda d: (d.train.header, d.train.delimiter) == (False, ";")),
    ("data: {train: synthetic, split: {val_fraction: 0.2, shuffle: false, seed: 3},"
     " last_batch: rollover, shuffle: false}",
     lambda d: (d.train.task, d.split.seed, d.last_batch, d.shuffle) == ("classification", 3,
                                                                         "rollover", False)),
    ("data: {train: {type: synthetic, task: regression, num_samples: 50, num_features: 2,"
     " noise: 0.0, seed: 7}}",
     lambda d: (d.train.num_classes, d.train.num_samples, d.train.seed) == (None, 50, 7)),
])
def test_data_forms(project, data, check):
    text = BASE.replace(BASE.splitlines()[1], data)
    cfg = load(project, text)
    assert check(cfg.data)
    if getattr(cfg.data.train, "path", None):
        assert cfg.data.train.path.startswith(str(project))  # absolute: resume works anywhere


def test_data_paths_are_looked_up_next_to_the_config_first(project, tmp_path_factory, monkeypatch):
    elsewhere = tmp_path_factory.mktemp("cwd")
    monkeypatch.chdir(elsewhere)
    cfg = load_config(_write(project / "sub", "c.yaml", BASE.replace(
        BASE.splitlines()[1], "data: {path: ../train.npz, x: features, y: label}")))
    assert cfg.data.train.path == str(project / "train.npz")


def test_training_options(project):
    cfg = load(project, textwrap.dedent("""\
        model: mlp
        loss: softmax_cross_entropy
        epochs: 2
        steps: 500
        seed: 3
        name: exp.1
        run_dir: out/runs
        grad_clip: 1
        grad_accumulation: 4
        nan_policy: skip
        log_every: 5
        validate_every: 100
        metrics: [accuracy]
        data: {train: synthetic, split: 0.1}
        early_stopping: {metric: val_accuracy, patience: 3, min_delta: 0.01}
        checkpoint: {every_steps: 50, every_epoch: false, keep_last: 2, keep_best: val_loss}
        """))
    assert (cfg.epochs, cfg.steps, cfg.seed, cfg.name, cfg.run_dir) == (2, 500, 3, "exp.1", "out/runs")
    assert (cfg.grad_clip, cfg.grad_accumulation, cfg.nan_policy) == (1.0, 4, "skip")
    assert (cfg.log_every, cfg.validate_every) == (5, 100)
    assert cfg.early_stopping.mode == "max"  # inferred: accuracy grows
    assert cfg.checkpoint.keep_best.metric == "val_loss" and cfg.checkpoint.keep_best.mode == "min"
    assert cfg.metric_keys() == ["train_loss", "train_accuracy", "val_loss", "val_accuracy"]


def test_yaml_merge_keys_and_exponent_floats(project):
    cfg = load(project, BASE + textwrap.dedent("""\
        optimizer:
          name: sgd
          params: &common {learning_rate: 1e-3, wd: 5E-4}
        lr_scheduler:
          <<: {type: factor, step: 7}
          type: factor
        """))
    assert cfg.optimizer.params == {"learning_rate": 0.001, "wd": 0.0005}
    assert cfg.lr_scheduler.params == {"step": 7}


def test_validate_config_data_accepts_python_dicts():
    cfg = validate_config_data({"model": "mlp", "data": "synthetic", "loss": "l2", "steps": 3,
                                "optimizer": {"name": "sgd", "momentum": 0.9}},
                               check_files=False)
    assert cfg.optimizer.params == {"momentum": 0.9} and cfg.name == "run"


def test_schema_validates_python_input_directly():
    cfg = RunConfig.model_validate({"model": "mlp", "data": {"path": "x.npz"}, "loss": "l2",
                                    "epochs": 1}, context={"check_files": False})
    assert cfg.data.train.type == "npz" and cfg.optimizer.name == "sgd"


# --- resolved config -----------------------------------------------------------------------

FULL = """\
model: {name: mlp, args: {hidden: 16}, init: {name: xavier, magnitude: 2.0}}
data:
  train: {path: train.npz, x: features, y: label}
  split: {val_fraction: 0.2}
  batch_size: 8
loss: softmax_cross_entropy
metrics: [accuracy]
optimizer: {name: adam, learning_rate: 1e-3}
lr_scheduler: {type: multifactor, step: [10, 20], factor: 0.5}
kvstore: {type: device, update_on_kvstore: false}
compression: {type: 2bit, threshold: 0.1}
context: [cpu:0, cpu:1]
epochs: 3
steps: 40
grad_clip: 5
early_stopping: {metric: val_accuracy}
checkpoint: {every_steps: 10, keep_best: val_loss}
"""


def test_resolved_yaml_round_trips(project):
    cfg = load(project, FULL)
    text = cfg.resolved_yaml()
    assert "every_epoch: true" in text and "name: c" in text  # defaults are written out
    again = validate_config_text(text, filename="config.yaml")
    assert again == cfg
    assert again.resolved_yaml() == text


def test_resolved_yaml_quotes_strings_that_look_like_numbers():
    cfg = validate_config_data({"model": {"name": "mlp", "args": {"tag": "1e5", "flag": "yes"}},
                                "data": "synthetic", "loss": "l2", "epochs": 1}, check_files=False)
    again = validate_config_text(cfg.resolved_yaml(), check_files=False)
    assert again.model.args == {"tag": "1e5", "flag": "yes"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lr=st.floats(min_value=1e-9, max_value=10, allow_nan=False),
       epochs=st.integers(1, 10 ** 6), seed=st.integers(0, 2 ** 32 - 1),
       batch=st.integers(1, 4096), clip=st.none() | st.floats(min_value=1e-6, max_value=1e6),
       devices=st.lists(st.sampled_from(["cpu:0", "cpu:1", "gpu:0", "gpu:3"]), min_size=1,
                        max_size=4, unique=True),
       last=st.sampled_from(["keep", "discard", "rollover"]),
       name=st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True))
def test_resolved_round_trip_property(lr, epochs, seed, batch, clip, devices, last, name):
    data = {"model": "mlp", "data": {"train": "synthetic", "batch_size": batch, "last_batch": last},
            "loss": "l2", "epochs": epochs, "seed": seed, "grad_clip": clip, "context": devices,
            "optimizer": {"name": "sgd", "learning_rate": lr}, "name": name}
    cfg = validate_config_data(data, check_files=False)
    assert validate_config_text(cfg.resolved_yaml(), check_files=False) == cfg


# --- JSON schema ---------------------------------------------------------------------------

def test_json_schema_shape():
    schema = json_schema()
    props = schema["properties"]
    assert {"model", "data", "optimizer", "lr_scheduler", "kvstore", "compression", "loss",
            "metrics", "context", "epochs", "steps", "checkpoint"} <= set(props)
    assert set(schema["required"]) == {"model", "data", "loss"}
    assert schema["additionalProperties"] is False
    # A section that may be a plain string says so.
    assert {"type": "string"} .items() <= props["optimizer"]["anyOf"][0].items()
    defs = schema["$defs"]
    # Parameters may sit beside the optimizer's name, so its keys are checked by the loader.
    assert defs["OptimizerSection"]["additionalProperties"] is True
    assert defs["KVStoreSection"]["additionalProperties"] is False
    assert set(defs["KVStoreSection"]["properties"]["type"]["enum"]) >= {"local", "dist_sync"}
    path_form, train = defs["DataSection"]["properties"]["train"]["anyOf"]
    assert path_form["type"] == "string"
    assert train["discriminator"]["propertyName"] == "type"
    assert set(train["discriminator"]["mapping"]) == {"synthetic", "ratings", "npz", "npy", "csr", "libsvm", "csv", "sklearn",
                                                           "image_folder", "image_record", "mnist", "fashion_mnist",
                                                           "cifar10", "cifar100", "text"}
    import json
    json.dumps(schema)  # serialisable as is


def _write(folder, name, text):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def _schema_errors(data):
    jsonschema = pytest.importorskip("jsonschema")  # in the test extra: never skipped there
    validator = jsonschema.Draft202012Validator(json_schema())
    return [(list(e.path), e.message) for e in validator.iter_errors(data)]


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_every_shipped_config_passes_the_json_schema(path):
    import yaml
    data = yaml.safe_load(path.read_text())
    load_config(path, check_files=False)  # the loader accepts it ...
    assert _schema_errors(data) == []  # ... and so must the schema


SHORTHAND_FORMS = {
    "context: gpu": {"context": "gpu"},
    "context: [cpu:0, cpu:1]": {"context": ["cpu:0", "cpu:1"]},
    "split: 0.2": {"data": {"train": {"type": "synthetic", "num_classes": 3}, "split": 0.2}},
    "train: file": {"data": {"train": "d.npz"}},
    "flat optimizer params": {"optimizer": {"name": "adam", "learning_rate": 0.1}},
}


@pytest.mark.parametrize("form", list(SHORTHAND_FORMS))
def test_schema_accepts_the_loaders_shorthand(form):
    data = {"model": "mlp", "data": {"train": {"type": "synthetic", "num_classes": 3}},
            "loss": "l2", "epochs": 1, **SHORTHAND_FORMS[form]}
    validate_config_data(data, check_files=False)
    assert _schema_errors(data) == []


def test_schema_still_rejects_what_the_loader_rejects():
    base = {"model": "mlp", "data": "d.npz", "loss": "l2"}
    assert _schema_errors({**base, "context": 3})
    assert _schema_errors({**base, "data": {"train": "d.npz", "split": "x"}})
    assert _schema_errors({**base, "epochs": 1, "bogus": 1})
