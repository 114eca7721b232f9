"""Small checkpoints are written on a background thread while training goes on
(run/background.py, Recorder.checkpoint): the files are those a save in the training thread
writes, the run waits for the last one, and a failed save still stops the run."""
import errno
import os
import sys
import threading
import time
from pathlib import Path

import pytest

from run_helpers import (StopAt, assert_bitwise_equal, checkpoint_files, final_arrays, latest_dir,
                         no_fsync, only_run_dir, write_config)
from trainer_cli.run import layout, session, start_run
from trainer_cli.run.background import BackgroundJob


def test_background_and_foreground_saves_write_the_same_files(tmp_path, monkeypatch):
    no_fsync(monkeypatch)
    config = write_config(tmp_path)
    overrides = ["checkpoint.keep_last=100"]
    background = start_run(config, overrides, run_root=tmp_path / "bg")
    monkeypatch.setattr(session, "BACKGROUND_SAVE_BYTES", -1)   # every save in this thread
    foreground = start_run(config, overrides, run_root=tmp_path / "fg")
    bg_dir, fg_dir = (only_run_dir(tmp_path / r) for r in ("bg", "fg"))
    bg, fg = checkpoint_files(bg_dir), checkpoint_files(fg_dir)
    assert len(bg) > 3 and bg == fg
    assert background.summary["checkpoint"] == str(latest_dir(bg_dir))
    assert foreground.summary["checkpoint"] == str(latest_dir(fg_dir))
    log = (bg_dir / "train.log").read_text()
    assert all("checkpoint %s saved" % layout.checkpoint_name(s) in log for s in bg)
    assert "kernels loaded in" in log


def test_a_save_copies_the_state_it_was_asked_for(tmp_path, monkeypatch):
    """Training goes on while a save is written: the checkpoint holds the weights of its step."""
    no_fsync(monkeypatch)
    from trainer_cli.run import checkpoint
    gate, real = threading.Event(), checkpoint.begin_checkpoint

    def slow(run_dir, step, files, meta):
        gate.wait(30)          # let several steps change the weights first
        return real(run_dir, step, files, meta)

    monkeypatch.setattr(checkpoint, "begin_checkpoint", slow)
    config = write_config(tmp_path)

    class Opens(session.Reporter):
        def progress(self, step, *args):
            if step == 7:
                gate.set()

    start_run(config, ["checkpoint.every_epoch=false", "checkpoint.keep_last=100"],
              run_root=tmp_path / "a", reporter=Opens())
    monkeypatch.setattr(session, "BACKGROUND_SAVE_BYTES", -1)
    monkeypatch.setattr(checkpoint, "begin_checkpoint", real)
    start_run(config, ["checkpoint.every_epoch=false", "checkpoint.keep_last=100"],
              run_root=tmp_path / "b")
    a = checkpoint_files(only_run_dir(tmp_path / "a"))
    b = checkpoint_files(only_run_dir(tmp_path / "b"))
    assert a[4] == b[4]


def test_a_save_too_large_for_the_background_copies_nothing(tmp_path, monkeypatch):
    """Written in the training thread from the live arrays: a copy would double the model's
    memory for nothing."""
    no_fsync(monkeypatch)
    from trainer_cli.run import checkpoint
    real, copies = checkpoint.snapshot, []

    def spy(*args, copy=True):
        copies.append(copy)
        return real(*args, copy=copy)

    monkeypatch.setattr(checkpoint, "snapshot", spy)
    monkeypatch.setattr(session, "BACKGROUND_SAVE_BYTES", -1)
    start_run(write_config(tmp_path), ["checkpoint.keep_last=100"], run_root=tmp_path / "r")
    assert len(checkpoint_files(only_run_dir(tmp_path / "r"))) > 3
    assert copies and not any(copies)


