"""A run loads its kernels before its training clock, on a throwaway twin of the model
(run/preload.py): the first step then loads nothing, the run's numbers are the same as without
it, and a model file of the user's still runs once."""
import os
import subprocess
import sys

from run_helpers import REPO, final_arrays, metric_rows, only_run_dir, write_config
from trainer_cli import _jit
from trainer_cli.run import session, start_run
from trainer_cli.run.progress import Reporter

# SMALL made large enough for the numba kernels (a 20-128-64-4 MLP, batches of 32), with dropout
# (the random stream), gradient clipping (its norm) and validation.
BIGGER = ["model.args={hidden: [128, 64], classes: 4, dropout: 0.2}",
          "data.train.num_samples=320", "data.train.num_features=20", "data.train.num_classes=4",
          "data.batch_size=32", "metrics=[accuracy, cross_entropy]", "grad_clip=5.0"]


def _without_time(rows):
    return [{k: v for k, v in row.items() if k != "time"} for row in rows]


def test_a_run_gives_the_same_numbers_with_its_kernels_loaded_ahead(tmp_path, monkeypatch):
    config = write_config(tmp_path)
    ahead = start_run(config, BIGGER, run_root=tmp_path / "ahead")
    monkeypatch.setattr(session, "preload_kernels", lambda parts: None)
    plain = start_run(config, BIGGER, run_root=tmp_path / "plain")
    assert ahead.status == plain.status == "finished"
    a, b = only_run_dir(tmp_path / "ahead"), only_run_dir(tmp_path / "plain")
    for got, want in zip(final_arrays(a), final_arrays(b)):
        assert got.keys() == want.keys()
        for key in got:
            assert got[key].tobytes() == want[key].tobytes(), key
    assert _without_time(metric_rows(a)) == _without_time(metric_rows(b))
    assert "not loaded ahead" not in (a / "train.log").read_text()


# In a process of its own: kernels loaded by earlier tests would hide a missing one.
_COUNT_LOADS = """
import gc, json, sys
from trainer_cli import _jit
from trainer_cli.run import loop as run_loop, start_run

def loaded():  # (kernel, argument types) compiled or loaded so far
    return sum(len(k._compiled.overloads) for k in gc.get_objects()
               if isinstance(k, _jit.Kernel) and k._compiled is not None)

counts = []
real_run, real_end = run_loop.TrainingLoop.run, run_loop.TrainingLoop._end_epoch

def run(self):
    counts.append(loaded())
    return real_run(self)

def end_epoch(self):    # the first epoch's end: its steps and its validation are done
    real_end(self)
    if len(counts) == 1:
        counts.append(loaded())

run_loop.TrainingLoop.run, run_loop.TrainingLoop._end_epoch = run, end_epoch
result = start_run(sys.argv[1], json.loads(sys.argv[3]), run_root=sys.argv[2])
print(json.dumps([result.status, _jit.enabled()] + counts))
"""


def test_after_loading_ahead_the_first_step_and_validation_load_no_kernel(tmp_path):
    import json
    import subprocess
    import sys

    config = write_config(tmp_path)
    overrides = json.dumps(BIGGER + ["checkpoint.every_steps=null"])
    proc = subprocess.run([sys.executable, "-c", _COUNT_LOADS, str(config), str(tmp_path / "r"),
                           overrides],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    status, enabled, before, after = json.loads(proc.stdout.splitlines()[-1])
    assert status == "finished" and enabled
    assert before > 0 and after == before, (before, after)


def test_a_model_file_of_the_users_runs_once(tmp_path):
    calls = tmp_path / "calls.txt"
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "counted.py").write_text(
        "from trainer_cli.gluon import nn\n"
        "def build(classes=4):\n"
        "    with open(%r, 'a') as f:\n"
        "        f.write('built\\n')\n"
        "    net = nn.HybridSequential()\n"
        "    net.add(nn.Dense(128, activation='relu'), nn.Dense(classes))\n"
        "    return net\n" % str(calls))
    config = write_config(tmp_path)
    assert start_run(config, BIGGER + ["model.name=counted", "model.args={classes: 4}"],
                     run_root=tmp_path / "runs").status == "finished"
    assert calls.read_text() == "built\n"


