"""The stop-signal handlers in one process (the end-to-end runs are in test_run_signals.py)."""
import os
import signal
import time

import pytest

from trainer_cli.kvstore import mpi
from trainer_cli.run import signals


def _send(sig):
    os.kill(os.getpid(), sig)
    time.sleep(0.01)   # let the handler run


@pytest.mark.parametrize("sig,name,code", [(signal.SIGINT, "SIGINT", 130),
                                           (signal.SIGTERM, "SIGTERM", 143),
                                           (signal.SIGHUP, "SIGHUP", 143)])
def test_the_first_signal_is_a_request_and_copies_of_it_count_once(sig, name, code):
    said, before = [], signal.getsignal(sig)
    with signals.StopOnSignal(on_first=said.append) as stop:
        assert not stop.requested()
        _send(sig)
        _send(signal.SIGTERM)            # a copy arriving with it (scheduler + mpiexec)
        assert stop.requested() and stop.requested()
    assert said == [name] and stop.signame == name and stop.exit_code == code
    assert signal.getsignal(sig) == before


def test_a_second_signal_after_the_window_raises_with_the_first_ones_code(monkeypatch):
    monkeypatch.setattr(signals, "REPEAT_WINDOW_S", 0.05)
    with signals.StopOnSignal() as stop:
        _send(signal.SIGTERM)
        time.sleep(0.06)
        with pytest.raises(signals.Interrupted) as got:
            _send(signal.SIGINT)
    assert stop.requested()
    assert got.value.signame == "SIGTERM" and got.value.exit_code == 143
    assert isinstance(got.value, KeyboardInterrupt)


def test_before_training_any_stop_signal_ends_at_once_with_its_code():
    for sig, code in ((signal.SIGHUP, 143), (signal.SIGINT, 130)):
        with pytest.raises(signals.Interrupted) as got:
            with signals.exit_on_signal():
                _send(sig)
        assert got.value.exit_code == code


def test_after_a_stopped_run_late_copies_are_ignored_and_a_new_signal_still_ends_it(monkeypatch):
    """An MPI rank whose run stopped because another rank had the signal may get its own copy
    while it writes the summary: within the window it is ignored, with the handlers kept
    past the block in a rank (the copy can come as late as the process's exit); later it
    raises."""
    monkeypatch.setattr(signals, "REPEAT_WINDOW_S", 0.2)
    monkeypatch.setenv("PMI_RANK", "0")
    before = {sig: signal.getsignal(sig) for sig in signals.STOP_SIGNALS}
    try:
        with signals.exit_on_signal():
            signals.run_stopped()
            try:
                _send(signal.SIGTERM)            # a late copy: ignored
            except signals.Interrupted:
                pytest.fail("a late copy of the stop raised")
        # Still ours after the block (called here, not sent: the default action would end
        # the test process), and a copy there is ignored too.
        handler = signal.getsignal(signal.SIGTERM)
        assert handler != before[signal.SIGTERM] and callable(handler)
        handler(signal.SIGTERM, None)
        time.sleep(0.25)
        with pytest.raises(signals.Interrupted) as got:
            _send(signal.SIGHUP)                 # past the window: a stop of its own
        assert got.value.exit_code == 143
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


@pytest.mark.parametrize("stopped", [False, True])
def test_outside_an_mpi_rank_the_handlers_are_given_back(monkeypatch, stopped):
    """A run a signal did not stop, or any run of a process that is not an MPI rank (the CLI
    in a test's process), gives the previous handlers back after the block."""
    for name in mpi.RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    before = {sig: signal.getsignal(sig) for sig in signals.STOP_SIGNALS}
    with signals.exit_on_signal():
        if stopped:
            signals.run_stopped()
            _send(signal.SIGTERM)                # inside the block: a late copy, ignored
    assert {sig: signal.getsignal(sig) for sig in signals.STOP_SIGNALS} == before


def test_the_launchers_sigusr1_means_sigint_only_when_it_says_so(monkeypatch):
    monkeypatch.setenv(signals.ENV_RELAY, "1")
    with signals.StopOnSignal() as stop:
        _send(signal.SIGUSR1)
        assert stop.requested() and stop.exit_code == 130
    monkeypatch.delenv(signals.ENV_RELAY)
    with signals.StopOnSignal() as stop:
        old = signal.signal(signal.SIGUSR1, lambda *a: None)
        try:
            _send(signal.SIGUSR1)
        finally:
            signal.signal(signal.SIGUSR1, old)
        assert not stop.requested()
