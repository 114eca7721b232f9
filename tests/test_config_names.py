"""Names a config may use come from the library's registries (``names()``, ``lookup``,
``create`` of each kind's module)."""
import pytest

from trainer_cli.config import ConfigError, names, validate_config_text


def test_registries_give_the_core_names():
    assert {"sgd", "adam", "nag", "rmsprop"} <= set(names.optimizer_names())
    assert set(names.scheduler_names()) == {"factor", "multifactor", "poly", "cosine"}
    assert {"l2", "l1", "softmax_cross_entropy", "sigmoid_binary_cross_entropy", "huber"} <= set(
        names.loss_names())
    assert {"accuracy", "mae", "mse", "rmse"} <= set(names.metric_names())
    assert {"uniform", "normal", "xavier", "zeros"} <= set(names.initializer_names())
    assert "momentum" in names.optimizer_params("sgd").accepted
    assert names.scheduler_params("factor").required == frozenset({"step"})
    assert names.optimizer_params("no-such") is None


def test_names_are_the_library_registries():
    from trainer_cli import initializer, lr_scheduler, metric, optimizer
    from trainer_cli.gluon import loss
    assert names.optimizer_names() == optimizer.names()
    assert names.scheduler_names() == lr_scheduler.names()
    assert names.loss_names() == loss.names()
    assert names.metric_names() == metric.names()
    assert names.initializer_names() == initializer.names()
    for registry, name in ((optimizer, "nag"), (lr_scheduler, "poly"), (loss, "huber"),
                           (metric, "top_k_accuracy"), (initializer, "xavier")):
        assert registry.lookup(name) is not None
        assert type(registry.create(name, **({"max_update": 10} if name == "poly" else {}))) \
            is registry.lookup(name)
        with pytest.raises(ValueError, match="no-such"):
            registry.create("no-such")
        assert registry.lookup("no-such") is None


def test_validation_suggests_a_registered_name():
    with pytest.raises(ConfigError) as info:
        validate_config_text("model: mlp\ndata: synthetic\nloss: l2\nepochs: 1\n"
                             "optimizer: {name: adma, lerning_rate: 1}\n", check_files=False)
    assert str(info.value) == ("<config>:5:19: optimizer.name: unknown optimizer 'adma'; did you "
                               "mean 'adam'? (choices: " + ", ".join(names.optimizer_names()) + ")")


def test_library_classes_are_found_by_config_name():
    cls = names.lookup("lr_scheduler", "multifactor")
    assert cls.__name__ == "MultiFactorScheduler"
    assert names.lookup("optimizer", "SGD").__name__.lower() == "sgd"


def test_snake_case_and_metric_modes():
    assert names.snake_case("SoftmaxCrossEntropy") == "softmax_cross_entropy"
    assert names.snake_case("TopKAccuracy") == "top_k_accuracy"
    assert names.snake_case("L2") == "l2" and names.snake_case("KLDiv") == "kl_div"
    assert names.snake_case("MAE") == "mae" and names.snake_case("PoissonNLL") == "poisson_nll"
    assert names.metric_mode("accuracy") == "max" and names.metric_mode("loss") == "min"
    assert names.metric_mode("rmse") == "min"


def test_model_search_order(tmp_path, monkeypatch):
    config_dir = tmp_path / "proj" / "configs"
    (config_dir / "models").mkdir(parents=True)
    (tmp_path / "proj" / "models").mkdir()
    (config_dir / "models" / "a.py").write_text("")
    (tmp_path / "proj" / "models" / "a.py").write_text("")
    (tmp_path / "proj" / "models" / "b.py").write_text("")
    (tmp_path / "proj" / "models" / "_private.py").write_text("")
    monkeypatch.chdir(tmp_path)
    found = names.model_files(config_dir)
    assert found["a"] == (config_dir / "models" / "a.py").resolve()
    assert found["b"] == (tmp_path / "proj" / "models" / "b.py").resolve()
    assert "_private" not in found
    assert names.model_dirs(config_dir)[:2] == [(config_dir / "models").resolve(),
                                                (tmp_path / "proj" / "models").resolve()]


def test_models_and_kvstores_follow_the_same_protocol():
    from trainer_cli import kvstore
    from trainer_cli.run import model
    assert model.names() == sorted(names.model_files())
    assert {"mlp", "perceptron"} <= set(model.names())
    net = model.create("mlp", hidden=[4], classes=3)
    assert hasattr(net, "collect_params")
    with pytest.raises(model.ModelError, match="no-such"):
        model.create("no-such")
    assert {"local", "device", "dist_sync", "dist_async"} <= set(kvstore.names())
    assert kvstore.create("device").type == "device"
