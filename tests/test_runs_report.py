"""Looking back at runs: the history a run directory gives, ``trainer runs``, ``trainer plot``,
``trainer report`` (HTML), the end-of-run report and sparkline, and ``resume --last`` / ``-o
epochs=N`` extending a run."""
from __future__ import annotations

import json
import os
import re
import struct
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from run_helpers import SMALL, assert_bitwise_equal, final_arrays, load_npz, run_trainer, write_config
from trainer_cli.cli import main
from trainer_cli.report.curves import curve_plot, sparkline
from trainer_cli.report.history import find_runs, load_history, lock_held, run_status
from trainer_cli.report.html_report import config_differences, render_report
from trainer_cli.report.svg_chart import PALETTE, nice_ticks, thin
from trainer_cli.run import layout
from trainer_cli.run.rundir import RunLock


@pytest.fixture(autouse=True)
def _fast_disk(monkeypatch):
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _run(tmp_path, name, *overrides, text=SMALL):
    cfg = write_config(tmp_path, text, name + ".yaml")
    result = invoke("run", cfg, "--run-dir", tmp_path / "runs", "--name", name, "-q",
                    *[a for o in overrides for a in ("-o", o)])
    assert result.exit_code == 0, result.output
    return next(p for p in find_runs(tmp_path / "runs") if p.name.startswith(name + "-"))


# --------------------------------------------------------------------------- history


def test_history_reads_series_checkpoints_and_status(tmp_path):
    run_dir = _run(tmp_path, "a")
    h = load_history(run_dir)
    assert h.status == "finished" and h.step == 18 and h.epoch == 3
    assert h.latest == 18 and [c["step"] for c in h.checkpoints] == [16, 18]
    train = h.series("train_loss")
    assert [s for s, _, _ in train] == list(range(2, 19, 2))
    rows = [json.loads(line) for line in (run_dir / layout.METRICS_FILE).read_text().splitlines()]
    val = [(r["step"], r["val_accuracy"]) for r in rows if r["kind"] == "val"]
    assert [(s, v) for s, _, v in h.series("val_accuracy")] == val
    best = max(val, key=lambda p: (p[1], -p[0]))
    assert h.best("val_accuracy") == best
    assert h.headline_metric() == "val_accuracy"
    assert all(v > 0 for _, _, v in h.samples_per_second())
    assert h.lr_series()[0][2] == pytest.approx(0.01)


def test_history_skips_a_torn_last_line_and_reads_a_run_in_progress(tmp_path):
    run_dir = _run(tmp_path, "a")
    with open(run_dir / layout.METRICS_FILE, "a") as f:
        f.write('{"kind":"train","step":20,"ep')  # a writer killed mid-line
    with RunLock(run_dir):
        assert lock_held(run_dir)
        h = load_history(run_dir)
        assert h.status == "running" and h.step == 18
    assert not lock_held(run_dir)


def test_history_refuses_a_fifo_without_blocking(tmp_path):
    run_dir = _run(tmp_path, "a")
    (run_dir / layout.METRICS_FILE).unlink()
    os.mkfifo(run_dir / layout.METRICS_FILE)
    h = load_history(run_dir)  # would block forever on open() without O_NONBLOCK + S_ISREG
    assert h.rows == [] and any("not a regular file" in p for p in h.problems)


@pytest.mark.parametrize("tail, status, step", [
    ("2026-01-01 00:00:00  training x: model\n2026-01-01 00:00:01  finished after step 9: a\n",
     "finished", 9),
    ("2026-01-01 00:00:00  training x: model\n2026-01-01 00:00:01  interrupted after step 4: a\n",
     "interrupted", 4),
    ("2026-01-01 00:00:00  training x: model\n2026-01-01 00:00:01  early_stopped after step 7: a\n",
     "early_stopped", 7),
    ("2026-01-01 00:00:00  training x: model\n2026-01-01 00:00:01  error at step 3: ValueError: no\n",
     "failed", 3),
    ("2026-01-01 00:00:00  training x: model\n2026-01-01 00:00:01  step 2 (epoch 1)  lr 0.1\n",
     "killed", None),
    # A resume after an interruption that then died: the older status line no longer counts.
    ("2026-01-01 00:00:00  training x: m\n2026-01-01 00:00:01  interrupted after step 4: a\n"
     "2026-01-01 00:00:05  resuming x: m\n", "killed", None),
])
def test_status_from_the_log_tail(tail, status, step):
    got = run_status(tail, locked=False)
    assert (got["status"], got["step"]) == (status, step)
    assert run_status(tail, locked=True)["status"] == "running"


