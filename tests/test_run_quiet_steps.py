"""The training loop runs the plain steps between two events (a log row, a validation, a
checkpoint, an epoch's end, the step limit) without asking what is due after each
(``TrainingLoop._quiet_steps``): a run must be the one the step-by-step loop makes, row for row,
checkpoint for checkpoint and bit for bit, and a stop request between events must stop it at the
same step."""
import pytest

from run_helpers import final_arrays, metric_rows, no_fsync, only_run_dir, StopAt, write_config
from trainer_cli.run import loop as run_loop
from trainer_cli.run import start_run
from trainer_cli.run.layout import CHECKPOINTS


def _without_time(rows):
    return [{k: v for k, v in row.items() if k != "time"} for row in rows]


def _saved(run_dir):
    return sorted(p.name for p in (run_dir / CHECKPOINTS).iterdir())


def _both(tmp_path, monkeypatch, overrides, reporter=None):
    """The run with quiet steps and without them: (result, run folder) of each."""
    no_fsync(monkeypatch)
    config = write_config(tmp_path)
    quiet = start_run(config, overrides, run_root=tmp_path / "quiet",
                      reporter=reporter() if reporter else None)
    taken = []
    real = run_loop.TrainingLoop._quiet_steps

    def counted(self, order):
        before = self.state.step
        stopped = real(self, order)
        taken.append(self.state.step - before)
        return stopped

    with monkeypatch.context() as patch:
        patch.setattr(run_loop.TrainingLoop, "_quiet_steps", lambda self, order: False)
        step_by_step = start_run(config, overrides, run_root=tmp_path / "steps",
                                 reporter=reporter() if reporter else None)
    monkeypatch.setattr(run_loop.TrainingLoop, "_quiet_steps", counted)
    again = start_run(config, overrides, run_root=tmp_path / "again",
                      reporter=reporter() if reporter else None)
    assert sum(taken) > 0, "no step was taken as a quiet one"
    return ((quiet, only_run_dir(tmp_path / "quiet")),
            (step_by_step, only_run_dir(tmp_path / "steps")),
            (again, only_run_dir(tmp_path / "again")))


@pytest.mark.parametrize("overrides", [
    ["epochs=4"],
    ["epochs=3", "log_every=5", "validate_every=3", "checkpoint.every_steps=7"],
    ["steps=17", "epochs=100", "log_every=1000", "checkpoint.every_steps=null",
     "checkpoint.every_epoch=false"],
    ["epochs=2", "data.last_batch=rollover", "data.batch_size=14", "log_every=4"],
], ids=["as-written", "odd-cadences", "step-limit", "rollover"])
def test_quiet_steps_make_the_step_by_step_run(tmp_path, monkeypatch, overrides):
    runs = _both(tmp_path, monkeypatch, overrides)
    (first, a), (second, b), (_, c) = runs
    assert first.status == second.status == "finished"
    assert first.summary["steps"] == second.summary["steps"]
    assert _without_time(metric_rows(a)) == _without_time(metric_rows(b)) \
        == _without_time(metric_rows(c))
    assert _saved(a) == _saved(b)
    for got, want in zip(final_arrays(a), final_arrays(b)):
        assert got.keys() == want.keys()
        for key in got:
            assert got[key].tobytes() == want[key].tobytes(), key


def test_a_stop_between_events_stops_at_the_same_step(tmp_path, monkeypatch):
    overrides = ["epochs=6", "log_every=1000", "checkpoint.every_steps=null"]
    (first, a), (second, b), _ = _both(tmp_path, monkeypatch, overrides,
                                       reporter=lambda: StopAt(9))
    assert first.status == second.status == "interrupted"
    assert first.summary["steps"] == second.summary["steps"] == 9
    assert _saved(a) == _saved(b)
    assert _without_time(metric_rows(a)) == _without_time(metric_rows(b))
