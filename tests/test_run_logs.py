"""The run's log files are written from memory by LogWriter: soon, in order, at once on flush,
and a write error reaches the caller."""
from __future__ import annotations

import errno
import time

import pytest

from trainer_cli.run.logs import LogWriter


def test_texts_reach_their_files_in_order_within_the_delay_without_a_flush(tmp_path):
    writer = LogWriter(delay=0.05)
    a, b = writer.open(tmp_path / "a.log", encoding="utf-8"), writer.open(tmp_path / "b.log")
    try:
        for k in range(100):
            writer.add(a, "a%d\n" % k)
            writer.add(b, "b%d\n" % k)
        deadline = time.monotonic() + 30      # a hang guard: written after 0.05 s
        while (tmp_path / "b.log").read_text().count("\n") < 100:
            assert time.monotonic() < deadline, "the thread never wrote the texts"
            time.sleep(0.01)
        assert (tmp_path / "a.log").read_text() == "".join("a%d\n" % k for k in range(100))
        assert (tmp_path / "b.log").read_text() == "".join("b%d\n" % k for k in range(100))
        writer.add(a, "later\n")
    finally:
        writer.close()
    assert (tmp_path / "a.log").read_text().endswith("a99\nlater\n")


def test_flush_writes_now_and_close_writes_the_rest(tmp_path):
    writer = LogWriter(delay=3600)          # only flush and close write
    f = writer.open(tmp_path / "x.log")
    writer.add(f, "one\n")
    assert (tmp_path / "x.log").read_text() == ""
    writer.flush()
    assert (tmp_path / "x.log").read_text() == "one\n"
    writer.add(f, "two\n")
    writer.close()
    assert (tmp_path / "x.log").read_text() == "one\ntwo\n"


class _FullFile:
    """A file whose writes fail as on a full disk."""

    def write(self, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self):
        pass

    def close(self):
        pass


def test_a_write_error_is_raised_in_the_callers_thread_once(tmp_path):
    writer = LogWriter(delay=0.01)
    f = writer.open(tmp_path / "x.log")
    real, writer._files[f] = writer._files[f], _FullFile()
    writer.add(f, "lost\n")
    deadline = time.monotonic() + 30
    while writer._error is None:             # the thread's write failed
        assert time.monotonic() < deadline
        time.sleep(0.01)
    with pytest.raises(OSError, match="No space left") as raised:
        writer.add(f, "not added\n")          # raised before it is kept
    assert raised.value.filename == str(tmp_path / "x.log")
    writer.add(f, "next\n")                   # raised once: this one is kept
    with pytest.raises(OSError, match="No space left"):
        writer.flush()                        # and fails too, in this thread
    writer._files[f] = real                   # space again
    writer.add(f, "after\n")
    writer.close()
    assert (tmp_path / "x.log").read_text() == "after\n"


def test_texts_made_on_the_writing_thread_keep_their_order_and_raise_their_errors(tmp_path):
    writer = LogWriter(delay=3600)
    f = writer.open(tmp_path / "x.log")
    writer.add(f, "plain\n")
    writer.add(f, {"step": 3}, lambda row: "step %d\n" % row["step"])
    writer.add(f, "after\n")
    writer.flush()
    assert (tmp_path / "x.log").read_text() == "plain\nstep 3\nafter\n"
    writer.add(f, {}, lambda row: "step %d\n" % row["step"])
    with pytest.raises(KeyError):
        writer.flush()
    writer.close()


def test_metric_lines_hold_no_more_than_a_row_of_a_longer_line():
    import io

    from trainer_cli.run.logs import MAX_ROW_BYTES, metric_lines, row_of

    good = b'{"kind":"train","step":3,"epoch":1}\n'
    data = good + b"x" * (5 * MAX_ROW_BYTES) + b"\n" + good + b"y" * (2 * MAX_ROW_BYTES)
    got = list(metric_lines(io.BytesIO(data)))
    assert len(got) == 4 and max(map(len, got)) <= MAX_ROW_BYTES + 1
    assert [row_of(line) for line in got] == [{"kind": "train", "step": 3, "epoch": 1}, None] * 2


def test_row_of_takes_rows_only():
    from trainer_cli.run.logs import row_of

    assert row_of('{"step": 2, "kind": "val"}') == {"step": 2, "kind": "val"}
    for line in ('{"step": true}', '{"step": 2.0}', '[{"step": 2}]', '{"kind": "val"}', '{"st',
                 "[" * 100000, b'{"step": 1, "x": "\xff"}'):
        assert row_of(line) is None, line[:20]


def test_a_nan_or_inf_metric_is_null_in_the_json_and_empty_in_the_csv(tmp_path):
    import json

    from trainer_cli.run.logs import LogWriter, MetricsLog

    writer = LogWriter()
    log = MetricsLog(tmp_path, ["train_loss", "train_accuracy"], writer)
    log.write({"kind": "train", "step": 1, "epoch": 1, "lr": 0.1, "train_loss": float("nan"),
               "train_accuracy": float("inf"), "skipped": 0, "time": 1.5})
    writer.close()
    row = json.loads((tmp_path / "metrics.jsonl").read_text())
    assert row["train_loss"] is None and row["train_accuracy"] is None and row["lr"] == 0.1
    lines = (tmp_path / "metrics.csv").read_text().splitlines()
    assert lines[1] == "train,1,1,0.1,,,0,1.5"


def test_flush_of_some_files_leaves_the_others_pending_in_order(tmp_path):
    writer = LogWriter(delay=3600)
    a, b = writer.open(tmp_path / "a.log"), writer.open(tmp_path / "b.log")
    for k in range(3):
        writer.add(a, "a%d\n" % k)
        writer.add(b, "b%d\n" % k)
    writer.flush((b,))
    assert (tmp_path / "b.log").read_text() == "b0\nb1\nb2\n"
    assert (tmp_path / "a.log").read_text() == ""
    writer.add(a, "a3\n")
    writer.add(b, "b3\n")
    writer.flush((a,))
    assert (tmp_path / "a.log").read_text() == "a0\na1\na2\na3\n"
    writer.close()
    assert (tmp_path / "b.log").read_text() == "b0\nb1\nb2\nb3\n"
