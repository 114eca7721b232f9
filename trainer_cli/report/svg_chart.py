"""Line charts as inline SVG text: no plotting library, nothing fetched, the same picture offline.

A chart is axes with "nice" ticks, one polyline per series, optional markers on the x axis
(checkpoints), vertical rules (early stopping) and epoch bands along the top. Long series are
thinned to the first and last point of each pixel column plus its lowest and highest, so a
100,000-step run draws the same shape in a few thousand points.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

__all__ = ["Series", "Chart", "render_chart", "nice_ticks", "thin", "PALETTE"]

# Colour-blind-safe (Okabe-Ito), in the order runs get them.
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"]


@dataclass
class Series:
    label: str
    points: list            # [(x, y)]
    color: str
    dashed: bool = False
    group: str = ""         # runs share a group, so the legend can hide a run's lines at once


@dataclass
class Chart:
    title: str
    series: list
    x_label: str = "step"
    y_label: str = ""
    log_y: bool = False
    markers: list = field(default_factory=list)   # [(x, color, tooltip)] triangles under the axis
    rules: list = field(default_factory=list)     # [(x, color, tooltip)] vertical dashed lines
    bands: list = field(default_factory=list)     # [(x_start, label)] epoch starts, top axis
    width: int = 600
    height: int = 300


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2 or 5 times a power of ten apart)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, count)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks, k = [], 0
    while first + k * step <= hi + step * 1e-9 and k < 50:
        ticks.append(round(first + k * step, 12))
        k += 1
    return ticks


def thin(points: list, columns: int) -> list:
    """At most about 4 points per pixel column, keeping each column's extremes."""
    if len(points) <= 4 * columns:
        return points
    lo_x, hi_x = points[0][0], points[-1][0]
    span = (hi_x - lo_x) or 1
    out, bucket, current = [], [], None
    for p in points:
        col = int((p[0] - lo_x) / span * (columns - 1))
        if col != current and bucket:
            out.extend(_column(bucket))
            bucket = []
        current = col
        bucket.append(p)
    out.extend(_column(bucket))
    return out


def _column(bucket):
    if len(bucket) <= 4:
        return bucket
    low = min(bucket, key=lambda p: p[1])
    high = max(bucket, key=lambda p: p[1])
    keep = {id(bucket[0]): bucket[0], id(low): low, id(high): high, id(bucket[-1]): bucket[-1]}
    return sorted(keep.values(), key=lambda p: p[0])


def _fmt(value: float, step: float | None = None) -> str:
    """A tick label with as many digits as the tick spacing needs (0.00098, 0.001, 0.00102)."""
    if value == 0:
        return "0"
    if step is None or step <= 0:
        step = abs(value)
    digits = max(0, -math.floor(math.log10(step)))
    if abs(value) >= 1e5 or (abs(value) < 1e-3 and digits > 6):
        significant = max(1, math.floor(math.log10(abs(value))) - math.floor(math.log10(step)) + 1)
        return "%.*e" % (min(significant, 6) - 1, value)
    return "%.*f" % (digits, value)


def _ticks_with_step(lo, hi, count):
    ticks = nice_ticks(lo, hi, count)
    step = ticks[1] - ticks[0] if len(ticks) > 1 else None
    return ticks, step


