"""Shared fixtures: ``ctx`` runs a test on cpu(0) and, where a GPU exists, on gpu(0).

The GPU case is always collected, marked ``gpu``, and skipped where CuPy sees no GPU, so
``pytest -m gpu`` selects exactly the device tests and a CPU-only machine reports them as skipped.
"""
import pytest

import trainer_cli

HAS_GPU = trainer_cli.num_gpus() > 0

CTX_PARAMS = [
    pytest.param(trainer_cli.cpu(0), id="cpu"),
    pytest.param(trainer_cli.gpu(0), id="gpu", marks=[
        pytest.mark.gpu, pytest.mark.skipif(not HAS_GPU, reason="no GPU visible to CuPy")]),
]


@pytest.fixture(params=CTX_PARAMS, scope="session")
def ctx(request):
    """The device a test runs on (session-scoped so that hypothesis tests may use it)."""
    return request.param
