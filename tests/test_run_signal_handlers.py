"""The stop-signal handlers in one process (the end-to-end runs are in test_run_signals.py)."""
import os
import signal
import time

import pytest

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
