"""A hostile or failing environment around a run directory: FIFOs and devices in place of its
files, symlinked checkpoints, lying ``.npy`` headers, a read-only filesystem, a full disk, the
umask, and a concurrent writer. Each is refused with exit 2 naming the file, never a hang, a
MemoryError or a traceback."""
import errno
import io
import json
import os
import signal
import stat
import zipfile
from contextlib import contextmanager

import numpy as np
import pytest
from click.testing import CliRunner

from run_helpers import latest_dir, no_fsync, only_run_dir, write_config
from trainer_cli.cli import main
from trainer_cli.run import layout
from trainer_cli.run.rundir import RunLock


@pytest.fixture(autouse=True)
def _fast_disk(monkeypatch):
    no_fsync(monkeypatch)


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


class Blocked(BaseException):
    """Not an OSError (TimeoutError is one, which the code under test would catch)."""


@contextmanager
def deadline(seconds):
    """Fail (instead of hanging the suite) when the body blocks, e.g. in open() of a FIFO."""
    def expired(signum, frame):
        raise Blocked("still blocked after %d s" % seconds)
    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished run (checkpoints step-4 and step-6) to copy and damage."""
    root = tmp_path_factory.mktemp("hostile")
    path = write_config(root)
    mp = pytest.MonkeyPatch()
    no_fsync(mp)
    try:
        result = invoke("run", path, "--run-dir", root / "runs", "-q", "-o", "epochs=1")
    finally:
        mp.undo()
    assert result.exit_code == 0, result.output
    return only_run_dir(root / "runs")


@pytest.fixture
def run_dir(finished_run, tmp_path):
    import shutil
    copy = tmp_path / finished_run.name
    shutil.copytree(finished_run, copy, symlinks=True)
    return copy


def _expect_refused(result, named):
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert named in result.output, result.output
    assert "Traceback" not in result.output


# ----------------------------------------------------------------------------- item 5
@pytest.mark.parametrize("target", ["latest", "meta.json", "config.yaml", "metrics.jsonl"])
@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_fifo_or_device_in_place_of_a_file_is_refused_at_once(run_dir, target, kind):
    where = {"latest": run_dir / "checkpoints" / "latest", "config.yaml": run_dir / "config.yaml",
             "metrics.jsonl": run_dir / "metrics.jsonl",
             "meta.json": latest_dir(run_dir) / "meta.json"}[target]
    where.unlink()
    if kind == "fifo":
        os.mkfifo(where)
    else:
        where.symlink_to("/dev/zero")
    with deadline(20):
        resumed = invoke("resume", run_dir)
        inspected = invoke("inspect", run_dir)
    _expect_refused(resumed, target)
    assert "not a regular file" in resumed.output
    if target != "metrics.jsonl":  # inspect shows what it can of the metrics and says nothing
        _expect_refused(inspected, target)


def test_a_checkpoint_folder_symlinked_out_of_the_run_directory_is_refused(run_dir, tmp_path):
    folder = latest_dir(run_dir)
    outside = tmp_path / "elsewhere"
    folder.rename(outside)
    folder.symlink_to(outside)
    result = invoke("resume", run_dir)
    _expect_refused(result, "symbolic link")
    assert folder.name in result.output
    assert "--from step-4" in result.output  # the intact one is offered
    _expect_refused(invoke("inspect", run_dir), "symbolic link")
    _expect_refused(invoke("resume", run_dir, "--from", folder.name), "symbolic link")


# ----------------------------------------------------------------------------- item 10
def _rehash(folder):
    """Make meta.json describe the files as they now are (tampering that the hashes miss)."""
    meta = json.loads((folder / "meta.json").read_text())
    for name in meta["files"]:
        meta["files"][name] = {"size": (folder / name).stat().st_size,
                               "sha256": layout.file_digest(folder / name)}
    (folder / "meta.json").write_text(json.dumps(meta))


def _npy_member(header_shape, data: bytes, descr="<f4") -> bytes:
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %r, }" % (descr, header_shape)
    header += " " * (63 - (len(header) + 10) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + data


def _replace_member(path, name, payload):
    with zipfile.ZipFile(path) as zf:
        members = {info.filename: zf.read(info) for info in zf.infolist()}
    members[name] = payload
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for member, data in members.items():
            zf.writestr(member, data)
    path.write_bytes(buf.getvalue())


def test_a_states_header_claiming_4_tb_is_refused_without_allocating(run_dir):
    folder = latest_dir(run_dir)
    states = folder / "trainer.states"
    _replace_member(states, "a0.npy", _npy_member((1 << 40,), b"\0" * 64))
    _rehash(folder)
    result = invoke("resume", run_dir)
    _expect_refused(result, "trainer.states")
    assert "claims" in result.output and "MemoryError" not in result.output
    _expect_refused(invoke("inspect", states), "trainer.states")
    _expect_refused(invoke("inspect", run_dir), "trainer.states")


@pytest.mark.parametrize("damage", ["object_array", "garbage_start"])
def test_a_damaged_states_file_never_advises_unpickling(run_dir, damage):
    folder = latest_dir(run_dir)
    states = folder / "trainer.states"
    if damage == "object_array":
        buf = io.BytesIO()
        np.save(buf, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
        _replace_member(states, "a0.npy", buf.getvalue())
    else:
        data = bytearray(states.read_bytes())
        data[:16] = b"\x80\x04garbage-pickle"
        states.write_bytes(bytes(data))
    _rehash(folder)
    for result in (invoke("resume", run_dir), invoke("inspect", states)):
        _expect_refused(result, "trainer.states")
        assert "allow_pickle" not in result.output


def test_a_read_only_filesystem_is_exit_2_naming_the_lock(run_dir, monkeypatch):
    real_open = os.open

    def read_only(path, flags, *args, **kwargs):
        if os.fspath(path).endswith(".lock"):
            raise OSError(errno.EROFS, "Read-only file system", os.fspath(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    result = invoke("resume", run_dir)
    _expect_refused(result, str(run_dir / ".lock"))
    assert "Read-only file system" in result.output


def test_a_full_disk_names_the_step_and_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    from trainer_cli.run import checkpoint
    real = checkpoint.write_npz_deferred
    calls = []

    def fills_up(f, arrays):
        if os.readlink("/proc/self/fd/%d" % f.fileno()).endswith("params.npz"):
            calls.append(1)
            if len(calls) >= 3:  # the third checkpoint's parameters
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(f, arrays)

    # Small checkpoints are written on a background thread: its error still stops the run.
    monkeypatch.setattr(checkpoint, "write_npz_deferred", fills_up)
    path = write_config(tmp_path)
    result = invoke("run", path, "--run-dir", tmp_path / "runs", "-o", "checkpoint.every_epoch=false")
    assert result.exit_code == 2, result.output
    assert "step-12" in result.output and "No space left on device" in result.output
    assert "step-8 is kept" in result.output and "Traceback" not in result.output
    run_dir = only_run_dir(tmp_path / "runs")
    assert layout.read_latest(run_dir) == 8
    layout.verify_checkpoint(latest_dir(run_dir))
    assert not [p for p in (run_dir / "checkpoints").iterdir() if p.name.startswith(".")]


def test_a_full_disk_under_the_logs_stops_the_run_with_a_clear_error(tmp_path, monkeypatch):
    # The logs are written from a thread of their own: its error still stops the run, naming the
    # file, and the checkpoints before it stay.
    from trainer_cli.run import logs

    class Full:
        def __init__(self, f):
            self.f = f

        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self):
            pass

        def close(self):
            self.f.close()

    real = logs.LogWriter._write_out
    writes = []

    def fills_up(self, handles=None):
        if self._pending:
            writes.append(1)
        if len(writes) >= 3:     # from the third write on, metrics.jsonl's disk is full
            self._files = [Full(f) if path.endswith("metrics.jsonl") and type(f) is not Full
                           else f for f, path in zip(self._files, self._paths)]
        real(self, handles)

    monkeypatch.setattr(logs.LogWriter, "_write_out", fills_up)
    path = write_config(tmp_path)
    result = invoke("run", path, "--run-dir", tmp_path / "runs", "-o", "log_every=1")
    assert result.exit_code == 2, result.output
    assert "No space left on device" in result.output and "Traceback" not in result.output
    assert "unclosed" not in result.output
    run_dir = only_run_dir(tmp_path / "runs")
    assert "cannot write %s" % (run_dir / "metrics.jsonl") in result.output
    assert "is kept and intact" in result.output
    layout.verify_checkpoint(latest_dir(run_dir))


# ----------------------------------------------------------------------------- item 11
@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_files_and_folders_follow_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        path = write_config(tmp_path)
        assert invoke("run", path, "--run-dir", tmp_path / "runs", "-q", "-o", "epochs=1").exit_code == 0
        run_dir = only_run_dir(tmp_path / "runs")
        assert invoke("resume", run_dir, "--from", "step-4", "-q").exit_code == 0
    finally:
        os.umask(old)
    seen = 0
    for folder, dirs, files in os.walk(run_dir):
        for name in dirs:
            assert stat.S_IMODE(os.stat(os.path.join(folder, name)).st_mode) == 0o777 & ~umask, name
        for name in files:
            assert stat.S_IMODE(os.stat(os.path.join(folder, name)).st_mode) == 0o666 & ~umask, name
            seen += 1
    assert seen > 10


# ----------------------------------------------------------------------------- item 12
def test_resume_takes_the_lock_before_choosing_its_checkpoint(run_dir, monkeypatch):
    from trainer_cli.run import checkpoint
    order = []
    real_acquire, real_point = RunLock.acquire, checkpoint.resume_point
    monkeypatch.setattr(RunLock, "acquire", lambda self: (order.append("lock"), real_acquire(self))[1])
    monkeypatch.setattr(checkpoint, "resume_point",
                        lambda *a, **k: (order.append("choose"), real_point(*a, **k))[1])
    assert invoke("resume", run_dir, "-q").exit_code == 0
    assert order[:2] == ["lock", "choose"]


def test_resume_beside_a_live_writer_refuses_before_reading_checkpoints(run_dir):
    # The writer is pruning: latest names a checkpoint that is already gone.
    (run_dir / "checkpoints" / "latest").write_text("step-999\n")
    with RunLock(run_dir):
        result = invoke("resume", run_dir)
    _expect_refused(result, "another trainer process is writing")


# ----------------------------------------------------------------------------- item 9
def _set(meta, dotted, value):
    keys = dotted.split(".")
    for key in keys[:-1]:
        meta = meta[key]
    meta[keys[-1]] = value


@pytest.mark.parametrize("field,value", [
    ("loop.epoch", 1e30), ("loop.epoch", 7), ("loop.epoch", -1), ("loop.step", "6"),
    ("loop.batch_in_epoch", 99), ("loop.samples", -5), ("loop.skipped", 1.5),
    ("loop.finished", "yes"), ("loop.elapsed_s", "soon"), ("loop.latest", {"train_loss": "low"}),
    ("loop.train", {"loss_sum": "x", "count": 1, "metrics": {}}), ("loop.stop_reason", 3),
    ("rng", {"not": "a state"}), ("step", -6)])
def test_meta_json_fields_of_wrong_type_or_range_are_exit_2_naming_the_field(run_dir, field, value):
    meta_path = latest_dir(run_dir) / "meta.json"
    meta = json.loads(meta_path.read_text())
    _set(meta, field, value)
    meta_path.write_text(json.dumps(meta))
    before = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    result = invoke("resume", run_dir)
    _expect_refused(result, "meta.json")
    assert field.split(".")[-1] in result.output, result.output
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == before  # nothing moved


def _tamper_states(folder, change):
    from trainer_cli._npz import write_npz
    path = folder / "trainer.states"
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(arrays.pop("__header__").tobytes())
    change(header, arrays)
    buf = io.BytesIO()
    write_npz(buf, {"__header__": np.frombuffer(json.dumps(header).encode(), np.uint8), **arrays})
    path.write_bytes(buf.getvalue())
    _rehash(folder)


def _first_leaf(header):
    layout_ = header["devices"][0]["states"][0]["state"]
    while "array" not in layout_:
        layout_ = next(iter(layout_.values()))[0]
    return layout_


def _wrong_shape(header, arrays):
    leaf = _first_leaf(header)
    arrays[leaf["array"]] = np.zeros((2, 2), np.float32)
    leaf["shape"] = [2, 2]


def _float64(header, arrays):
    leaf = _first_leaf(header)
    arrays[leaf["array"]] = arrays[leaf["array"]].astype(np.float64)
    leaf["dtype"] = "float64"


def _fewer(header, arrays):
    header["devices"][0]["states"].pop()


def _nan_state(header, arrays):
    arrays[_first_leaf(header)["array"]][...] = np.nan


@pytest.mark.parametrize("change,said", [
    (_wrong_shape, "[2, 2]"), (_float64, "float64"), (_fewer, "no state for parameter"),
    (_nan_state, "NaN/Inf")])
def test_tampered_states_with_matching_hashes_are_exit_2(run_dir, change, said):
    _tamper_states(latest_dir(run_dir), change)
    result = invoke("resume", run_dir)
    _expect_refused(result, "trainer.states")
    assert said in result.output


def test_params_of_another_dtype_with_matching_hashes_are_exit_2(run_dir):
    from trainer_cli._npz import write_npz
    folder = latest_dir(run_dir)
    path = folder / "params.npz"
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k].astype(np.float64) for k in z.files}
    buf = io.BytesIO()
    write_npz(buf, arrays)
    path.write_bytes(buf.getvalue())
    _rehash(folder)
    result = invoke("resume", run_dir)
    _expect_refused(result, "params.npz")
    assert "float64" in result.output


def test_kvstore_residuals_with_no_matching_names_are_exit_2(tmp_path):
    from trainer_cli._npz import write_npz
    path = write_config(tmp_path)
    args = ("-o", "context=[cpu:0, cpu:1]", "-o", "kvstore=device",
            "-o", "compression={type: 2bit, threshold: 0.05}", "-o", "epochs=1")
    assert invoke("run", path, "--run-dir", tmp_path / "runs", "-q", *args).exit_code == 0
    run_dir = only_run_dir(tmp_path / "runs")
    folder = latest_dir(run_dir)
    with np.load(folder / "kvstore.npz", allow_pickle=False) as z:
        arrays = {"x" + k: z[k] for k in z.files}
    buf = io.BytesIO()
    write_npz(buf, arrays)
    (folder / "kvstore.npz").write_bytes(buf.getvalue())
    _rehash(folder)
    result = invoke("resume", run_dir)
    _expect_refused(result, "kvstore.npz")
    assert "not a residual name" in result.output


# ----------------------------------------------------------------------------- metrics.jsonl lines
FOREIGN_LINES = {
    "nested too deep": b"[" * 200000 + b"\n",
    "longer than any row": b'{"kind": "train", "step": 1, "pad": "' + b"x" * (3 << 20) + b'"}\n',
    "not a row": b'{"kind": "train", "step": true}\n',
}


@pytest.mark.parametrize("name", sorted(FOREIGN_LINES))
def test_a_foreign_line_in_metrics_jsonl_is_passed_over_not_fatal(run_dir, name):
    # A line no run writes (a JSON bomb, a line of megabytes) is skipped as a torn line is, by
    # every command that reads the log, and resume drops it from the file.
    path = run_dir / layout.METRICS_FILE
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:2]) + FOREIGN_LINES[name] + b"".join(lines[2:]))
    for args in (("runs", run_dir.parent), ("report", run_dir), ("plot", run_dir),
                 ("inspect", run_dir)):
        result = invoke(*args)
        assert result.exit_code == 0, (args, result.output, result.exception)
    result = invoke("resume", run_dir, "-q", "-o", "epochs=2")
    assert result.exit_code == 0, (result.output, result.exception)
    after = path.read_bytes().splitlines(keepends=True)
    assert after[:len(lines)] == lines and FOREIGN_LINES[name] not in after
    assert all(json.loads(line)["step"] > json.loads(lines[-1])["step"]
               for line in after[len(lines):])


BOMB = "[" * 200000     # JSON nested deeper than the parser's recursion limit


def test_json_nested_too_deep_in_a_checkpoints_files_is_damage_not_a_crash(run_dir):
    folder = latest_dir(run_dir)
    states = folder / "trainer.states"
    buf = io.BytesIO()
    np.save(buf, np.frombuffer(BOMB.encode(), np.uint8))
    _replace_member(states, "__header__.npy", buf.getvalue())
    _rehash(folder)
    for result in (invoke("resume", run_dir), invoke("inspect", states)):
        _expect_refused(result, "trainer.states")
        assert "nested too deeply" in result.output and "RecursionError" not in result.output
    (folder / "meta.json").write_text(BOMB)
    _expect_refused(invoke("resume", run_dir), "meta.json")
    # The commands that look back at runs show the run, its damaged checkpoint unread.
    for args in (("runs", run_dir.parent), ("report", run_dir), ("plot", run_dir)):
        result = invoke(*args)
        assert result.exit_code == 0, (args, result.output, result.exception)


def _scheduler_differing_from_lr(header, arrays):
    header["optimizer"]["hyperparams"]["lr_scheduler"] = {
        "class": "FactorScheduler", "params": {"step": 3, "factor": 1, "base_lr": 0.5},
        "attrs": {"base_lr": 0.5, "warmup_final_lr": 0.5}}


def test_a_library_warning_while_loading_a_checkpoint_is_a_run_message(run_dir, capfd):
    # A states header whose scheduler differs from its learning rate: the optimizer warns. The
    # warning is one of the run's messages (train.log), not Python's stderr line with its source.
    import warnings
    _tamper_states(latest_dir(run_dir), _scheduler_differing_from_lr)
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # as outside pytest
        result = invoke("resume", run_dir)
    err = capfd.readouterr().err
    assert "UserWarning" not in result.output + err and "warnings.warn" not in result.output + err
    log = (run_dir / "train.log").read_text()
    assert "warning: learning rate from ``lr_scheduler`` has been overwritten" in log, log
