"""``trainer report``: one self-contained HTML page for one or several runs.

The page holds its charts as inline SVG and its style inline; it loads nothing (no script, no
font, no image), so it opens offline, from a mail attachment, or from a run directory while the
run is still writing to it. Several runs are overlaid in one chart per metric, each run in its
own colour (training solid, validation dashed), with a table of where their configs differ and
the best value each reached. The step/epoch switch is a CSS-only radio pair.
"""
from __future__ import annotations

import json
import math
import time
from html import escape
from pathlib import Path

from .history import STATUS_NAMES, RunHistory, metric_mode
from .svg_chart import PALETTE, Chart, Series, render_chart

__all__ = ["render_report", "config_differences", "flatten"]

_STYLE = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1b1f24;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}
.sub{color:#57606a;margin-bottom:16px}
table{border-collapse:collapse;margin:4px 0 12px}td,th{border-bottom:1px solid #d0d7de;padding:4px 10px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.swatch{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:6px;vertical-align:-1px}
.charts{display:flex;flex-wrap:wrap;gap:12px}
svg.chart{border:1px solid #d0d7de;border-radius:6px;background:#fff;max-width:100%;height:auto}
svg .title{font-weight:600;font-size:13px}svg .tick{font-size:11px;fill:#57606a}svg .axis{font-size:12px;fill:#57606a}
svg .plot{fill:#fff;stroke:#d0d7de}svg .grid{stroke:#eaeef2}svg .line{fill:none;stroke-width:1.8}
svg .epoch{stroke:#8c959f;fill:#8c959f;font-size:10px}svg .rule{stroke-width:1.5;stroke-dasharray:3 3}
svg .empty{fill:#8c959f}
.switch{margin:8px 0}.switch label{margin-right:14px;cursor:pointer}
#x-epoch:checked~.charts .by-step{display:none}#x-step:checked~.charts .by-epoch{display:none}
.status-running{color:#0969da}.status-failed,.status-killed{color:#cf222e}.status-stopped{color:#9a6700}
details{margin:6px 0}code,pre{font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
pre{background:#f6f8fa;padding:8px;border-radius:6px;overflow:auto;max-height:420px}
.legend span{margin-right:16px}
"""


# A page stays readable and small however many keys a run logs (2,000 keys once made a 161 MB
# page): at most this many metrics are charted, and this many rows shown per table; the page
# says what it left out.
MAX_CHARTED_METRICS = 24
MAX_TABLE_ROWS = 200


def _left_out(what: str, names: list, hint: str = "") -> str:
    """A note naming (the first few of) what a capped section did not show."""
    if not names:
        return ""
    shown = ", ".join(escape(str(n)) for n in names[:12]) + (", …" if len(names) > 12 else "")
    return '<p class="sub">%d more %s not shown%s: %s</p>' % (len(names), what, hint, shown)


def flatten(data, prefix: str = "") -> dict:
    """``{"optimizer.params.learning_rate": 0.1, ...}``; lists stay values."""
    out = {}
    if isinstance(data, dict):
        for key, value in data.items():
            name = "%s.%s" % (prefix, key) if prefix else str(key)
            if isinstance(value, dict) and value:
                out.update(flatten(value, name))
            else:
                out[name] = value
    return out


def config_differences(histories: list[RunHistory]) -> list[tuple[str, list]]:
    """``[(dotted key, [value per run])]`` for every key whose value is not the same in all."""
    flat = [flatten(h.config or {}) for h in histories]
    keys: dict[str, None] = {}
    for f in flat:
        keys.update(dict.fromkeys(f))
    missing = object()
    diffs = []
    for key in keys:
        if key == "name":
            continue
        values = [f.get(key, missing) for f in flat]
        if any(_canon(v) != _canon(values[0]) for v in values[1:]):
            diffs.append((key, [None if v is missing else v for v in values]))
    return diffs


def _canon(value):
    return json.dumps(value, sort_keys=True, default=str)


def _metric_groups(histories) -> list[str]:
    """Metric names without their train_/val_ prefix, loss first, in first-seen order."""
    names: dict[str, None] = {}
    for h in histories:
        for key in h.metric_keys():
            names.setdefault(key.split("_", 1)[1], None)
    ordered = list(names)
    if "loss" in names:
        ordered.remove("loss")
        ordered.insert(0, "loss")
    return ordered


def _epoch_starts(history: RunHistory) -> list[tuple[int, str]]:
    starts, seen = [], set()
    for row in history.rows:
        epoch = row.get("epoch")
        if row.get("kind") == "train" and isinstance(epoch, int) and epoch not in seen:
            seen.add(epoch)
            starts.append((row["step"], "e%d" % epoch))
    return starts


def _charts(histories, colors) -> tuple[list[str], list[str], list[str]]:
    """The step charts, the epoch charts, and the metrics left undrawn (beyond
    ``MAX_CHARTED_METRICS``)."""
    by_step, by_epoch = [], []
    single = len(histories) == 1
    groups = _metric_groups(histories)
    groups, undrawn = groups[:MAX_CHARTED_METRICS], groups[MAX_CHARTED_METRICS:]
    for metric in groups:
        step_series, epoch_series, markers, rules = [], [], [], []
        for h, color in zip(histories, colors):
            for split, dashed in (("train", False), ("val", True)):
                key = "%s_%s" % (split, metric)
                label = key if single else "%s %s" % (h.name, key)
                points = h.series(key)
                if points:
                    step_series.append(Series(label, [(s, v) for s, _, v in points], color, dashed, h.name))
                epoch_points = h.series(key, "epoch" if split == "train" else "val")
                if epoch_points:
                    epoch_series.append(Series(label, _per_epoch(epoch_points), color, dashed, h.name))
            markers += [(c["step"], color, "%scheckpoint step-%d" % ("" if single else h.name + ": ", c["step"]))
                        for c in h.checkpoints]
            if h.early_stop_step is not None:
                rules.append((h.early_stop_step, color, "early stopping at step %d" % h.early_stop_step))
        if not step_series:
            continue
        log_y = metric == "loss" and _spans_decades(step_series)
        title = "%s (%s)" % (metric, "max" if metric_mode("val_" + metric) == "max" else "min")
        bands = _epoch_starts(histories[0])
        by_step.append(render_chart(Chart(title, step_series, "step", metric, log_y, markers, rules, bands)))
        by_epoch.append(render_chart(Chart(title, epoch_series, "epoch", metric, log_y)))
    lr = [Series(h.name + " lr", [(s, v) for s, _, v in h.lr_series()], c, False, h.name)
          for h, c in zip(histories, colors)]
    if any(s.points for s in lr):
        log_y = all(v > 0 for s in lr for _, v in s.points) and _spans_decades(lr)
        by_step.append(render_chart(Chart("learning rate", lr, "step", "lr", log_y,
                                          bands=_epoch_starts(histories[0]))))
    speed = [Series(h.name + " samples/s", [(s, v) for s, _, v in h.samples_per_second()], c, False, h.name)
             for h, c in zip(histories, colors)]
    if any(s.points for s in speed):
        by_step.append(render_chart(Chart("samples / s", speed, "step", "samples/s",
                                          bands=_epoch_starts(histories[0]))))
    return by_step, by_epoch, undrawn


def _per_epoch(points):
    """One point per epoch (the last row of each), x = epoch."""
    last = {}
    for _, epoch, value in points:
        if isinstance(epoch, int):
            last[epoch] = value
    return sorted(last.items())


def _spans_decades(series) -> bool:
    values = [v for s in series for _, v in s.points if math.isfinite(v)]
    return bool(values) and min(values) > 0 and max(values) / min(values) >= 30


def _fmt(value) -> str:
    if isinstance(value, float):
        return "%.6g" % value
    if value is None:
        return "—"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def _duration(seconds) -> str:
    from .render import duration_text

    return "—" if seconds is None else duration_text(seconds)


def _runs_table(histories, colors) -> str:
    rows = ["<table><tr><th>run</th><th>status</th><th>step</th><th>epoch</th><th>best</th>"
            "<th>last checkpoint</th><th>started (UTC)</th><th>duration</th></tr>"]
    for h, color in zip(histories, colors):
        key = h.headline_metric()
        best = h.best(key) if key else None
        best_text = "%s %s (step %d)" % (key, _fmt(best[1]), best[0]) if best else "—"
        status = STATUS_NAMES.get(h.status, h.status)
        if h.error:
            status += ": " + h.error[:120]
        last = "step-%d" % h.latest if h.latest is not None else "—"
        if h.best_checkpoint is not None:
            last += " (best: step-%d)" % h.best_checkpoint
        rows.append('<tr><td><span class="swatch" style="background:%s"></span>%s<br><code>%s</code></td>'
                    '<td class="status-%s">%s</td><td class="num">%d</td><td class="num">%s</td>'
                    '<td>%s</td><td>%s</td><td>%s</td><td class="num">%s</td></tr>'
                    % (color, escape(h.name), escape(str(h.path)), STATUS_NAMES.get(h.status, h.status),
                       escape(status), h.step, _fmt(h.epoch), escape(best_text), last,
                       escape(h.started or "—"), _duration(h.duration())))
    rows.append("</table>")
    return "".join(rows)


def _best_table(histories) -> str:
    keys: dict[str, None] = {}
    for h in histories:
        keys.update(dict.fromkeys(h.metric_keys()))
    if not keys:
        return "<p>No metrics logged yet.</p>"
    head = "".join("<th>%s</th>" % escape(h.name) for h in histories)
    rows = ["<table><tr><th>metric</th><th>better</th>%s</tr>" % head]
    keys = list(keys)
    keys, hidden = keys[:MAX_TABLE_ROWS], keys[MAX_TABLE_ROWS:]
    for key in keys:
        cells = []
        for h in histories:
            best = h.best(key)
            cells.append('<td class="num">%s</td>' % ("%s <small>@%d</small>" % (_fmt(best[1]), best[0])
                                                      if best else "—"))
        rows.append("<tr><td>%s</td><td>%s</td>%s</tr>" % (escape(key), metric_mode(key), "".join(cells)))
    rows.append("</table>")
    return "".join(rows) + _left_out("metrics", hidden)


def _config_section(histories) -> str:
    if len(histories) == 1:
        from ..config.yamlio import dump_yaml

        text = dump_yaml(histories[0].config) if histories[0].config is not None else "(unreadable)"
        return "<details open><summary>resolved config</summary><pre>%s</pre></details>" % escape(text)
    diffs = config_differences(histories)
    if not diffs:
        return "<p>The runs' configs are the same (apart from their names).</p>"
    head = "".join("<th>%s</th>" % escape(h.name) for h in histories)
    rows = ["<table><tr><th>key</th>%s</tr>" % head]
    diffs, hidden = diffs[:MAX_TABLE_ROWS], [key for key, _ in diffs[MAX_TABLE_ROWS:]]
    for key, values in diffs:
        rows.append("<tr><td><code>%s</code></td>%s</tr>"
                    % (escape(key), "".join("<td>%s</td>" % escape(_fmt(v)[:200]) for v in values)))
    rows.append("</table>")
    return "".join(rows) + _left_out("differing keys", hidden)


def render_report(histories: list[RunHistory], now: float | None = None) -> str:
    """The whole HTML page."""
    colors = [PALETTE[k % len(PALETTE)] for k in range(len(histories))]
    by_step, by_epoch, undrawn = _charts(histories, colors)
    title = histories[0].name if len(histories) == 1 else "%d runs" % len(histories)
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(now))
    legend = ""
    if len(histories) > 1:
        legend = '<div class="legend">%s — training solid, validation dashed</div>' % "".join(
            '<span><span class="swatch" style="background:%s"></span>%s</span>' % (c, escape(h.name))
            for h, c in zip(histories, colors))
    else:
        legend = '<div class="legend">training solid, validation dashed; ▲ checkpoints</div>'
    problems = [p for h in histories for p in h.problems]
    problem_html = ("<h2>Unreadable files</h2><ul>%s</ul>" % "".join("<li>%s</li>" % escape(p) for p in problems)
                    if problems else "")
    step_charts = "".join('<div class="by-step">%s</div>' % c for c in by_step)
    epoch_charts = "".join('<div class="by-epoch">%s</div>' % c for c in by_epoch)
    if not by_step:
        step_charts = "<p>No metrics logged yet.</p>"
    step_charts += _left_out("metrics", undrawn,
                             " (at most %d are charted; trainer plot RUN_DIR -m KEY draws any)"
                             % MAX_CHARTED_METRICS)
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            "<title>trainer report: %s</title><style>%s</style></head><body>"
            "<h1>trainer report: %s</h1><div class=\"sub\">written %s by trainer report</div>"
            "<h2>Runs</h2>%s"
            "<h2>Curves</h2>%s"
            "<input type=\"radio\" name=\"x\" id=\"x-step\" checked><label for=\"x-step\"> by step</label> "
            "<input type=\"radio\" name=\"x\" id=\"x-epoch\"><label for=\"x-epoch\"> by epoch</label>"
            "<div class=\"charts\">%s%s</div>"
            "<h2>Best values</h2>%s"
            "<h2>Config%s</h2>%s%s</body></html>\n"
            % (escape(title), _STYLE, escape(title), stamp, _runs_table(histories, colors), legend,
               step_charts, epoch_charts, _best_table(histories),
               "" if len(histories) == 1 else " differences", _config_section(histories),
               problem_html))


def write_report(histories: list[RunHistory], path) -> Path | str:
    """Write the page to ``path`` (``-``: stdout). Only a regular file or a new path is written
    to (``_outpath``): a directory, a link, a FIFO or a device there is refused."""
    from .._outpath import STDOUT, check_output_path, write_output_text

    if str(path) != STDOUT:
        check_output_path(path, "report")  # before the work of rendering
    write_output_text(path, render_report(histories), "report")
    return path if str(path) == STDOUT else Path(path)


def report_paths(run_dirs, output=None) -> dict:
    """Read ``run_dirs`` and write their report; ``{"output", "runs"}``. One run's page goes to
    ``RUN_DIR/report.html`` unless ``output`` says otherwise (``-``: stdout); several runs' to
    ``report.html`` in the working folder."""
    from .._outpath import STDOUT, check_output_path
    from .history import load_history

    if output is not None and str(output) != STDOUT:
        check_output_path(output, "report")  # a refused target is said before the runs are read
    histories = [load_history(path) for path in run_dirs]
    if output is None:
        output = histories[0].path / "report.html" if len(histories) == 1 else Path("report.html")
    path = write_report(histories, output)
    return {"output": str(path), "runs": [str(h.path) for h in histories]}
