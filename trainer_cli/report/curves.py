"""Metric curves for the terminal: an eighth-block area plot (the characters of ``trainer lr``'s
plot) and a one-line sparkline."""
from __future__ import annotations

import math

__all__ = ["curve_plot", "sparkline", "format_value"]

_EIGHTHS = " ▁▂▃▄▅▆▇█"
_SPARKS = "▁▂▃▄▅▆▇█"


def format_value(value: float) -> str:
    return "%.4g" % value


def _columns(points, width):
    """Each column's mean value over an equal share of the steps (x = step)."""
    lo_x, hi_x = points[0][0], points[-1][0]
    span = hi_x - lo_x
    sums, counts = [0.0] * width, [0] * width
    for x, y in points:
        c = 0 if span == 0 else min(width - 1, int((x - lo_x) / span * width))
        sums[c] += y
        counts[c] += 1
    out, last = [], None
    for s, n in zip(sums, counts):
        last = s / n if n else last  # a column between two logged steps repeats the one before
        out.append(last)
    return out


def curve_plot(points, width=72, height=8, label="", mark=None) -> list[str]:
    """Lines (at most ``width`` characters) of an area plot of ``points`` (``[(step,
    value)]``), filled up from the lowest value; ``mark`` is ``(step, text)``, drawn as a ``▲``
    under the axis (the best value, say)."""
    points = sorted(((x, y) for x, y in points if y is not None and math.isfinite(y)),
                    key=lambda p: p[0])
    if not points:
        return ["%s: no values logged yet" % label if label else "(no values)"]
    # "%.4g" is at most 10 characters ("-1.234e-05"): a fixed gutter keeps every plot aligned.
    gutter = 11
    width = max(8, min(width - gutter - 1 - len("  step"), len(points) * 4))
    columns = _columns(points, width)
    # The scale is that of what is drawn (each column's mean), so the labels match the blocks.
    lo, hi = min(v for v in columns if v is not None), max(v for v in columns if v is not None)
    span = (hi - lo) or (abs(hi) or 1.0)
    labels = {0: format_value(hi), height - 1: format_value(lo)}
    if hi == lo:  # a constant: a flat band at mid-height, labelled once
        lo, labels = lo - span / 2, {height // 2: format_value(hi)}
    elif height >= 5:
        labels[height // 2] = format_value(lo + span * (height - 1 - height // 2 + 0.5) / height)
    levels = [0 if v is None else min(height * 8, max(1, round((v - lo) / span * (height * 8 - 1)) + 1))
              for v in columns]
    lines = [label] if label else []
    for r in range(height):
        base = (height - 1 - r) * 8
        cells = "".join(_EIGHTHS[min(max(level - base, 0), 8)] for level in levels)
        lines.append(labels.get(r, "").rjust(gutter - 1) + " ┤" + cells)
    lines.append(" " * gutter + "└" + "─" * width)
    first, last = str(points[0][0]), str(points[-1][0])
    lines.append(" " * (gutter + 1) + first + " " * max(1, width - len(first) - len(last)) + last + "  step")
    if mark is not None and points[0][0] <= mark[0] <= points[-1][0]:
        span_x = (points[-1][0] - points[0][0]) or 1
        col = min(width - 1, int((mark[0] - points[0][0]) / span_x * width))
        text = "▲ %s" % mark[1]
        pad = col if col <= width // 2 else col - len(text) + 1
        lines.append(" " * (gutter + 1 + max(0, pad)) + (text if col <= width // 2 else mark[1] + " ▲"))
    return lines


def sparkline(values, width=40) -> str:
    """``values`` squeezed into ``width`` characters (the mean of each share), low to high."""
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return ""
    if len(values) > width:
        values = [sum(values[k * len(values) // width:(k + 1) * len(values) // width])
                  / len(values[k * len(values) // width:(k + 1) * len(values) // width])
                  for k in range(width)]
    lo, hi = min(values), max(values)
    span = hi - lo
    return "".join(_SPARKS[0 if span == 0 else min(7, int((v - lo) / span * 8))] for v in values)