# --------------------------------------------------------------------------- terminal


def test_sparkline_and_curve_plot():
    assert sparkline([3, 2, 1, 0]) == "█▆▃▁"
    line = sparkline(list(range(100, 0, -1)), width=10)
    assert len(line) == 10 and line[0] == "█" and line[-1] == "▁"
    assert sparkline([float("nan"), 1.0, 1.0]) == "▁▁"
    lines = curve_plot([(s, 1.0 / s) for s in range(1, 101)], width=60, height=6, label="loss",
                       mark=(100, "best 0.01"))
    assert lines[0] == "loss" and all(len(line) <= 60 for line in lines)
    body = lines[1:7]
    assert body[0].split("┤")[1].startswith("█")      # the first column reaches the top
    assert body[-1].rstrip().endswith("▁")            # the last sits at the bottom
    assert lines[-1].rstrip().endswith("▲")


def test_trainer_plot_and_runs_commands(tmp_path):
    run_dir = _run(tmp_path, "a")
    result = invoke("plot", run_dir, "-m", "val_accuracy", "-m", "lr", "--width", "70")
    assert result.exit_code == 0, result.output
    assert "val_accuracy" in result.output and "┤" in result.output and "best" in result.output
    bad = invoke("plot", run_dir, "-m", "val_acc")
    assert bad.exit_code == 2 and "did you mean 'val_accuracy'" in bad.output
    data = json.loads(invoke("plot", run_dir, "--json").output)
    assert [s["key"] for s in data["series"]] == ["train_loss", "val_loss", "val_accuracy"]

    _run(tmp_path, "b", "epochs=1")
    listed = json.loads(invoke("runs", tmp_path / "runs", "--json").output)
    assert [r["name"].split("-")[0] for r in listed] == ["a", "b"]
    assert listed[0]["status"] == "finished" and listed[0]["step"] == 18
    assert listed[0]["epoch"] == 3 and listed[0]["last_checkpoint"] == "step-18"
    assert listed[0]["best"]["metric"] == "val_accuracy" and listed[0]["started"]
    table = invoke("runs", tmp_path / "runs")
    assert table.exit_code == 0 and "finished" in table.output
    assert all(len(line) <= 80 for line in table.output.splitlines())


# --------------------------------------------------------------------------- HTML


def test_charts_pieces():
    assert nice_ticks(0, 1, 5) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]
    points = [(x, (x * 7919) % 101) for x in range(10000)]
    thinned = thin(points, 100)
    assert len(thinned) <= 400 and thinned[0] == points[0] and thinned[-1] == points[-1]
    assert max(p[1] for p in thinned) == max(p[1] for p in points)


def test_report_overlays_runs_and_shows_config_differences(tmp_path):
    a = load_history(_run(tmp_path, "a"))
    b = load_history(_run(tmp_path, "b", "optimizer.params.learning_rate=0.05"))
    diffs = dict(config_differences([a, b]))
    assert diffs == {"optimizer.params.learning_rate": [0.01, 0.05]}
    page = render_report([a, b])
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    for color in PALETTE[:2]:
        assert 'stroke="%s"' % color in page
    assert page.count("<svg") >= 4  # loss, accuracy, learning rate, samples/s (by step)
    assert "optimizer.params.learning_rate" in page and "checkpoint step-18" in page


