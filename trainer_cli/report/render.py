"""Rich output of the reports: tables and the lr plot. Only presentation lives here; every
number shown comes from the report dicts (the same ones ``--json`` prints)."""
from __future__ import annotations

import os
import time

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from .._printable import printable, printable_tree
from .plot import compact_rows, format_lr, lr_plot

__all__ = ["console", "render_lr", "render_inspect", "render_list", "human_size"]


def console(**kwargs) -> Console:
    """Markup off: a name like ``[red]x`` prints as itself. Every render function also passes
    its report through ``printable_tree``, so no name, path or key reaches the terminal with a
    control character in it."""
    return Console(highlight=False, markup=False, **kwargs)


def human_size(n) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1024.0
    return str(n)


def _num(value) -> str:
    if isinstance(value, float):
        return "%.6g" % value
    return "-" if value is None else str(value)


def _notes(out: Console, report: dict) -> None:
    for note in report.get("notes") or []:
        out.print(Text("note: " + note, style="yellow"))


# --------------------------------------------------------------------------------------- lr
def _scheduler_text(sched) -> str:
    """The scheduler with the base rate it really uses: the optimizer's learning_rate replaces
    ``base_lr``, except where poly/cosine decay from the one they were built with."""
    if sched is None:
        return "none (constant rate)"
    attrs = sched.get("attrs") or {}
    params = dict(sched["params"])
    params["base_lr"] = attrs.get("base_lr_orig", attrs.get("base_lr", params.get("base_lr")))
    return "%s(%s)" % (sched["class"], ", ".join("%s=%s" % kv for kv in params.items()))


def _grid() -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    return grid