def test_the_twins_warnings_stay_out_of_the_users_terminal(tmp_path):
    # A learning rate that overflows: the twin's validation pass after its one update overflows
    # in a matmul too. Its warnings would reach the terminal before the run's first line (Python
    # shows them with their source lines); the run's own non-finite check reports its steps.
    import warnings

    config = write_config(tmp_path)
    overflowing = BIGGER + ["grad_clip=null", "nan_policy=skip", "steps=4",
                            "optimizer={name: sgd, params: {learning_rate: 1e30}}"]
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        result = start_run(config, overflowing, run_root=tmp_path / "runs")
    assert result.status == "finished"
    assert [str(w.message) for w in shown] == []
    log = (only_run_dir(tmp_path / "runs") / "train.log").read_text()
    # NumPy's floating-point warnings are not repeated: the run's own check says it, with the step.
    assert "encountered" not in log and "update skipped" in log, log
    assert "not loaded ahead" not in log


# --------------------------------------------------------------------------------------------
# A run that waits for numba to compile says so, once (a first run on a machine would otherwise
# sit silent before its first line).

class _Messages(Reporter):
    def __init__(self):
        self.texts = []

    def message(self, text):
        self.texts.append(text)


def _compile_two_kernels(parts):
    import numba     # no cache: each call compiles afresh, as a kernel new to the machine would
    numba.njit(lambda x: x + 1)(1)
    numba.njit(lambda x: x * 2)(1.5)


def test_a_run_that_compiles_kernels_says_so_once(tmp_path, monkeypatch):
    monkeypatch.setattr(session, "preload_kernels", _compile_two_kernels)
    told = _Messages()
    result = start_run(write_config(tmp_path), run_root=tmp_path / "runs", reporter=told)
    assert result.status == "finished"
    assert told.texts.count(_jit.COMPILING) == 1
    log = (only_run_dir(tmp_path / "runs") / "train.log").read_text()
    assert "compiled first, not yet in numba's cache)" in log


def test_the_notice_is_for_compiling_only_and_only_within_its_block(tmp_path):
    # numba's cache in a folder of the test's: the first process compiles, the second loads.
    module = tmp_path / "one_kernel.py"
    module.write_text("def add_one(x):\n    return x + 1\n")
    script = (
        "import sys; sys.path.insert(0, %r)\n"
        "import numba, one_kernel\n"
        "from trainer_cli import _jit\n"
        "_jit.warm_up()\n"
        "told = []\n"
        "kernel = numba.njit(one_kernel.add_one, cache=True)\n"
        "with _jit.on_first_compile(lambda: told.append(1)):\n"
        "    kernel(1)\n"
        "    kernel(2.5)\n"
        "numba.njit(lambda x: -x)(1)\n"
        "print(len(told))\n" % str(tmp_path))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env=env, cwd=REPO, timeout=300) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    # Two signatures compiled, told once; then both loaded from the cache, not told; the
    # compile after the block is not told either.
    assert [run.stdout.split() for run in runs] == [["1"], ["0"]]


def test_a_block_entered_before_numba_is_imported_listens_once_a_kernel_imports_it():
    # A command that may fail before any kernel runs (a wrong run directory) does not import
    # numba for the notice's sake; the block starts listening when the first kernel does.
    script = (
        "import sys\n"
        "from trainer_cli import _jit\n"
        "told = []\n"
        "with _jit.on_first_compile(lambda: told.append(1)) as watch:\n"
        "    before = 'numba' in sys.modules\n"
        "    kernel = _jit.jit(lambda x: x + 1)\n"
        "    kernel(1)\n"
        "    kernel(2.5)\n"
        "_jit.jit(lambda x: -x)(1)\n"
        "print(before, len(told), watch.told, len(_jit._waiting))\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=REPO, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["False", "1", "True", "0"]
