"""Shared fixtures: ``ctx`` runs a test on cpu(0) and, where a GPU exists, on gpu(0).

The GPU case is always collected, marked ``gpu``, and skipped where CuPy sees no GPU, so
``pytest -m gpu`` selects exactly the device tests and a CPU-only machine reports them as skipped.

Determinism: every test starts from the library's generators seeded as in a fresh process (so a
test's random inputs do not depend on which tests ran before it, in whatever order
pytest-randomly picks), and with ``CI`` set hypothesis runs derandomized (the same examples on
every run, no example database), so that a red CI run is a bug, not a draw.
"""
import os

import hypothesis
import pytest

import trainer_cli

HAS_GPU = trainer_cli.num_gpus() > 0

CTX_PARAMS = [
    pytest.param(trainer_cli.cpu(0), id="cpu"),
    pytest.param(trainer_cli.gpu(0), id="gpu", marks=[
        pytest.mark.gpu, pytest.mark.skipif(not HAS_GPU, reason="no GPU visible to CuPy")]),
]

hypothesis.settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    hypothesis.settings.load_profile("ci")


@pytest.fixture(params=CTX_PARAMS, scope="session")
def ctx(request):
    """The device a test runs on (session-scoped so that hypothesis tests may use it)."""
    return request.param


@pytest.fixture(autouse=True)
def _fresh_generators():
    """``trainer_cli.random`` as a fresh process has it (seed 0) at the start of every test."""
    trainer_cli.random.seed(0)