def test_a_large_save_is_finished_from_its_files_while_training_goes_on(tmp_path, monkeypatch):
    """Its bytes are written in the training thread; the CRCs, digests and fsyncs come later, on
    the background thread, from the files: the weights training changes meanwhile stay out."""
    no_fsync(monkeypatch)
    from trainer_cli.run import checkpoint
    gate, real, threads = threading.Event(), checkpoint.PendingCheckpoint.finish_steps, set()

    def slow(self):
        threads.add(threading.current_thread() is threading.main_thread())
        gate.wait(30)
        return (yield from real(self))

    class Opens(session.Reporter):
        def progress(self, step, *args):
            if step == 7:
                gate.set()

    monkeypatch.setattr(session, "BACKGROUND_SAVE_BYTES", -1)
    overrides = ["checkpoint.every_epoch=false", "checkpoint.keep_last=100"]
    monkeypatch.setattr(checkpoint.PendingCheckpoint, "finish_steps", slow)
    start_run(write_config(tmp_path), overrides, run_root=tmp_path / "a", reporter=Opens())
    monkeypatch.setattr(checkpoint.PendingCheckpoint, "finish_steps", real)
    monkeypatch.setattr(session, "BACKGROUND_SAVE_BYTES", 1 << 40)    # copies, as before
    start_run(write_config(tmp_path), overrides, run_root=tmp_path / "b")
    a = checkpoint_files(only_run_dir(tmp_path / "a"))
    b = checkpoint_files(only_run_dir(tmp_path / "b"))
    assert threads == {True, False}    # the last save ends the run in the training thread
    assert len(a) > 3 and a == b


def test_a_large_save_failing_in_the_background_stops_the_run_and_keeps_the_last(
        tmp_path, monkeypatch):
    no_fsync(monkeypatch)
    from trainer_cli._npz import DeferredNpz
    real, calls = DeferredNpz.finish_steps, []

    def fills_up(self, file):
        calls.append(1)
        if len(calls) == 5:         # the third checkpoint's first file
            raise OSError(errno.ENOSPC, "No space left on device")
        return (yield from real(self, file))

    monkeypatch.setattr(DeferredNpz, "finish_steps", fills_up)
    monkeypatch.setattr(session, "BACKGROUND_SAVE_BYTES", -1)
    with pytest.raises(layout.RunDirError) as caught:
        start_run(write_config(tmp_path), ["checkpoint.every_epoch=false"],
                  run_root=tmp_path / "r")
    text = str(caught.value)
    assert "step-12" in text and "No space left on device" in text and "step-8 is kept" in text
    run_dir = only_run_dir(tmp_path / "r")
    assert layout.read_latest(run_dir) == 8
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["latest", "step-4",
                                                                            "step-8"]


def test_large_saves_are_waited_for_beside_a_writer_process(tmp_path, monkeypatch):
    """A run that starts the writer process for its many saves still finishes large checkpoints
    on the thread: each is waited for before the next and at the end, so `latest` ends on the
    last one and every save is logged."""
    no_fsync(monkeypatch)
    from trainer_cli.run import checkpoint
    real = checkpoint.PendingCheckpoint.finish_steps

    def slow(self):
        time.sleep(0.3)         # later than the steps up to the next save
        return (yield from real(self))

    monkeypatch.setattr(checkpoint.PendingCheckpoint, "finish_steps", slow)
    monkeypatch.setattr(session, "BACKGROUND_SAVE_BYTES", -1)
    monkeypatch.setattr(session, "PROCESS_SAVES", 1)
    result = start_run(write_config(tmp_path), ["checkpoint.every_epoch=false",
                                                "checkpoint.keep_last=100"],
                       run_root=tmp_path / "r")
    run_dir = only_run_dir(tmp_path / "r")
    steps = sorted(checkpoint_files(run_dir))
    assert len(steps) > 3 and layout.read_latest(run_dir) == steps[-1]
    assert result.summary["checkpoint"] == str(latest_dir(run_dir))
    log = (run_dir / "train.log").read_text()
    assert all("checkpoint %s saved" % layout.checkpoint_name(s) in log for s in steps)


def test_no_writer_process_for_checkpoints_too_large_to_copy(tmp_path, monkeypatch):
    no_fsync(monkeypatch)
    real, started = session.SaveProcess, []

    def counted(**kwargs):
        started.append(1)
        return real(**kwargs)

    monkeypatch.setattr(session, "SaveProcess", counted)
    monkeypatch.setattr(session, "PROCESS_SAVES", 1)
    config = write_config(tmp_path)
    overrides = ["checkpoint.every_epoch=false", "checkpoint.keep_last=100"]
    start_run(config, overrides, run_root=tmp_path / "a")
    assert started == [1]
    monkeypatch.setattr(session, "BACKGROUND_SAVE_BYTES", 100)   # less than the weights
    start_run(config, overrides, run_root=tmp_path / "b")
    assert started == [1]
    assert len(checkpoint_files(only_run_dir(tmp_path / "b"))) > 3


