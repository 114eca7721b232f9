"""Every kind of config error: file:line:col, the dotted key as written, what was expected, a
did-you-mean, and all problems at once without tracebacks or pydantic jargon."""
import importlib.util
import textwrap

import numpy as np
import pytest

from trainer_cli.config import ConfigError, ConfigIssue, load_config, validate_config_text


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "mlp.py").write_text("def build():\n    pass\n")
    (tmp_path / "models" / "cnn.py").write_text("def build():\n    pass\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def problems(project, text, name="mlp.yaml", overrides=()):
    path = project / name
    path.write_text(textwrap.dedent(text))
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    return [str(issue).replace(str(project) + "/", "") for issue in info.value.issues]


OK = """\
model: mlp
data: synthetic
loss: l2
epochs: 1
"""


def test_every_field_error_is_reported_at_once_with_positions(project):
    got = problems(project, """\
        model:
          nme: mlp
          init: {name: xavir}
        data:
          train: {type: synthetic, num_sample: 10}
          batch_size: -1
          last_batch: kep
        loss: l3
        optimizer:
          name: adam
          lerning_rate: 0.1
          params:
            learning_rate: fast
        lr_scheduler: {type: factr}
        kvstore: {type: locl}
        compression: {type: 3bit}
        context: [cpu, tpu]
        epochs: 0
        grad_clip: -1
        nan_policy: ignore
        validate_every: weekly
        checkpoint: {keep_last: 0, every_steps: ten}
        lerning_rate: 0.1
        """)
    expected = [
        "mlp.yaml:2:3: model.nme: unknown key; did you mean 'name'? (the required key 'name' is "
        "missing: a model in models/ by file name (mlp), path/to/file.py:factory, or a model-zoo "
        "network, zoo:resnet18_v1 (see trainer list))",
        "mlp.yaml:3:16: model.init.name: unknown initializer 'xavir'; did you mean 'xavier'?",
        "mlp.yaml:5:28: data.train.num_sample: unknown key; did you mean 'num_samples'?",
        "mlp.yaml:6:15: data.batch_size: expected an integer >= 1, got -1",
        "mlp.yaml:7:15: data.last_batch: unknown value 'kep'; did you mean 'keep'? "
        "(choices: keep, discard, rollover)",
        "mlp.yaml:8:7: loss: unknown loss 'l3'",
        "mlp.yaml:11:3: optimizer.lerning_rate: unknown optimizer parameter for adam; "
        "did you mean 'learning_rate'?",
        "mlp.yaml:13:20: optimizer.params.learning_rate: expected a number > 0, got 'fast'",
        "mlp.yaml:14:22: lr_scheduler.type: unknown lr_scheduler 'factr'; did you mean 'factor'?",
        "mlp.yaml:15:17: kvstore.type: unknown value 'locl'; did you mean 'local'? (choices: local, "
        "device, dist_sync, dist_device_sync, dist_async, dist_device_async, none)",
        "mlp.yaml:16:21: compression.type: unknown value '3bit'; did you mean '2bit'? "
        "(choices: 2bit, 1bit, none)",
        "mlp.yaml:17:16: context.1: expected a device such as cpu, gpu, gpu:0 or cpu:1, got 'tpu'",
        "mlp.yaml:18:9: epochs: expected an integer >= 1, got 0",
        "mlp.yaml:19:12: grad_clip: expected a number > 0, got -1",
        "mlp.yaml:20:13: nan_policy: unknown value 'ignore' (choices: stop, skip)",
        "mlp.yaml:21:17: validate_every: expected a number of steps >= 1 or 'epoch', got 'weekly'",
        "mlp.yaml:22:25: checkpoint.keep_last: expected an integer >= 1, got 0",
        "mlp.yaml:22:41: checkpoint.every_steps: expected an integer >= 1, got 'ten'",
        "mlp.yaml:23:1: lerning_rate: unknown key; did you mean 'optimizer.params.learning_rate'?",
    ]
    assert len(got) == len(expected)
    for line, want in zip(got, expected):
        assert line.startswith(want), (line, want)


def test_cross_section_errors_come_with_the_missing_length(project):
    got = problems(project, """\
        name: my run
        model: mlp
        data: synthetic
        loss: l2
        metrics: [mae, mae]
        kvstore: {type: dist_async, update_on_kvstore: false}
        context: [cpu:0, cpu]
        early_stopping: {metric: val_mae}
        checkpoint:
          keep_best: {metric: train_mea}
        """)
    assert got == [
        "mlp.yaml:1:1: give epochs or steps (or both: training stops at whichever comes first)",
        "mlp.yaml:1:7: name: expected letters, digits, '.', '_' or '-' (it names a folder), "
        "got 'my run'",
        "mlp.yaml:5:16: metrics.1: metric 'mae' is listed twice (also item 0)",
        "mlp.yaml:6:48: kvstore.update_on_kvstore: dist_async updates on the kvstore; "
        "expected true or null, got false",
        "mlp.yaml:7:18: context.1: cpu:0 is listed twice",
        "mlp.yaml:8:26: early_stopping.metric: needs validation data: add data.val or data.split",
        "mlp.yaml:10:23: checkpoint.keep_best.metric: unknown metric 'train_mea'; did you mean "
        "'train_mae'? (choices: train_loss, train_mae)",
    ]


@pytest.mark.parametrize("extra, message", [
    ("kvstore: local\ncompression: 2bit",
     "mlp.yaml:6:14: compression: gradient compression needs a device or dist_* kvstore; "
     "kvstore 'local' cannot apply it"),
    ("compression: {type: 2bit}",
     "mlp.yaml:5:21: compression.type: gradient compression with a single device and a local "
     "kvstore would never be applied"),
    ("context: [cpu:0, cpu:1]\ncompression: {type: 2bit, threshold: 0}",
     "mlp.yaml:6:38: compression.threshold: expected a number > 0 for 2bit compression, got 0"),
    ("lr_scheduler: {type: factor}", "mlp.yaml:5:1: lr_scheduler: factor needs the parameter 'step'"),
    ("lr_scheduler: {type: multifactor, step: [5, 5]}",
     "mlp.yaml:5:41: lr_scheduler.step: expected strictly increasing steps, got [5, 5]"),
    ("lr_scheduler: {type: poly, max_update: 5, warmup_steps: 5}",
     "mlp.yaml:5:57: lr_scheduler.warmup_steps: expected fewer warmup steps than max_update (5), got 5"),
    ("lr_scheduler: {type: cosine, max_update: 9, warmup_begin_lr: 0.5}",
     "mlp.yaml:5:62: lr_scheduler.warmup_begin_lr: expected at most base_lr (0.01), got 0.5"),
    ("lr_scheduler: {type: factor, params: {step: 0}}",
     "mlp.yaml:5:45: lr_scheduler.params.step: expected an integer >= 1, got 0"),
    ("optimizer: {name: sgd, lr_scheduler: x}",
     "mlp.yaml:5:24: optimizer.lr_scheduler: cannot be set here: set the schedule in the "
     "lr_scheduler section"),
    ("optimizer: {name: sgd, momentum: 1.5}",
     "mlp.yaml:5:34: optimizer.momentum: expected a number >= 0 and < 1, got 1.5"),
    ("optimizer: {name: sgd, type: adam}",
     "mlp.yaml:5:24: optimizer.type: give either 'name' or 'type', not both"),
    ("optimizer: {name: sgd, wd: 1, params: {wd: 2}}",
     "mlp.yaml:5:24: optimizer.wd: 'wd' is given both here and under params"),
    ("optimizer: adamm", "mlp.yaml:5:12: optimizer: unknown optimizer 'adamm'; did you mean 'adam'?"),
    ("optimizer: {params: {}}", "mlp.yaml:5:1: optimizer: missing required key 'name'"),
    ("optimizer: 3", "mlp.yaml:5:12: optimizer: expected an optimizer name or a mapping with name "
                     "and params, got 3"),
    ("metrics: null", "mlp.yaml:5:10: metrics: expected a metric name, or a list of metric names "
                      "or mappings with name and params, got null"),
    ("metrics: [acuracy]", "mlp.yaml:5:11: metrics.0: unknown metric 'acuracy'; did you mean 'accuracy'?"),
    ("metrics: [{name: top_k_accuracy, top_k: 0}]",
     "mlp.yaml:5:41: metrics.0.top_k: expected an integer >= 1, got 0"),
    ("early_stopping: {patience: 0, mode: up}",
     "mlp.yaml:5:28: early_stopping.patience: expected an integer >= 1, got 0"),
    ("context: []", "mlp.yaml:5:10: context: expected at least 1 item, got an empty list"),
    ("context: {a: 1}", "mlp.yaml:5:10: context: expected a device such as cpu, gpu or gpu:0, or a "
                        "list of devices, got a mapping"),
    ("grad_clip: .inf", "mlp.yaml:5:12: grad_clip: expected a number > 0, got inf"),
    ("lr_scheduler: {type: multifactor, step: [1, x]}",
     "mlp.yaml:5:45: lr_scheduler.step.1: expected an integer >= 1, got 'x'"),
    ("early_stopping: true", "mlp.yaml:5:1: early_stopping.metric: needs validation data"),
    ("seed: 1.5", "mlp.yaml:5:7: seed: expected an integer >= 0 and <= 4294967295, got 1.5"),
    ("grad_accumulation: true", "mlp.yaml:5:20: grad_accumulation: expected an integer >= 1, got true"),
    ("run_dir: ''", "mlp.yaml:5:10: run_dir: expected a non-empty string, got ''"),
    ("batch_size: 8", "mlp.yaml:5:1: batch_size: unknown key; did you mean 'data.batch_size'?"),
    ("kvstore: {type: device, update_on_kvstore: 1}",
     "mlp.yaml:5:44: kvstore.update_on_kvstore: expected true, false, or null to let the Trainer "
     "decide, got 1"),
])
def test_single_errors(project, extra, message):
    got = problems(project, OK + extra)
    assert any(line.startswith(message) for line in got), got


def test_unknown_key_lists_valid_keys_when_nothing_is_close(project):
    got = problems(project, OK + "checkpoint: {zzz: 1}")
    assert got == ["mlp.yaml:5:14: checkpoint.zzz: unknown key (valid keys: every_steps, "
                   "every_seconds, every_epoch, keep_last, keep_best)"]


def test_unknown_model_suggests_from_models_folder(project):
    got = problems(project, OK.replace("model: mlp", "model: {name: mpl}"))
    # models/ next to the config comes first; the repository's own models/ may add more names.
    assert len(got) == 1
    assert got[0].startswith("mlp.yaml:1:15: model.name: unknown model 'mpl'; did you mean 'mlp'? "
                             "(models: cnn, ")
    assert got[0].endswith("; or give path/to/file.py:factory)")


def test_model_factory_file_is_checked_without_running_it(project):
    (project / "nets.py").write_text("import sys\nsys.exit(3)\ndef make():\n    pass\n")
    got = problems(project, OK.replace("model: mlp", "model: nets.py:mak"))
    assert got == ["mlp.yaml:1:8: model: nets.py defines no 'mak'; did you mean 'make'?"]
    got = problems(project, OK.replace("model: mlp", "model: other.py:make"))
    assert got[0].startswith("mlp.yaml:1:8: model: model file 'other.py' not found (looked in")
    (project / "broken.py").write_text("def f(:\n")
    got = problems(project, OK.replace("model: mlp", "model: broken.py:f"))
    assert got == ["mlp.yaml:1:8: model: broken.py has a syntax error at line 1: invalid syntax"]


def test_model_args_are_checked_against_the_factory_source(project):
    (project / "models" / "net.py").write_text(
        "def build(hidden=(8,), classes=2, *, dropout=0.0):\n    pass\n")
    (project / "nets.py").write_text("class Net:\n    def __init__(self, width=3):\n        pass\n"
                                     "def loose(**kwargs):\n    pass\n")
    got = problems(project, OK.replace("model: mlp", "model: {name: net, args: {hiden: [4], "
                                                     "dropout: 0.1, zz: 1}}"))
    assert got == [
        "mlp.yaml:1:27: model.args.hiden: unknown argument of build() in net.py; did you mean 'hidden'?",
        "mlp.yaml:1:53: model.args.zz: unknown argument of build() in net.py "
        "(arguments: hidden, classes, dropout)",
    ]
    got = problems(project, OK.replace("model: mlp", "model: {name: nets.py:Net, args: {widht: 2}}"))
    assert got == ["mlp.yaml:1:35: model.args.widht: unknown argument of Net() in nets.py; "
                   "did you mean 'width'?"]
    load_config(_write(project, "ok.yaml", OK.replace(
        "model: mlp", "model: {name: nets.py:loose, args: {anything: 1}}")))  # **kwargs: unchecked


def test_data_file_errors(project):
    np.savez(project / "d.npz", features=np.zeros((3, 2)), label=np.zeros(3))
    got = problems(project, OK.replace("data: synthetic", "data: {path: d.npz, x: feature}"))
    assert got == [
        # y was not written: the error points at the section that lacks it.
        "mlp.yaml:2:1: data.train.y: no array 'y' in d.npz (arrays: features, label)",
        "mlp.yaml:2:24: data.x: no array 'feature' in d.npz; did you mean 'features'? "
        "(arrays: features, label)",
    ]
    got = problems(project, OK.replace("data: synthetic", "data: missing.npz"))
    assert got == [f"mlp.yaml:2:7: data: data file 'missing.npz' not found (looked in '{project}')"]
    (project / "bad.npz").write_bytes(b"not a zip")
    got = problems(project, OK.replace("data: synthetic", "data:\n  train:\n    path: bad.npz"))
    assert got == ["mlp.yaml:4:11: data.train.path: cannot read bad.npz as an .npz archive: "
                   "File is not a zip file"]
    (project / "t.csv").write_text("a,b,label\n1,2,3\n")
    got = problems(project, OK.replace("data: synthetic", "data: {path: t.csv, label: lable, columns: [a, 7]}"))
    assert got == [
        "mlp.yaml:2:28: data.label: no column 'lable'; did you mean 'label'? (columns: a, b, label)",
        "mlp.yaml:2:48: data.columns.1: expected a column index in [-3, 2] (3 columns), got 7",
    ]
    np.save(project / "v.npy", np.zeros(4))
    got = problems(project, OK.replace("data: synthetic", "data: {train: v.npy}"))
    assert got == ["mlp.yaml:2:15: data.train: expected a 2-D array with a label column, got "
                   "shape (4,); or give label_path"]
    got = problems(project, OK.replace("data: synthetic", "data: {train: {path: d.dat}}"))
    assert got == ["mlp.yaml:2:8: data.train: missing required key 'type' "
                   "(one of synthetic, ratings, npz, npy, csr, libsvm, csv, sklearn, image_folder, image_record, mnist, "
                   "fashion_mnist, cifar10, cifar100, text)"]
    got = problems(project, OK.replace("data: synthetic", "data: {train: {type: npzz, path: d.npz}}"))
    assert got == ["mlp.yaml:2:22: data.train.type: unknown type 'npzz'; did you mean 'npz'? "
                   "(choices: synthetic, ratings, npz, npy, csr, libsvm, csv, sklearn, image_folder, image_record, mnist, "
                   "fashion_mnist, cifar10, cifar100, text)"]
    got = problems(project, OK.replace("data: synthetic",
                                       "data: {train: synthetic, val: synthetic, split: 0.5}"))
    assert got == ["mlp.yaml:2:42: data.split: give either data.val or data.split, not both"]
    got = problems(project, OK.replace("data: synthetic",
                                       "data: {train: {type: synthetic, task: regression, num_classes: 3}}"))
    assert got == ["mlp.yaml:2:51: data.train.num_classes: applies only to task: classification"]


def test_sklearn_needs_scikit_learn(project):
    text = OK.replace("data: synthetic", "data: {train: {type: sklearn, name: digit}}")
    got = problems(project, text)
    assert got[0].startswith("mlp.yaml:2:37: data.train.name: unknown value 'digit'; did you mean 'digits'?")
    if importlib.util.find_spec("sklearn") is None:
        got = problems(project, OK.replace("data: synthetic", "data: {train: {type: sklearn, name: iris}}"))
        assert got == ["mlp.yaml:2:37: data.train.name: needs scikit-learn, which is not installed: "
                       "pip install scikit-learn (or use type: synthetic)"]


def test_duplicate_keys_are_errors_alongside_schema_errors(project):
    got = problems(project, OK + "optimizer:\n  name: sgd\n  name: adam\nepochs: 0\n")
    assert got == [
        "mlp.yaml:7:3: optimizer.name: duplicate key (first given at line 6, column 3); give each key once",
        "mlp.yaml:8:1: epochs: duplicate key (first given at line 4, column 1); give each key once",
        "mlp.yaml:8:9: epochs: expected an integer >= 1, got 0",
    ]


@pytest.mark.parametrize("text, message", [
    ("model: [mlp\n", "mlp.yaml:2:1: invalid YAML: expected ',' or ']', but got '<stream end>' "
                      "(while parsing a flow sequence at line 1, column 8)"),
    ("model:\n\tname: mlp\n", "mlp.yaml:2:1: invalid YAML: found character '\\t' that cannot start "
                              "any token (while scanning for the next token); indent with spaces, not tabs"),
    ("model: mlp\n  loss: l2\n", "mlp.yaml:2:7: invalid YAML: mapping values are not allowed here"),
    ("a: 1\n---\nb: 2\n", "mlp.yaml:2:1: invalid YAML: but found another document (expected a single document"),
    ("", "mlp.yaml:1:1: the config is empty; expected a mapping with at least model, data, loss"),
    ("- model\n", "mlp.yaml:1:1: expected a mapping of sections (model, data, loss, ...), got a list"),
])
def test_yaml_problems(project, text, message):
    got = problems(project, text)
    assert any(line.startswith(message) for line in got), got


def test_unreadable_value_is_one_error_and_nothing_runs(project):
    got = problems(project, OK.replace("model: mlp", "model: !!python/name:os.system mlp"))
    assert got == ["mlp.yaml:1:8: model: cannot read this value: could not determine a "
                   "constructor for the tag 'tag:yaml.org,2002:python/name:os.system'"]


def _write(folder, name, text):
    (folder / name).write_text(text)
    return folder / name


def test_missing_or_unreadable_file(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.yaml")
    assert str(info.value) == f"{tmp_path / 'nope.yaml'}: config file not found"
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert "expected a config file, got a folder" in str(info.value)
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00model")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "bin.yaml")
    assert "not UTF-8 text" in str(info.value)


def test_report_reads_as_plain_paragraphs(project):
    path = project / "mlp.yaml"
    path.write_text(OK + "optimizer: {name: sgd, learning_rate: fast}\ncontext: [cpu, x]\nfoo: 1\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    text = str(info.value)
    paragraphs = text.split("\n\n")
    assert len(paragraphs) == len(info.value.issues) == 3
    for bad in ("Traceback", "pydantic", "errors.pydantic.dev", "Input should", "validation error",
                "For further information", "type=", "RunConfig"):
        assert bad not in text
    assert all(p.startswith(str(path) + ":") for p in paragraphs)
    assert info.value.to_dict()["errors"][0] == {
        "message": "expected a number > 0, got 'fast'", "key": "optimizer.learning_rate",
        "file": str(path), "line": 5, "column": 39, "override": None}


def test_impossible_paths_are_config_errors(project):
    got = problems(project, OK.replace("data: synthetic", "data: " + "x" * 5000 + ".npz"))
    assert got == ["mlp.yaml:2:7: data: cannot use 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                   "xxxx...' as a data file: File name too long"]


def test_arbitrary_structures_give_a_config_or_a_config_error():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from trainer_cli.config import validate_config_data
    from trainer_cli.config.report import schema_paths
    from trainer_cli.config.schema import RunConfig

    keys = sorted({p[-1] for p in schema_paths(RunConfig) if isinstance(p[-1], str)})
    scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=True) | \
        st.sampled_from(["sgd", "adam", "factor", "cpu", "gpu:1", "synthetic", "npz", "x.npz",
                         "epoch", "val_loss", "2bit", "local", "mlp", "l2", "accuracy", ""])
    values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                          | st.dictionaries(st.sampled_from(keys), inner, max_size=4), max_leaves=12)

    @settings(max_examples=120, deadline=None)
    @given(st.dictionaries(st.sampled_from(keys), values, max_size=8),
           st.lists(st.sampled_from(["epochs=2", "optimizer.momentum=x", "data.train=synthetic",
                                     "metrics.0=mae", "kvstore=[1]", "context.0.x=1"]), max_size=2))
    def run(data, overrides):
        try:
            validate_config_data(data, overrides=overrides, check_files=False)
        except ConfigError as err:
            assert str(err)

    run()


def test_did_you_mean_prefers_single_typos():
    from trainer_cli.config.suggest import closest

    assert closest("adma", ["adamax", "adam"]) == "adam"  # a swap beats a longer common run
    assert closest("lerning_rate", ["learning_rate", "wd"]) == "learning_rate"
    assert closest("SGD", ["sgd"]) == "sgd"
    assert closest("l9", ["l1", "l2"]) is None
    assert closest("zzz", ["name", "args"]) is None


def test_config_error_pickles():
    import pickle

    err = ConfigError([ConfigIssue("bad", key="a", file="c.yaml", line=1, column=2)])
    again = pickle.loads(pickle.dumps(err))
    assert again.issues == err.issues and str(again) == str(err)


def test_issue_rendering():
    assert str(ConfigIssue("bad", key="a.b", file="c.yaml", line=3, column=4)) == "c.yaml:3:4: a.b: bad"
    assert str(ConfigIssue("bad", key="a", override="-o a=1")) == "override -o a=1: a: bad"
    assert str(ConfigIssue("bad")) == "<config>: bad"
    with pytest.raises(ValueError):
        ConfigError([])


def test_arbitrary_text_gives_a_config_or_a_config_error():
    # Fuzz-ish: whatever the text, nothing but ConfigError escapes.
    from hypothesis import given, settings
    from hypothesis import strategies as st

    pieces = st.sampled_from(["model: mlp\n", "data: synthetic\n", "loss: l2\n", "epochs: 1\n",
                              "optimizer: {", "}\n", "- x\n", "  ", ":", "\t", "&a ", "*a\n",
                              "<<: *a\n", "context: [gpu, ]\n", "'", "\"", "!!binary x\n", "a: b: c\n",
                              "steps: 1e3\n", "metrics: {name: 5}\n", "data: {type: npz}\n"])

    @settings(max_examples=150, deadline=None)
    @given(st.lists(pieces, max_size=12).map("".join))
    def run(text):
        try:
            validate_config_text(text, filename="f.yaml", check_files=False)
        except ConfigError as err:
            assert str(err)

    run()
