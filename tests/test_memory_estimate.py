"""A config that needs more memory than the machine has is refused before anything is
allocated, with the estimate (exit 2): huge layers, huge synthetic data sets. Memory is given a
fixed size here (1 GiB available), so the result does not depend on the machine."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from run_helpers import no_fsync, write_config
from trainer_cli.cli import main
from trainer_cli.gluon import nn
from trainer_cli.gluon.parameter import allocation_check
from trainer_cli.run import memory


@pytest.fixture(autouse=True)
def _one_gib(monkeypatch):
    no_fsync(monkeypatch)
    monkeypatch.setattr(memory, "available_bytes", lambda: 1 << 30)


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("override,said", [
    ("model.args.hidden=[4000000000]", "model 'mlp'"),
    ("model.args.hidden=[100000,100000]", "shape 100000x100000"),
    ("data.train.num_samples=100000000000", "100000000000 samples x 6 features"),
    ("data.train.num_features=4000000000", "120 samples x 4000000000 features"),
])
def test_a_config_too_large_for_memory_is_refused_with_the_estimate(tmp_path, override, said):
    result = invoke("run", write_config(tmp_path), "--run-dir", tmp_path / "runs", "-q",
                    "-o", override)
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert said in result.output and "more than the 1.0 GiB available" in result.output
    assert "needs at least" in result.output and "MemoryError" not in result.output
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_a_config_that_fits_still_runs(tmp_path):
    result = invoke("run", write_config(tmp_path), "--run-dir", tmp_path / "runs", "-q",
                    "-o", "epochs=1")
    assert result.exit_code == 0, result.output


def test_the_check_sees_each_parameter_before_it_is_allocated():
    seen = []
    net = nn.Dense(3, in_units=5)
    with allocation_check(lambda param, nbytes: seen.append((param.name, nbytes))):
        net.initialize()
    assert sorted(n for _, n in seen) == [3 * 4, 15 * 4]
    seen.clear()
    nn.Dense(2, in_units=2).initialize()  # outside the block: Gluon as ever
    assert seen == []