def _png_pixels(data: bytes):
    """(width, height, rows of RGB tuples) of a non-interlaced 8-bit RGB/RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0
    bpp = 3 if color == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, bpp)])
        prev = line
    return width, height, rows


def _chromium(tmp_path, page: Path, *extra):
    import shutil
    import subprocess

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("TRAINER_REQUIRE_CHROMIUM"):
            pytest.fail("chromium is required here (TRAINER_REQUIRE_CHROMIUM) but not installed")
        pytest.skip("Debian's chromium is not installed (.ci/run installs it)")
    args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--user-data-dir=%s" % (tmp_path / "profile"), "--enable-logging=stderr", "--v=0",
            *extra, page.resolve().as_uri()]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return done, console


def test_the_console_check_sees_page_errors(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>undefinedFunction()</script></body></html>")
    _, console = _chromium(tmp_path, page, "--dump-dom")
    assert any("undefinedFunction" in line for line in console)


def test_report_in_headless_chromium_draws_the_curves(tmp_path):
    a = _run(tmp_path, "a")
    b = _run(tmp_path, "b", "optimizer.params.learning_rate=0.05")
    out = tmp_path / "compare.html"
    done = run_trainer("report", a, b, "--output", out)
    assert done.returncode == 0, done.stderr
    assert out.is_file()
    shot = tmp_path / "shot.png"
    done, console = _chromium(tmp_path, out, "--window-size=1300,1500", "--screenshot=%s" % shot)
    assert console == [], console
    width, height, rows = _png_pixels(shot.read_bytes())
    assert (width, height) == (1300, 1500)

    def count(hex_color):
        rgb = tuple(int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
        return sum(1 for row in rows for px in row if all(abs(p - q) <= 40 for p, q in zip(px, rgb)))

    # Each run's curves are drawn in its colour: hundreds of pixels of each, not a legend swatch.
    assert count(PALETTE[0]) > 500 and count(PALETTE[1]) > 500


def test_trainer_run_writes_the_report_and_a_sparkline(tmp_path):
    cfg = write_config(tmp_path)
    result = invoke("run", cfg, "--run-dir", tmp_path / "runs")
    assert result.exit_code == 0, result.output
    run_dir = find_runs(tmp_path / "runs")[0]
    assert (run_dir / "report.html").is_file()
    assert "report:        %s" % (run_dir / "report.html") in result.output
    loss_line = next(line for line in result.output.splitlines() if line.startswith("loss:"))
    assert re.search(r"[▁▂▃▄▅▆▇█]{5,}  best val_accuracy", loss_line)
    summary = json.loads(invoke("run", cfg, "--run-dir", tmp_path / "runs2", "--json").output)
    assert summary["report"].endswith("report.html") and summary["sparkline"]


# --------------------------------------------------------------------------- resume --last, extend


def test_resume_last_extends_a_finished_run_bitwise(tmp_path):
    short = _run(tmp_path, "a", "epochs=2")
    result = invoke("resume", "--last", "--run-dir", tmp_path / "runs", "-o", "epochs=4", "-q")
    assert result.exit_code == 0, result.output
    assert "epochs: 4" in (short / layout.CONFIG_FILE).read_text()
    long = _run(tmp_path, "b", "epochs=4")
    (pa, sa), (pb, sb) = final_arrays(short), final_arrays(long)
    assert load_history(short).step == load_history(long).step
    assert_bitwise_equal(pa, pb)
    assert_bitwise_equal(sa, sb)
    # and once more with steps=, from the extended run
    result = invoke("resume", short, "-o", "epochs=6", "-o", "steps=30", "-q")
    assert result.exit_code == 0, result.output
    assert load_history(short).step == 30


def test_resume_extension_refusals(tmp_path):
    run_dir = _run(tmp_path, "a")
    other = invoke("resume", run_dir, "-o", "optimizer.params.learning_rate=1")
    assert other.exit_code == 2 and "changes only the run's length" in other.output
    shorter = invoke("resume", run_dir, "-o", "epochs=2")
    assert shorter.exit_code == 2 and "nothing to extend" in shorter.output
    neither = invoke("resume")
    assert neither.exit_code == 2 and "--last" in neither.output
    cosine = SMALL + "lr_scheduler: {type: cosine, params: {max_update: 18, final_lr: 0.001}}\n"
    ended = _run(tmp_path, "c", text=cosine)
    refused = invoke("resume", ended, "-o", "epochs=5")
    assert refused.exit_code == 2 and "schedule ended at step 18" in refused.output
    before = load_npz(layout.checkpoint_dir(ended, 18) / layout.PARAMS_FILE)
    assert load_history(ended).step == 18  # nothing changed
    forced = invoke("resume", ended, "-o", "epochs=5", "--force", "-q")
    assert forced.exit_code == 0, forced.output
    assert load_history(ended).step == 30
    assert before  # the old checkpoint was read before; the run went on from it


# --------------------------------------------------------------------------- TensorBoard


def _tensorboard_scalars(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return acc, {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_tensorboard_events_read_back_with_tensorboards_reader(tmp_path):
    run_dir = _run(tmp_path, "a", "logging.tensorboard=true")
    acc, scalars = _tensorboard_scalars(run_dir)
    rows = [json.loads(line) for line in (run_dir / layout.METRICS_FILE).read_text().splitlines()]
    train = [(r["step"], r["train_loss"]) for r in rows if r["kind"] == "train"]
    val = [(r["step"], r["val_accuracy"]) for r in rows if r["kind"] == "val"]
    assert [s for s, _ in scalars["train/loss"]] == [s for s, _ in train]
    assert [v for _, v in scalars["train/loss"]] == pytest.approx([v for _, v in train], rel=1e-6)
    assert [v for _, v in scalars["val/accuracy"]] == pytest.approx([v for _, v in val], rel=1e-6)
    assert [v for _, v in scalars["lr"]] == pytest.approx([0.01] * len(train))
    assert "epoch/loss" in scalars
    assert "config/text_summary" in acc.Tags()["tensors"]


def test_tensorboard_after_resume_has_each_step_once(tmp_path):
    from trainer_cli.run import resume_run

    text = SMALL.replace("keep_last: 2", "keep_last: 10") + "logging: {tensorboard: true}\n"
    run_dir = _run(tmp_path, "a", text=text)
    # Going back to step-8 is what a resume after kill -9 at step 13 looks like: rows and events
    # past the checkpoint exist, and must not show twice.
    assert resume_run(run_dir, 8).status == "finished"
    _, scalars = _tensorboard_scalars(run_dir)
    assert [s for s, _ in scalars["train/loss"]] == list(range(2, 19, 2))


# --------------------------------------------------------------------------- display, completion


@pytest.mark.parametrize("width", [40, 60, 80, 120])
def test_progress_line_keeps_step_loss_and_eta_at_any_width(width):
    import io

    from rich.console import Console

    from trainer_cli.run.progress import RichReporter, _StatusColumn

    reporter = RichReporter(io.StringIO())
    reporter.console = Console(file=io.StringIO(), width=width)
    reporter._t0 -= 10  # ten seconds in
    reporter.progress(120, 500, 3, 0.1234, 0.001, 5000.0)
    reporter.console.print(_StatusColumn(reporter))
    line = reporter.console.file.getvalue().rstrip("\n")
    assert "\n" not in line and len(line) <= width
    assert "step 120/500" in line and "loss 0.1234" in line and re.search(r"ETA \d+:\d\d", line)
    if width >= 80:
        assert "epoch 3" in line and "━" in line   # the less useful fields come back with room
    if width <= 40:
        assert "lr" not in line and "samples/s" not in line


def test_the_live_display_prints_rows_at_its_redraws_in_order():
    # A print above the live line redraws it (about 0.8 ms): rows wait for the next redraw,
    # from rich's refresh thread; a message prints at once, after the rows before it.
    import io
    import time

    from trainer_cli.run.progress import RichReporter

    out = io.StringIO()
    reporter = RichReporter(out, force_terminal=True)
    reporter.start({"headline": "training x", "total_steps": 100, "step": 0, "log_every": 1})
    try:
        for step in (10, 20, 30):
            reporter.row({"kind": "val", "step": step, "epoch": 1, "val_loss": 0.5})
        deadline = time.monotonic() + 30        # a hang guard: a redraw comes every 1/8 s
        while "validation at step 30" not in out.getvalue():
            assert time.monotonic() < deadline, "no redraw printed the rows"
            time.sleep(0.01)
        reporter.row({"kind": "val", "step": 40, "epoch": 1, "val_loss": 0.5})
        reporter.message("warning: something")
        reporter.row({"kind": "val", "step": 50, "epoch": 1, "val_loss": 0.5})
    finally:
        reporter.close()
    text = out.getvalue()
    at = [text.index("validation at step %d " % s) for s in (10, 20, 30, 40)]
    assert at == sorted(at) and at[-1] < text.index("warning: something")
    assert text.index("warning: something") < text.index("validation at step 50 ")
    assert all(text.count("validation at step %d " % s) == 1 for s in (10, 20, 30, 40, 50))


def test_plain_lines_come_from_a_thread_in_order_and_leave_the_stream_open():
    import io
    import time

    from trainer_cli.run.progress import LineReporter

    out = io.StringIO()
    reporter = LineReporter(out)
    reporter.start({"headline": "training x", "total_steps": 100, "step": 0, "log_every": 1})
    assert out.getvalue() == "training x\n"          # the headline at once
    try:
        for step in (1, 2, 3):
            reporter.row({"kind": "train", "step": step, "epoch": 1, "train_loss": 0.5})
        deadline = time.monotonic() + 30         # a hang guard: written within 0.1 s
        while "step 3 (epoch 1)" not in out.getvalue():
            assert time.monotonic() < deadline, "the rows never reached the stream"
            time.sleep(0.01)
        reporter.row({"kind": "val", "step": 4, "epoch": 1, "val_loss": 0.4})
        reporter.message("warning: something")         # at once, after the rows before it
        assert out.getvalue().endswith("val_loss 0.4\nwarning: something\n")
        reporter.row({"kind": "train", "step": 5, "epoch": 1, "train_loss": 0.3})
    finally:
        reporter.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "training x" and lines[-1].startswith("step 5 (epoch 1)")
    assert [line.split()[1] for line in lines[1:4]] == ["1", "2", "3"]
    out.write("still open\n")


def test_resume_message_uses_the_logs_epoch_numbers(tmp_path):
    from trainer_cli.run.state import LoopState

    assert LoopState(step=26, epoch=2).position_text() == "step 26, end of epoch 2"
    assert LoopState(step=30, epoch=2, batch_in_epoch=4).position_text() == \
        "step 30, epoch 3, 4 batches into it"


def test_shell_completion_of_commands_configs_run_dirs_and_override_keys(tmp_path):
    import subprocess
    import sys

    run_dir = _run(tmp_path, "a")

    def complete(words, cword, cwd):
        env = dict(os.environ, _TRAINER_COMPLETE="bash_complete", COMP_WORDS=words, COMP_CWORD=str(cword))
        done = subprocess.run([sys.executable, "-m", "trainer_cli.cli"], env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=60)
        return [line.split(",", 1)[1] for line in done.stdout.splitlines()]

    assert complete("trainer re", 1, tmp_path) == ["resume", "report"]
    assert complete("trainer resume ", 2, tmp_path) == ["runs/" + run_dir.name]
    assert "a.yaml" in complete("trainer run ", 2, tmp_path)
    assert complete("trainer run a.yaml -o optimizer.params.learning_r", 4, tmp_path) == \
        ["optimizer.params.learning_rate="]
    assert "--workers" in complete("trainer run a.yaml --w", 3, tmp_path)


def test_every_command_has_an_example_in_its_help():
    from trainer_cli.cli import COMMANDS

    for name in COMMANDS:
        result = invoke(name, "--help")
        assert result.exit_code == 0 and "Example:" in result.output, name


def test_runs_plot_and_resume_last_as_real_subprocesses(tmp_path):
    cfg = write_config(tmp_path)
    assert run_trainer("run", cfg, "--run-dir", tmp_path / "runs", "-q", "-o", "epochs=1").returncode == 0
    listed = run_trainer("runs", tmp_path / "runs", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout)[0]["status"] == "finished"
    extended = run_trainer("resume", "--last", "--run-dir", tmp_path / "runs", "-o", "epochs=2", "--json")
    assert extended.returncode == 0, extended.stderr
    summary = json.loads(extended.stdout)
    assert summary["steps"] == 12 and summary["report"].endswith("report.html")
    plotted = run_trainer("plot", summary["run_dir"], "-m", "train_loss")
    assert plotted.returncode == 0 and "train_loss" in plotted.stdout and "┤" in plotted.stdout


def test_tensorboard_events_are_not_written_through_a_link(tmp_path):
    from trainer_cli.run.layout import RunDirError
    from trainer_cli.run.tensorboard_sink import TensorBoardSink

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "tensorboard").symlink_to(elsewhere)
    with pytest.raises(RunDirError, match="not a folder"):
        TensorBoardSink(run_dir, "seed: 1\n")
    assert list(elsewhere.iterdir()) == []


def test_progress_line_shows_a_smoothed_loss_and_colours_only_a_nan():
    import io

    from rich.console import Console

    from trainer_cli.run.progress import LOSS_SMOOTHING, RichReporter, _StatusColumn

    def line(reporter):
        reporter.console = Console(file=io.StringIO(), width=100, force_terminal=True,
                                   color_system="standard")
        reporter.console.print(_StatusColumn(reporter))
        return reporter.console.file.getvalue()

    reporter = RichReporter(io.StringIO())
    reporter.progress(1, 10, 1, 2.0, 0.1, 100.0)
    reporter.progress(2, 10, 1, 1.0, 0.1, 100.0)
    # The bias-corrected average of 2.0 then 1.0, not the last batch's 1.0.
    b = LOSS_SMOOTHING
    want = (b * (1 - b) * 2.0 + (1 - b) * 1.0) / (1 - b * b)
    assert abs(reporter._loss - want) < 1e-12
    text = line(reporter)
    assert "loss %.4g" % want in text and "\x1b[1;31m" not in text    # no red for a number
    reporter.progress(3, 10, 1, float("nan"), 0.1, 100.0)
    text = line(reporter)
    assert "\x1b[1;31mloss nan" in text                                # a NaN is red
    reporter.progress(4, 10, 1, 1.0, 0.1, 100.0)     # and it did not poison the average
    assert abs(reporter._loss - (b * want * (1 - b * b) + (1 - b) * 1.0) / (1 - b ** 3)) < 1e-12
