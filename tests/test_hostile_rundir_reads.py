"""Hostile run directories met by the commands that look back at runs (``runs``, ``plot``,
``report``, ``inspect``, ``resume``): folders that cannot be read, logs that are FIFOs or links,
rows out of order, a config whose name is not a string, damaged rng state. Each ends with a
listing that says so, or exit 2 naming the file; never a traceback."""
from __future__ import annotations

import errno
import json
import os
import shutil
import signal
from contextlib import contextmanager

import pytest
from click.testing import CliRunner

from run_helpers import latest_dir, no_fsync, one_epoch_run
from trainer_cli.cli import main
from trainer_cli.report.history import load_history
from trainer_cli.report.runs_list import newest_run
from trainer_cli.run import layout


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(autouse=True)
def _fast_disk(monkeypatch):
    no_fsync(monkeypatch)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    return one_epoch_run(tmp_path_factory.mktemp("reads"))


@pytest.fixture
def run_dir(finished_run, tmp_path):
    copy = tmp_path / "runs" / finished_run.name
    shutil.copytree(finished_run, copy, symlinks=True)
    return copy


@contextmanager
def unreadable(folder, monkeypatch):
    """``folder`` as mode 000 makes it. As root, which reads through any mode, the kernel's
    answer is given in Python instead: listing the folder, and anything inside it, is EACCES."""
    folder = os.path.abspath(folder)
    if os.geteuid() != 0:
        os.chmod(folder, 0)
        try:
            yield
        finally:
            os.chmod(folder, 0o755)
        return

    def inside(path, itself):
        if isinstance(path, int):
            return False
        path = os.path.abspath(os.fspath(path))
        return path.startswith(folder + os.sep) or (itself and path == folder)

    def deny(real, itself):
        def call(path, *args, **kwargs):
            if inside(path, itself):
                raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
            return real(path, *args, **kwargs)
        return call

    for name, itself in (("stat", False), ("lstat", False), ("open", True), ("listdir", True),
                         ("scandir", True)):
        monkeypatch.setattr(os, name, deny(getattr(os, name), itself))
    yield
    monkeypatch.undo()


class Blocked(BaseException):
    pass


@contextmanager
def deadline(seconds):
    def expired(signum, frame):
        raise Blocked("still blocked after %d s" % seconds)
    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _refused(result, named):
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert named in result.output, result.output
    assert "Traceback" not in result.output


# --------------------------------------------------------------------- unreadable folders

def test_an_unreadable_folder_under_the_root_is_listed_not_fatal(run_dir, tmp_path, monkeypatch):
    root = run_dir.parent
    locked = root / "locked-20991231-235959"  # the newest by name, were it readable
    shutil.copytree(run_dir, locked)
    with unreadable(locked, monkeypatch):
        result = invoke("runs", root, "--json")
    assert result.exit_code == 0, (result.output, result.exception)
    by_name = {r["name"]: r for r in json.loads(result.output)}
    assert by_name[locked.name]["status"] == "unreadable"
    assert "Permission denied" in by_name[locked.name]["error"]
    assert by_name[run_dir.name]["status"] == "finished"


def test_resume_last_refuses_an_unreadable_newest_run_instead_of_an_older_one(run_dir,
                                                                           monkeypatch):
    # Stepping over it would extend an older run than the user meant, without a word.
    root = run_dir.parent
    locked = root / "locked-20991231-235959"  # the newest by name
    shutil.copytree(run_dir, locked)
    step = load_history(run_dir).step
    with unreadable(locked, monkeypatch):
        with pytest.raises(layout.RunDirError, match="Permission denied"):
            newest_run(root)
        result = invoke("resume", "--last", "--run-dir", root, "-o", "epochs=2", "-q")
    _refused(result, str(locked))
    assert "Permission denied" in result.output
    assert "trainer resume %s" % run_dir in result.output     # what to give instead
    assert load_history(run_dir).step == step                 # the older run is untouched
    assert newest_run(root) == locked                         # readable again: it is the one