def test_a_stop_during_a_large_background_save_finishes_it_and_resumes_exactly(
        tmp_path, monkeypatch):
    """Ctrl-C while step 4's save is finishing on the thread: the stop's own checkpoint waits for
    it (taking its remaining steps over), both verify, and the resumed run ends with the bits of
    a run never stopped."""
    no_fsync(monkeypatch)
    from trainer_cli.run import checkpoint, resume_run
    real, finishers = checkpoint.PendingCheckpoint.finish_steps, []

    def slow(self):
        for _ in range(4):
            time.sleep(0.05)
            yield
        finishers.append((self.step, threading.current_thread() is threading.main_thread()))
        return (yield from real(self))

    monkeypatch.setattr(checkpoint.PendingCheckpoint, "finish_steps", slow)
    monkeypatch.setattr(session, "BACKGROUND_SAVE_BYTES", -1)
    config = write_config(tmp_path)
    overrides = ["checkpoint.every_epoch=false", "checkpoint.keep_last=100"]
    whole = start_run(config, overrides, run_root=tmp_path / "whole")
    cut = start_run(config, overrides, run_root=tmp_path / "cut", reporter=StopAt(5))
    assert cut.status == "interrupted"
    assert (4, True) in finishers        # the stop took step 4's remaining steps over
    cut_dir = only_run_dir(tmp_path / "cut")
    assert sorted(checkpoint_files(cut_dir)) == [4, 5]      # each verified
    assert layout.read_latest(cut_dir) == 5
    assert resume_run(cut_dir).status == "finished"
    whole_params, whole_states = final_arrays(Path(whole.summary["run_dir"]))
    params, states = final_arrays(cut_dir)
    assert_bitwise_equal(whole_params, params)
    assert_bitwise_equal(whole_states, states)


def test_background_job_hands_back_results_and_errors_in_order():
    job = BackgroundJob()
    assert job.wait() is None
    seen = []
    job.start(lambda: seen.append(1) or "first")
    assert job.wait() == "first"
    job.start(lambda: seen.append(2))
    job.start(lambda: seen.append(3) or "third")     # waits for the one before
    assert job.wait() == "third" and seen == [1, 2, 3]

    def fails():
        raise OSError(28, "No space left on device")

    job.start(fails)
    with pytest.raises(OSError, match="No space"):
        job.wait()
    assert job.wait() is None          # an error is handed back once


def _priority():
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread priority is Linux's")
def test_a_stepwise_job_runs_in_spare_cycles_and_the_waiter_takes_over():
    """The background thread runs at the lowest priority until someone waits; the waiter then
    runs the remaining steps itself, at its own priority."""
    job = BackgroundJob()
    ran = []
    in_second_step = threading.Event()

    def steps():
        for i in range(5):
            ran.append((threading.current_thread() is threading.main_thread(), _priority()))
            if i == 1:
                in_second_step.set()
                job._hand_over.wait(30)     # until wait() asks for the rest
            yield
        return "done"

    job.start_steps(steps())
    # Waited for: on a busy machine the thread may not have started its first step before
    # wait() asks for the rest (the waiter then rightly runs every step itself).
    assert in_second_step.wait(30)
    assert job.wait() == "done"
    main_priority = _priority()
    assert ran == [(False, 19), (False, 19)] + [(True, main_priority)] * 3


def test_a_stepwise_job_hands_back_its_result_and_errors():
    job = BackgroundJob()

    def quick():
        yield
        return 42

    job.start_steps(quick())
    job._thread.join()                  # ended on its own thread
    assert job.wait() == 42 and job.wait() is None

    def fails(after):
        for _ in range(after):
            yield
        raise OSError(28, "No space left on device")

    job.start_steps(fails(0))
    job._thread.join()
    with pytest.raises(OSError, match="No space"):
        job.wait()

    def fails_later():
        job._hand_over.wait(30)
        yield
        yield from fails(2)            # in the waiter

    job.start_steps(fails_later())
    with pytest.raises(OSError, match="No space"):
        job.wait()
    assert job.wait() is None