def render_chart(chart: Chart) -> str:
    """The chart as an ``<svg>`` element (a string)."""
    left, right, top, bottom = 64, 16, 40, 44
    w, h = chart.width, chart.height
    pw, ph = w - left - right, h - top - bottom
    series = [s for s in chart.series if s.points]
    transform = (lambda v: math.log10(v)) if chart.log_y else (lambda v: v)
    xs = [p[0] for s in series for p in s.points]
    ys = [transform(p[1]) for s in series for p in s.points
          if math.isfinite(p[1]) and (p[1] > 0 or not chart.log_y)]
    out = ['<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" '
           'width="%d" height="%d" role="img" aria-label="%s">' % (w, h, w, h, escape(chart.title)),
           '<text class="title" x="%d" y="16">%s</text>' % (left, escape(chart.title))]
    if not xs or not ys:
        out.append('<text class="empty" x="%d" y="%d">no data yet</text></svg>' % (left + pw // 3, top + ph // 2))
        return "".join(out)
    x_lo, x_hi = min(xs), max(xs)
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    y_lo, y_hi = min(ys), max(ys)
    pad = (y_hi - y_lo) * 0.05 or (abs(y_hi) * 0.05 or 1)  # a constant series sits mid-height
    y_lo, y_hi = y_lo - pad, y_hi + pad

    def px(x):
        return left + (x - x_lo) / (x_hi - x_lo) * pw

    def py(y):
        return top + ph - (transform(y) - y_lo) / (y_hi - y_lo) * ph

    out.append('<rect class="plot" x="%d" y="%d" width="%d" height="%d"/>' % (left, top, pw, ph))
    y_ticks, y_step = _ticks_with_step(y_lo, y_hi, 5)
    for tick in y_ticks:
        y = top + ph - (tick - y_lo) / (y_hi - y_lo) * ph
        label = _fmt(10 ** tick) if chart.log_y else _fmt(tick, y_step)
        out.append('<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>' % (left, left + pw, y, y))
        out.append('<text class="tick" x="%d" y="%.1f" text-anchor="end">%s</text>' % (left - 6, y + 4, label))
    x_ticks, x_step = _ticks_with_step(x_lo, x_hi, 6)
    for tick in x_ticks:
        x = px(tick)
        out.append('<line class="grid" x1="%.1f" x2="%.1f" y1="%d" y2="%d"/>' % (x, x, top, top + ph))
        out.append('<text class="tick" x="%.1f" y="%d" text-anchor="middle">%s</text>'
                   % (x, top + ph + 16, _fmt(tick, x_step)))
    out.append('<text class="axis" x="%d" y="%d" text-anchor="middle">%s</text>'
               % (left + pw // 2, h - 6, escape(chart.x_label)))
    if chart.y_label:
        out.append('<text class="axis" transform="translate(14 %d) rotate(-90)" '
                   'text-anchor="middle">%s</text>' % (top + ph // 2, escape(chart.y_label)))
    # Epoch starts along the top edge: at most ~12 labels, evenly chosen.
    stride = max(1, math.ceil(len(chart.bands) / 12))
    for k, (x, label) in enumerate(chart.bands):
        if x_lo <= x <= x_hi and k % stride == 0:
            out.append('<line class="epoch" x1="%.1f" x2="%.1f" y1="%d" y2="%d"/>' % (px(x), px(x), top, top + 5))
            out.append('<text class="epoch" x="%.1f" y="%d" text-anchor="middle">%s</text>'
                       % (px(x), top - 3, escape(label)))
    for x, color, tip in chart.rules:
        if x_lo <= x <= x_hi:
            out.append('<line class="rule" x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="%s">'
                       '<title>%s</title></line>' % (px(x), px(x), top, top + ph, color, escape(tip)))
    for s in series:
        pts = [(x, y) for x, y in thin(s.points, pw)
               if math.isfinite(y) and (y > 0 or not chart.log_y)]
        if not pts:
            continue
        coords = " ".join("%.1f,%.1f" % (px(x), py(y)) for x, y in pts)
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        out.append('<polyline class="line" data-group="%s" points="%s" stroke="%s"%s>'
                   '<title>%s</title></polyline>' % (escape(s.group), coords, s.color, dash, escape(s.label)))
        if len(pts) == 1:
            x, y = pts[0]
            out.append('<circle data-group="%s" cx="%.1f" cy="%.1f" r="3" fill="%s"/>'
                       % (escape(s.group), px(x), py(y), s.color))
    for x, color, tip in chart.markers:
        if x_lo <= x <= x_hi:
            cx, cy = px(x), top + ph
            out.append('<path class="marker" d="M%.1f %.1f l-4 7 h8 z" fill="%s"><title>%s</title></path>'
                       % (cx, cy + 1, color, escape(tip)))
    out.append("</svg>")
    return "".join(out)