def _shown_path(path) -> str:
    """Relative to the working directory when inside it: shorter, and what the user typed."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)
    return str(path) if rel.startswith("..") else rel


def render_lr(out: Console, report: dict, width: int = 60, height: int = 10) -> None:
    report = printable_tree(report)
    values = report["lr"]
    how = {"--steps": "from --steps", "steps": "the config's steps",
           "epochs": "epochs x %s updates per epoch" % (report["updates_per_epoch"],)}
    head = _grid()
    head.add_row("source", "%s (%s)" % (report["source"], report["kind"].replace("_", " ")))
    rate = report["learning_rate"]
    head.add_row("optimizer", "%s, learning_rate %s" % (
        report["optimizer"], "not set (the scheduler's base_lr)" if rate is None else _num(rate)))
    head.add_row("scheduler", _scheduler_text(report["lr_scheduler"]))
    head.add_row("steps", "%d (%s)" % (report["steps"], how.get(report["steps_from"], "-")))
    if report["train_samples"] is not None:
        head.add_row("train samples", str(report["train_samples"]))
    if report["kind"] == "run_dir":
        now = report["current_step"]
        head.add_row("latest checkpoint", "none yet" if now is None else
                     "step %d, lr %s" % (now, _num(report["current_lr"])))
    out.print(head)
    if not values:
        out.print("(no steps)")
        return
    compact = compact_rows(values, current=report["current_step"],
                           per_epoch=report["updates_per_epoch"])
    table = Table(title="learning rate by step", title_justify="left")
    table.add_column("step", justify="right")
    show_epoch = report["updates_per_epoch"] is not None
    if show_epoch:
        table.add_column("epoch", justify="right")
    table.add_column("lr", justify="right")
    table.add_column("")
    for row in compact["rows"]:
        if "elided" in row:
            what = "lr unchanged" if row["constant"] else "lr changes"
            count = "%d step%s" % (row["elided"], "" if row["elided"] == 1 else "s")
            cells = ["…"] + ([""] if show_epoch else []) + ["…", "%s, %s" % (count, what)]
            table.add_row(*cells, style="dim")
            continue
        mark = []
        if row["change"]:
            mark.append("changed")
        if row["current"]:
            mark.append("◀ latest checkpoint")
        cells = [str(row["step"])] + ([_num(row["epoch"])] if show_epoch else [])
        table.add_row(*cells, format_lr(row["lr"]), ", ".join(mark),
                      style="bold yellow" if row["current"] else None)
    out.print(table)
    if compact["elided"]:
        sampled = (" (%d changes: an even sample shown)" % compact["changes"]) if compact["sampled"] else ""
        out.print(Text("%d of %d steps elided%s; --json lists every step"
                       % (compact["elided"], len(values), sampled), style="dim"))
    plot = lr_plot(values, width=width, height=height, current=report["current_step"])
    col = plot["column"]
    for n, line in enumerate(plot["lines"]):
        text = Text(line, style="cyan" if "┤" in line else None)
        if col is not None:
            if n == len(plot["lines"]) - 1:  # the marker line under the axis
                text.stylize("bold yellow")
            elif col < len(line):
                text.stylize("bold yellow", col, col + 1)
        out.print(text, overflow="ignore", no_wrap=True, crop=False)
    _notes(out, report)


# ---------------------------------------------------------------------------------- inspect
def _states_tables(out: Console, states: dict) -> None:
    head = _grid()
    head.add_row("states file", "%s (%s)" % (states["path"], human_size(states["size"])))
    head.add_row("optimizer", states["optimizer"] or "not saved in this file")
    if states["optimizer"] is not None:
        head.add_row("update count", "%d (num_update)" % states["num_update"])
        head.add_row("current lr", _num(states["learning_rate"]))
        head.add_row("scheduler", _scheduler_text(states["lr_scheduler"]))
        hyper = ", ".join("%s=%s" % (k, _num(v)) for k, v in states["hyperparams"].items()
                          if v is not None)
        head.add_row("hyper-parameters", hyper)
    out.print(head)
    for device in states["devices"]:
        table = Table(title="states on device %d" % device["device_id"], title_justify="left")
        for name, justify in (("index", "right"), ("name", "left"), ("slot", "left"),
                              ("shape", "left"), ("dtype", "left"), ("L2 norm", "right")):
            table.add_column(name, justify=justify)
        for param in device["params"]:
            leaves = param["states"] or [None]
            for leaf in leaves:
                if leaf is None:
                    table.add_row(str(param["index"]), param["name"] or "", "(no state)", "", "", "")
                else:
                    shape = "x".join(map(str, leaf["shape"])) or "scalar"
                    if leaf.get("stype") == "row_sparse":
                        shape += " row_sparse, %d rows stored" % leaf["rows_stored"]
                    table.add_row(str(param["index"]), param["name"] or "", leaf["slot"], shape,
                                  leaf["dtype"], _num(leaf["norm"]))
        out.print(table)


def _parameters_table(out: Console, parameters) -> None:
    if not parameters:
        return
    table = Table(title="parameters", title_justify="left")
    for name, justify in (("name", "left"), ("shape", "left"), ("dtype", "left"), ("L2 norm", "right")):
        table.add_column(name, justify=justify)
    for p in parameters:
        table.add_row(p["name"], "x".join(map(str, p["shape"])) or "scalar", p["dtype"], _num(p["norm"]))
    out.print(table)


def _metric_cell(key, value) -> str:
    if key == "time" and isinstance(value, (int, float)) and value > 1e9:  # unix seconds
        return time.strftime("%H:%M:%S", time.gmtime(value))
    return _num(value)


def _metrics_table(out: Console, metrics: dict) -> None:
    if metrics["path"] is None:
        out.print(Text("no metrics.jsonl", style="dim"))
        return
    rows = metrics["last"]
    if not rows:
        out.print(Text("metrics.jsonl: no rows yet", style="dim"))
        return
    table = Table(title="last metrics (%d of %d rows)" % (len(rows), metrics["rows"]),
                  title_justify="left", box=box.SIMPLE_HEAD)
    for name, justify in (("kind", "left"), ("step", "right"), ("epoch", "right"),
                          ("values", "left")):
        table.add_column(name, justify=justify, no_wrap=name != "values")
    # One line per row with its values spelled out: a column per metric does not fit a terminal.
    positional = ("kind", "step", "epoch", "time")
    for row in rows:
        values = "  ".join("%s %s" % (k, _metric_cell(k, v)) for k, v in row.items()
                           if k not in positional)
        table.add_row(str(row.get("kind", "")), _metric_cell("step", row.get("step")),
                      _metric_cell("epoch", row.get("epoch")), values)
    out.print(table)
    if metrics["skipped_lines"]:
        out.print(Text("%d unreadable line(s) in metrics.jsonl skipped" % metrics["skipped_lines"],
                       style="yellow"))


def _position(entry) -> str:
    """Epochs completed, and batches into the next one when the checkpoint is mid-epoch."""
    text = _num(entry.get("epoch"))
    if entry.get("batch_in_epoch"):
        text += " +%d batches" % entry["batch_in_epoch"]
    return text


def _checkpoints_table(out: Console, report: dict) -> None:
    if not report["checkpoints"]:
        out.print(Text("no checkpoints yet", style="dim"))
        return
    table = Table(title="checkpoints", title_justify="left", box=box.SIMPLE_HEAD)
    for name, justify in (("checkpoint", "left"), ("epochs done", "right"),
                          ("saved (UTC)", "left"), ("size", "right"), ("status", "left")):
        table.add_column(name, justify=justify, no_wrap=True)
    for c in report["checkpoints"]:
        status = Text("intact", style="green") if c["intact"] else Text("DAMAGED", style="bold red")
        if c["step"] == report["latest"]:
            status.append(" ◀ latest", style="bold")
        if c["step"] == report.get("best"):
            status.append(" ◀ best", style="bold")
        table.add_row(c["name"], _position(c), c["time"] or "-", human_size(c["size"]), status)
    out.print(table)


def render_inspect(out: Console, report: dict) -> None:
    report = printable_tree(report)
    kind = report["kind"]
    if kind == "states_file":
        _states_tables(out, report)
        return
    if kind == "run_dir":
        head = _grid()
        head.add_row("run", report["path"])
        cfg = report["config"]
        if cfg is not None:
            head.add_row("config", "model %s, optimizer %s, scheduler %s, %s" % (
                cfg["model"], cfg["optimizer"], cfg["lr_scheduler"] or "none",
                ", ".join(s for s in ("%s epochs" % cfg["epochs"] if cfg["epochs"] else "",
                                      "%s steps" % cfg["steps"] if cfg["steps"] else "") if s)))
        latest = next((c for c in report["checkpoints"] if c["step"] == report["latest"]), None)
        head.add_row("latest", "none" if report["latest"] is None else "step-%d%s" % (
            report["latest"], " (the run finished)" if latest and latest["finished"] else ""))
        if report.get("best") is not None:
            head.add_row("best", "step-%d (checkpoints/best; --from best)" % report["best"])
        out.print(head)
        _checkpoints_table(out, report)
        _metrics_table(out, report["metrics"])
        if report["shown_checkpoint"] is not None:
            out.print(Text("optimizer states of step-%d%s" % (
                report["shown_checkpoint"],
                " (latest)" if report["shown_checkpoint"] == report["latest"] else ""), style="bold"))
    else:
        out.print(Text("checkpoint %s: step %s, epochs done %s, saved %s, %s" % (
            report["path"], report["step"], _position(report), report["time"],
            human_size(report["size"])), style="bold"))
    if report.get("states") is not None:
        _states_tables(out, report["states"])
    _parameters_table(out, report.get("parameters"))
    _notes(out, report)


# ------------------------------------------------------------------------------------- list
def render_list(out: Console, cat: dict) -> None:
    cat = printable_tree(cat)
    table = Table(title="optimizers", title_justify="left")
    table.add_column("name")
    table.add_column("default lr", justify="right")
    table.add_column("parameters (besides learning_rate, wd, clip_gradient, ...)")
    for o in cat["optimizers"]:
        table.add_row(o["name"], _num(o["default_lr"]), ", ".join(o["params"]))
    out.print(table)
    table = Table(title="lr schedulers", title_justify="left")
    table.add_column("type")
    table.add_column("required")
    table.add_column("parameters")
    for s in cat["schedulers"]:
        table.add_row(s["name"], ", ".join(s["required"]), ", ".join(s["params"]))
    out.print(table)
    table = Table(title="models", title_justify="left")
    table.add_column("name")
    table.add_column("build() arguments")
    table.add_column("file")
    for m in cat["models"]:
        args = m.get("error") or (", ".join(m["args"]) if m["args"] is not None else "?")
        table.add_row(m["name"], args, _shown_path(m["path"]))
    if cat["models"]:
        out.print(table)
    else:
        out.print("models: none found (no models/ folder here; see --models-dir)")
    ds = cat["datasets"]
    sk = ", ".join(ds["sklearn"]) if ds["sklearn_installed"] else "(scikit-learn not installed)"
    grid = _grid()
    grid.add_row("model zoo", ", ".join(cat["zoo_models"]))
    grid.add_row("losses", ", ".join(cat["losses"]))
    grid.add_row("metrics", ", ".join(cat["metrics"]))
    grid.add_row("datasets", ", ".join(ds["types"]))
    grid.add_row("transforms", ", ".join(cat["transforms"]))
    grid.add_row("sklearn sets", sk)
    grid.add_row("initializers", ", ".join(cat["initializers"]))
    grid.add_row("kvstore types", ", ".join(cat["kvstore"]))
    grid.add_row("compression", ", ".join(cat["compression"]))
    out.print(grid)


def render_runs(out: Console, root, runs: list) -> None:
    """``trainer runs``: one row per run directory (it fits 80 columns: the best metric's name
    goes into the header when every run has the same one)."""
    root, runs = printable(root), printable_tree(runs)
    if not runs:
        out.print("no runs under %s" % root)
        return
    metrics = {run["best"]["metric"] for run in runs if run["best"]}
    shared = metrics.pop() if len(metrics) == 1 else None
    title = "runs under %s" % root + ("  (best: %s)" % shared if shared else "")
    table = Table(title=title, title_justify="left", box=None,
                  pad_edge=False, padding=(0, 1), header_style="bold underline")
    for name, justify in (("run", "left"), ("status", "left"), ("step", "right"), ("epoch", "right"),
                          ("best", "left"), ("ckpt", "right"), ("started", "left"), ("took", "right")):
        # Only a run's name may wrap: every other cell is short and reads badly broken.
        table.add_column(name, justify=justify, overflow="fold", no_wrap=name != "run",
                         min_width=12 if name == "run" else None)
    styles = {"running": "cyan", "failed": "red", "killed": "red", "stopped": "yellow",
              "unreadable": "red"}
    for run in runs:
        best = run["best"]
        best_text = "-"
        if best:
            # @b<step>: checkpoints/best holds the weights of that evaluation
            kept = run.get("best_checkpoint") == "step-%d" % best["step"]
            best_text = "%.4g @%s%d" % (best["value"], "b" if kept else "", best["step"])
            if not shared:
                best_text = "%s %s" % (best["metric"], best_text)
        duration = run["duration_s"]
        table.add_row(run["name"], Text(run["status"], style=styles.get(run["status"], "")),
                      _num(run["step"]), _num(run["epoch"]), best_text,
                      (run["last_checkpoint"] or "-").replace("step-", ""),
                      (run["started"] or "-")[5:16], "-" if duration is None else duration_text(duration))
    out.print(table)


def duration_text(value: float) -> str:
    """``42s``, ``3m07s``, ``2h15m``: a run's length, short ("-" for none a clock gives)."""
    if value != value or value in (float("inf"), float("-inf")):
        return "-"
    value = int(round(value))
    if value < 60:
        return "%ds" % value
    if value < 3600:
        return "%dm%02ds" % divmod(value, 60)
    return "%dh%02dm" % (value // 3600, value % 3600 // 60)


def render_plot(out: Console, report: dict, width: int) -> None:
    """``trainer plot``: one area plot per series."""
    report = printable_tree(report)
    from .curves import curve_plot, format_value

    epoch = "" if report["epoch"] is None else ", epoch %d" % report["epoch"]
    out.print("%s (%s, step %d%s)" % (report["run"], report["status"], report["step"], epoch))
    for series in report["series"]:
        best = series["best"]
        mark = (best[0], "best %s at step %d" % (format_value(best[1]), best[0])) if best else None
        out.print("")
        for line in curve_plot([tuple(p) for p in series["points"]], width=width,
                               label=series["key"], mark=mark):
            out.print(Text(line))
