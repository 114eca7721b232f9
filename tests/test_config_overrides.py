"""``-o key.path=value`` overrides: merged before validation, YAML-typed, reported by their text."""
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer_cli.config import ConfigError, validate_config_text

FILE = textwrap.dedent("""\
    model: mlp
    data: {train: synthetic, batch_size: 16}
    loss: l2
    optimizer:
      name: sgd
      learning_rate: 0.5
    epochs: 1
    """)


def load(overrides, text=FILE):
    return validate_config_text(text, filename="c.yaml", overrides=overrides, check_files=False)


def problems(overrides, text=FILE):
    with pytest.raises(ConfigError) as info:
        load(overrides, text)
    return [str(i) for i in info.value.issues]


def test_values_are_parsed_as_yaml():
    cfg = load(["optimizer.params.learning_rate=0.1", "epochs=3", "context=[cpu:0,cpu:1]",
                "data.shuffle=false", "grad_clip=1e-2", "name=exp-2", "validate_every=epoch"])
    assert cfg.optimizer.params == {"learning_rate": 0.1}  # replaced the flat key, no conflict
    assert (cfg.epochs, cfg.context, cfg.data.shuffle) == (3, ["cpu:0", "cpu:1"], False)
    assert (cfg.grad_clip, cfg.name, cfg.validate_every) == (0.01, "exp-2", "epoch")


@pytest.mark.parametrize("override, check", [
    ("optimizer=adam", lambda c: (c.optimizer.name, c.optimizer.params) == ("adam", {})),
    ("optimizer.type=adam", lambda c: c.optimizer.name == "adam"),
    ("optimizer.learning_rate=0.2", lambda c: c.optimizer.params == {"learning_rate": 0.2}),
    ("optimizer={name: adam, beta1: 0.5}", lambda c: c.optimizer.params == {"beta1": 0.5}),
    ("data.train=x.csv", lambda c: c.data.train.type == "csv"),
    ("data.batch_size=8", lambda c: c.data.batch_size == 8),
    ("data.split=0.2", lambda c: c.data.split.val_fraction == 0.2),
    ("lr_scheduler={type: factor, step: 3}", lambda c: c.lr_scheduler.params == {"step": 3}),
    ("lr_scheduler.name=cosine", None),  # an absent section: needs its other keys, see below
    ("kvstore=local", lambda c: c.kvstore.type == "local"),
    ("kvstore.update_on_kvstore=true", lambda c: (c.kvstore.type, c.kvstore.update_on_kvstore)
     == ("device", True)),
    ("checkpoint.keep_best=train_loss", lambda c: c.checkpoint.keep_best.mode == "min"),
    ("checkpoint.every_steps=5", lambda c: (c.checkpoint.every_steps, c.checkpoint.keep_last) == (5, 3)),
    ("metrics=[mae, {name: mse}]", lambda c: [m.name for m in c.metrics] == ["mae", "mse"]),
    ("context=gpu:1", lambda c: c.context == ["gpu:1"]),
    ("steps=10", lambda c: (c.epochs, c.steps) == (1, 10)),
    ("epochs=null", None),
])
def test_override_forms(override, check):
    if check is None:
        assert problems([override])
        return
    assert check(load([override]))


def test_override_tunes_a_default_section():
    cfg = load(["optimizer.params.momentum=0.9"], FILE.replace(
        "optimizer:\n  name: sgd\n  learning_rate: 0.5\n", ""))
    assert (cfg.optimizer.name, cfg.optimizer.params) == ("sgd", {"momentum": 0.9})


def test_override_of_a_dataset_key():
    cfg = load(["data.path=b.npz"], FILE.replace("train: synthetic", "path: a.npz"))
    assert (cfg.data.train.type, cfg.data.train.path) == ("npz", "b.npz")
    assert problems(["data.path=b.npz"]) == [
        "override -o data.path=b.npz: data.path: unknown key for type synthetic; other types take it"]


def test_override_into_list_item():
    cfg = load(["metrics.1.name=rmse", "metrics.0=mse"], FILE + "metrics: [accuracy, mae]\n")
    assert [m.name for m in cfg.metrics] == ["mse", "rmse"]


def test_later_overrides_win_and_can_fix_the_file():
    cfg = load(["epochs=2", "epochs=4"], FILE.replace("epochs: 1", "epochs: zero"))
    assert cfg.epochs == 4


def test_bad_values_cite_the_override():
    assert problems(["optimizer.params.learning_rate=fast", "epochs=-1", "context=[cpu, tpu:0]"]) == [
        "override -o optimizer.params.learning_rate=fast: optimizer.params.learning_rate: "
        "expected a number > 0, got 'fast'",
        "override -o epochs=-1: epochs: expected an integer >= 1, got -1",
        "override -o context=[cpu, tpu:0]: context.1: expected a device such as cpu, gpu, gpu:0 "
        "or cpu:1, got 'tpu:0'",
    ]


def test_unknown_paths_get_did_you_mean():
    assert problems(["optimzer.name=adam", "optimizer.lerning_rate=0.1", "data.batchsize=3",
                     "batch_size=3"]) == [
        "override -o optimzer.name=adam: optimzer: unknown key; did you mean 'optimizer'?",
        "override -o optimizer.lerning_rate=0.1: optimizer.lerning_rate: unknown optimizer "
        "parameter for sgd; did you mean 'learning_rate'?",
        "override -o data.batchsize=3: data.batchsize: unknown key; did you mean 'batch_size'?",
        "override -o batch_size=3: batch_size: unknown key; did you mean 'data.batch_size'?",
    ]


def test_malformed_overrides():
    assert problems(["epochs", "=3", "a..b=1", "seed=[1,", "data.batch_size.x=3", "metrics.5=mae",
                     "optimizer={a: 1, a: 2}"]) == [
        "override -o epochs: expected key.path=value, e.g. -o epochs=3",
        "override -o =3: expected key.path=value, e.g. -o epochs=3",
        "override -o a..b=1: expected a dotted key path, got 'a..b'",
        "override -o seed=[1,: seed: invalid YAML: expected the node content, but found '<stream end>' "
        "(while parsing a flow node)",
        "override -o data.batch_size.x=3: data.batch_size.x: cannot set 'x' inside "
        "data.batch_size, which is 16",
        "override -o metrics.5=mae: metrics.5: no item 5 in metrics, which has 0 items",
        "override -o optimizer={a: 1, a: 2}: optimizer.a: duplicate key; give each key once",
    ]


def test_file_and_override_problems_together():
    got = problems(["epochs=0"], FILE.replace("loss: l2", "loss: l9"))
    assert got == [
        "c.yaml:3:7: loss: unknown loss 'l9' (choices: " + got[0].split("(choices: ")[1],
        "override -o epochs=0: epochs: expected an integer >= 1, got 0",
    ]


def test_overrides_show_in_the_resolved_config():
    cfg = load(["optimizer.params.learning_rate=0.25", "seed=9"])
    again = validate_config_text(cfg.resolved_yaml(), check_files=False)
    assert again.optimizer.params == {"learning_rate": 0.25} and again.seed == 9


@settings(max_examples=50, deadline=None)
@given(st.integers(-5, 10 ** 9))
def test_integer_overrides_property(n):
    if n >= 1:
        assert load([f"epochs={n}"]).epochs == n
    else:
        assert problems([f"epochs={n}"]) == [
            f"override -o epochs={n}: epochs: expected an integer >= 1, got {n}"]
