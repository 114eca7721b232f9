"""Names a config may use come from the library's registries, with literal fallbacks only when a
library module cannot be imported."""
import pytest

from trainer_cli.config import ConfigError, names, validate_config_text


@pytest.fixture
def no_library(monkeypatch):
    monkeypatch.setattr(names, "_module", lambda *candidates: None)


def test_registries_or_fallbacks_give_the_core_names():
    assert {"sgd", "adam", "nag", "rmsprop"} <= set(names.optimizer_names())
    assert set(names.scheduler_names()) == {"factor", "multifactor", "poly", "cosine"}
    assert {"l2", "l1", "softmax_cross_entropy", "sigmoid_binary_cross_entropy", "huber"} <= set(
        names.loss_names())
    assert {"accuracy", "mae", "mse", "rmse"} <= set(names.metric_names())
    assert {"uniform", "normal", "xavier", "zeros"} <= set(names.initializer_names())
    assert "momentum" in names.optimizer_params("sgd").accepted
    assert names.scheduler_params("factor").required == frozenset({"step"})
    assert names.optimizer_params("no-such") is None


def test_fallbacks_when_the_library_cannot_be_imported(no_library):
    assert names.optimizer_names() == sorted(names._OPT_FALLBACK)
    assert names.scheduler_names() == ["cosine", "factor", "multifactor", "poly"]
    assert names.loss_names() == sorted(names._LOSS_FALLBACK)
    spec = names.optimizer_params("adam")
    assert {"learning_rate", "beta1", "wd"} <= spec.accepted and not spec.required
    assert names.scheduler_params("poly").required == frozenset({"max_update"})
    assert names.loss_params("l2") is None  # unknown without the library: not checked
    assert names.lookup("optimizer", "sgd") is None


def test_validation_works_on_fallbacks(no_library):
    with pytest.raises(ConfigError) as info:
        validate_config_text("model: mlp\ndata: synthetic\nloss: l2\nepochs: 1\n"
                             "optimizer: {name: adma, lerning_rate: 1}\n", check_files=False)
    assert str(info.value) == ("<config>:5:19: optimizer.name: unknown optimizer 'adma'; did you "
                               "mean 'adam'? (choices: " + ", ".join(names.optimizer_names()) + ")")


def test_library_classes_are_found_by_config_name():
    cls = names.lookup("lr_scheduler", "multifactor")
    if cls is None:
        pytest.skip("trainer_cli.lr_scheduler not importable")
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
