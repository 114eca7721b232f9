"""Shared fixtures: ``ctx`` runs a test on cpu(0) and, where a GPU exists, on gpu(0);
``fused_on`` has the optimizer's numba kernels on, whatever the environment says.

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

import required
import trainer_cli

HAS_GPU = required.have_gpu()

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


@pytest.fixture
def fused_on(monkeypatch):
    from trainer_cli import _jit
    from trainer_cli.optimizer import kernels

    monkeypatch.setattr(_jit, "_numba", None)
    monkeypatch.delenv("TRAINER_NO_NUMBA", raising=False)
    assert kernels.enabled()
    return monkeypatch


@pytest.fixture(autouse=True)
def _fresh_generators():
    """``trainer_cli.random`` as a fresh process has it (seed 0) at the start of every test."""
    trainer_cli.random.seed(0)


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: a worker per CPU this process may run on (pytest-xdist would count physical
    cores where psutil is installed: one on a 2-vCPU VM), at most 8, since a worker's memory
    peaks at a few GB in the largest tests."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:      # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(8, cpus))


# ------------------------------------------------------------------------------------------------
# Skips that cannot hide: with TRAINER_EXPECTED_SKIPS naming a file (CI's list for its machine),
# the run fails unless the tests that skipped are exactly the ones listed (among those that ran).
# TRAINER_RECORD_SKIPS=FILE writes the list a run skipped, to review and commit.

_SKIPPED: dict = {}
_RAN: set = set()
_SKIP_VERDICT: list = []


def pytest_runtest_logreport(report):
    _RAN.add(report.nodeid)
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _SKIPPED[report.nodeid] = reason


def _listed(path):
    with open(path, encoding="utf-8") as f:
        return {line.split("  #", 1)[0].strip() for line in f
                if line.strip() and not line.lstrip().startswith("#")}


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):
        return      # a pytest-xdist worker: the controller sees every report and judges
    record = os.environ.get("TRAINER_RECORD_SKIPS")
    if record:
        with open(record, "w", encoding="utf-8") as f:
            f.writelines("%s  # %s\n" % (node, _SKIPPED[node]) for node in sorted(_SKIPPED))
    expected_file = os.environ.get("TRAINER_EXPECTED_SKIPS")
    if not expected_file:
        return
    expected = _listed(expected_file)
    unexpected = sorted(set(_SKIPPED) - expected)
    ran_instead = sorted(node for node in expected & _RAN if node not in _SKIPPED)
    if not unexpected and not ran_instead:
        _SKIP_VERDICT.append("skips as expected: %d, the ones %s lists" % (len(_SKIPPED),
                                                                           expected_file))
        return
    lines = ["the skipped tests are not the ones %s lists (%d skipped):"
             % (expected_file, len(_SKIPPED))]
    lines += ["  skipped, not listed: %s  (%s)" % (n, _SKIPPED[n]) for n in unexpected]
    lines += ["  listed, but ran: %s" % n for n in ran_instead]
    lines.append("Install what is missing, or review and update the list "
                 "(TRAINER_RECORD_SKIPS=FILE writes this run's).")
    _SKIP_VERDICT.extend(lines)
    if session.exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter):
    if _SKIP_VERDICT:
        terminalreporter.section("expected skips")
        for line in _SKIP_VERDICT:
            terminalreporter.write_line(line)