@pytest.mark.parametrize("command", ["plot", "report", "inspect", "resume"])
def test_a_checkpoints_folder_of_mode_000(run_dir, monkeypatch, command):
    args = [command, run_dir] + (["-o", "epochs=2"] if command == "resume" else [])
    with unreadable(run_dir / layout.CHECKPOINTS, monkeypatch):
        result = invoke(*args)
    if command in ("inspect", "resume"):
        _refused(result, "checkpoints")
        assert "cannot read" in result.output
    else:  # what can be read is shown, and the problem said
        assert result.exit_code == 0, (result.output, result.exception)
        if command == "report":
            assert "cannot read the checkpoints folder" in (run_dir / "report.html").read_text()


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "directory"])
def test_train_log_not_a_regular_file_is_refused_on_resume(run_dir, kind):
    log = run_dir / layout.LOG_FILE
    log.unlink()
    if kind == "fifo":
        os.mkfifo(log)
    elif kind == "dev_zero":
        os.symlink("/dev/zero", log)
    else:
        log.mkdir()
    with deadline(30):
        result = invoke("resume", run_dir, "-o", "epochs=2", "-q")
    _refused(result, str(log))


# --------------------------------------------------------------------- metrics rows, config

def test_plot_draws_rows_in_step_order_and_ignores_negative_steps(run_dir):
    with open(run_dir / layout.METRICS_FILE, "a") as f:
        f.write(json.dumps({"kind": "train", "step": 1, "epoch": 1, "train_loss": 0.25}) + "\n")
        f.write(json.dumps({"kind": "train", "step": -1, "epoch": 1, "train_loss": 9.0}) + "\n")
        # an lr too large for a float, a time of Infinity (Python's json reads both)
        f.write(json.dumps({"kind": "train", "step": 3, "epoch": 1, "train_loss": 0.5,
                            "lr": 10 ** 400, "time": float("inf")}) + "\n")
    result = invoke("plot", run_dir, "-m", "train_loss", "--json")
    assert result.exit_code == 0, (result.output, result.exception)
    steps = [s for s, _ in json.loads(result.output)["series"][0]["points"]]
    assert steps == sorted(steps) and steps[0] == 1 and -1 not in steps
    drawn = invoke("plot", run_dir, "-m", "train_loss", "--width", "60")
    assert drawn.exit_code == 0, (drawn.output, drawn.exception)
    assert "9" not in drawn.output.splitlines()[2]  # the top label is not the step -1 value
    report = invoke("report", run_dir)
    assert report.exit_code == 0, (report.output, report.exception)


@pytest.mark.parametrize("name", ["[1, 2]", "{a: 1}", "12", "null", "''"])
def test_report_and_runs_on_a_config_whose_name_is_not_a_string(run_dir, name):
    config = run_dir / layout.CONFIG_FILE
    text = config.read_text()
    config.write_text("\n".join(("name: " + name) if line.startswith("name:") else line
                                for line in text.splitlines()) + "\n")
    assert load_history(run_dir).name == run_dir.name
    for args in (["report", run_dir], ["runs", run_dir.parent], ["plot", run_dir]):
        result = invoke(*args)
        assert result.exit_code == 0, (args, result.output, result.exception)


# --------------------------------------------------------------------- meta.json rng state

@pytest.mark.parametrize("change", [
    ("cpu", "state", "state", -1), ("cpu", "state", "inc", 2 ** 200), ("default_seed", -1),
    ("default_seed", 1e300), ("cpu", "state", []), ("cpu", "bit_generator", "MT19937")])
def test_an_unusable_rng_state_is_exit_2_naming_the_field(run_dir, change):
    meta_path = latest_dir(run_dir) / layout.META_FILE
    meta = json.loads(meta_path.read_text())
    target = meta["rng"]
    for key in change[:-2]:
        target = target[key]
    target[change[-2]] = change[-1]
    meta_path.write_text(json.dumps(meta))
    result = invoke("resume", run_dir, "-o", "epochs=2", "-q")
    _refused(result, "meta.json")
    assert "rng" in result.output


# --------------------------------------------------------------------- a disk still full

def test_a_resume_on_a_disk_still_full_is_exit_2_saying_what_is_kept(run_dir, monkeypatch):
    before = {p.name: p.read_bytes() for p in (run_dir / layout.CHECKPOINTS).rglob("*")
              if p.is_file()}

    def full(fd):  # where a full disk reports a write the page cache took
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    result = invoke("resume", run_dir, "-o", "epochs=2", "-q")
    _refused(result, "No space left on device")
    assert "step-6 is kept and intact" in result.output and "OSError" not in result.output
    monkeypatch.undo()
    after = {p.name: p.read_bytes() for p in (run_dir / layout.CHECKPOINTS).rglob("*")
             if p.is_file()}
    assert after == before
    layout.verify_checkpoint(latest_dir(run_dir))
