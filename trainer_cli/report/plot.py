"""A learning-rate schedule made short enough to read: a compact table and a terminal plot."""
from __future__ import annotations

__all__ = ["compact_rows", "lr_plot", "format_lr"]

_EIGHTHS = " ▁▂▃▄▅▆▇█"


def format_lr(value: float) -> str:
    return "%.6g" % value


def _epoch(step: int, per_epoch):
    if isinstance(per_epoch, int) and per_epoch > 0:
        return (step - 1) // per_epoch + 1
    if isinstance(per_epoch, list):  # rollover: epochs of different lengths
        total = 0
        for epoch, count in enumerate(per_epoch, 1):
            total += count
            if step <= total:
                return epoch
    return None


def compact_rows(values, current=None, per_epoch=None, head=3, tail=3, max_changes=16) -> dict:
    """The steps worth a row: the first and last few, every change of the rate (an even sample
    of them when there are more than ``max_changes``) and ``current``; the rest become gaps.

    Returns ``{"rows": [...], "changes": count, "sampled": bool, "elided": count}`` where each
    row is ``{"step", "lr", "epoch", "change", "current"}`` or a gap ``{"elided", "from", "to",
    "constant"}`` (``constant``: the rate holds through the gap).
    """
    n = len(values)
    changes = [k for k in range(2, n + 1) if values[k - 1] != values[k - 2]]
    shown_changes = changes
    if len(changes) > max_changes:
        last = len(changes) - 1
        shown_changes = sorted({changes[round(i * last / (max_changes - 1))]
                                for i in range(max_changes)})
    keep = set(range(1, min(head, n) + 1)) | set(range(max(1, n - tail + 1), n + 1))
    keep |= set(shown_changes)
    if current is not None and 1 <= current <= n:
        keep.add(current)
    change_set = set(changes)
    rows, prev, elided = [], 0, 0
    for k in sorted(keep):
        if k - prev > 1:
            gap = range(prev + 1, k)
            rows.append({"elided": len(gap), "from": gap[0], "to": gap[-1],
                         "constant": not any(s in change_set for s in gap)})
            elided += len(gap)
        rows.append({"step": k, "lr": values[k - 1], "epoch": _epoch(k, per_epoch),
                     "change": k in change_set, "current": k == current})
        prev = k
    return {"rows": rows, "changes": len(changes), "sampled": shown_changes is not changes,
            "elided": elided}


def lr_plot(values, width=60, height=10, current=None) -> dict:
    """An area plot of ``values`` (index 0 is step 1) from 0 up, in eighth-blocks.

    Each column covers an equal share of the steps and shows its highest rate; a row is labelled
    with the rate at its top edge. Returns ``{"lines": [...], "column": offset}`` where
    ``column`` is the character offset of ``current``'s column in every line (None when not
    shown), drawn with a rule above its bar and a marker under the axis.
    """
    n = len(values)
    if n == 0:
        return {"lines": ["(no steps)"], "column": None}
    if n < width:  # a whole number of columns per step, so that steps look alike
        width = n * (width // n)
    top = max(values)
    columns, current_col = [], None
    for c in range(width):
        lo = c * n // width
        hi = max(lo + 1, (c + 1) * n // width)
        columns.append(max(values[lo:hi]))
        if current_col is None and current is not None and lo < current <= hi:
            current_col = c
    levels = [0 if top <= 0 or v <= 0 else max(1, round(v / top * height * 8)) for v in columns]
    labels = {0: format_lr(top), height // 2: format_lr(top * (height - height // 2) / height)}
    gutter = max(len(s) for s in labels.values()) + 1
    lines = []
    for r in range(height):
        base = (height - 1 - r) * 8
        cells = []
        for c, level in enumerate(levels):
            fill = min(max(level - base, 0), 8)
            cells.append("│" if fill == 0 and c == current_col else _EIGHTHS[fill])
        lines.append(labels.get(r, "").rjust(gutter - 1) + " ┤" + "".join(cells))
    lines.append("0".rjust(gutter - 1) + " └" + "─" * width)
    first, last = "1", str(n)
    axis = first + " " * max(1, width - len(first) - len(last)) + last
    lines.append(" " * (gutter + 1) + axis + "  step")
    column = None
    if current_col is not None:
        column = gutter + 1 + current_col
        mark = "▲ step %d (latest checkpoint)" % current
        pad = current_col
        if current_col > width // 2:  # point from the left so that the text stays on screen
            mark = "step %d (latest checkpoint) ▲" % current
            pad = current_col - len(mark) + 1
        lines.append(" " * (gutter + 1 + max(0, pad)) + mark)
    return {"lines": lines, "column": column}
