"""The TensorBoard sink's failures are the run's own clear errors: a full disk (everywhere, or
only under ``tensorboard/``), a folder that cannot be written, and a tensorboardX that cannot be
imported (found before the run directory is made). Exit 2, naming the folder, saying what is
kept; never a raw OSError, never one that hides the run's own message."""
from __future__ import annotations

import errno
import os
import sys

import pytest
from click.testing import CliRunner

from run_helpers import latest_dir, no_fsync, only_run_dir, write_config
from trainer_cli.cli import main
from trainer_cli.run import layout

pytest.importorskip("tensorboardX")  # the [test] extra installs it
from tensorboardX import event_file_writer  # noqa: E402


@pytest.fixture(autouse=True)
def _fast_disk(monkeypatch):
    no_fsync(monkeypatch)


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _run(tmp_path, *overrides):
    return invoke("run", write_config(tmp_path), "--run-dir", tmp_path / "runs",
                  "-o", "logging.tensorboard=true", "-o", "checkpoint.every_epoch=false",
                  *[a for o in overrides for a in ("-o", o)])


def _full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _clear(result):
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output and "OSError" not in result.output, result.output


def test_a_full_disk_keeps_the_runs_own_message(tmp_path, monkeypatch):
    from trainer_cli.run import checkpoint

    real = checkpoint.write_npz_deferred
    calls = []

    def fills_up(f, arrays):
        if os.readlink("/proc/self/fd/%d" % f.fileno()).endswith("params.npz"):
            calls.append(1)
            if len(calls) >= 3:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(f, arrays)

    monkeypatch.setattr(checkpoint, "write_npz_deferred", fills_up)
    # the same disk: the event file cannot be flushed or closed either
    monkeypatch.setattr(event_file_writer.EventsWriter, "close", _full)
    result = _run(tmp_path)
    _clear(result)
    assert "step-12" in result.output and "step-8 is kept" in result.output


def test_only_the_tensorboard_folder_full_stops_the_run_naming_it(tmp_path, monkeypatch):
    real = event_file_writer.EventsWriter.write_event
    events = []

    def fills_up(self, event):
        events.append(1)
        if len(events) > 12:  # after the first checkpoints
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, event)

    monkeypatch.setattr(event_file_writer.EventsWriter, "write_event", fills_up)
    result = _run(tmp_path, "log_every=1")
    _clear(result)
    run_dir = only_run_dir(tmp_path / "runs")
    assert str(run_dir / "tensorboard") in result.output
    assert "No space left on device" in result.output and "kept" in result.output
    layout.verify_checkpoint(latest_dir(run_dir))


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_a_tensorboard_folder_that_cannot_be_written_is_said_before_training(tmp_path,
                                                                            monkeypatch, code):
    def refused(self, *args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(event_file_writer.EventsWriter, "__init__", refused)
    result = _run(tmp_path)
    _clear(result)
    run_dir = only_run_dir(tmp_path / "runs")
    assert str(run_dir / "tensorboard") in result.output and os.strerror(code) in result.output
    assert not layout.list_checkpoints(run_dir)


def test_a_tensorboardx_that_cannot_be_imported_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorboardX.event_file_writer", None)
    result = _run(tmp_path)
    _clear(result)
    assert "logging.tensorboard" in result.output and "tensorboardX" in result.output
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_a_full_tensorboard_folder_is_found_at_the_next_checkpoint(tmp_path, monkeypatch):
    # Events are buffered: the disk says it is full only when they are flushed, which a
    # checkpoint now asks for, rather than only every FLUSH_S seconds and at the end.
    real = event_file_writer.EventsWriter.flush
    flushes = []

    def fills_up(self):
        flushes.append(1)
        if len(flushes) > 1:  # the first flush (at the start) goes through
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self)

    monkeypatch.setattr(event_file_writer.EventsWriter, "flush", fills_up)
    result = _run(tmp_path)
    _clear(result)
    run_dir = only_run_dir(tmp_path / "runs")
    assert "No space left on device" in result.output and str(run_dir / "tensorboard") in result.output
    assert layout.read_latest(run_dir) < 18  # stopped early, not at the end of the run
    layout.verify_checkpoint(latest_dir(run_dir))
