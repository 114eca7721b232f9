"""``trainer plot``: which curves of a run to draw, as data the renderer and ``--json`` share."""
from __future__ import annotations

from .history import STATUS_NAMES, RunHistory

__all__ = ["plot_report", "default_keys"]


def default_keys(history: RunHistory) -> list[str]:
    keys = history.metric_keys()
    chosen = [k for k in ("train_loss", "val_loss") if k in keys]
    headline = history.headline_metric()
    if headline and headline not in chosen and headline in keys:
        chosen.append(headline)
    return chosen or keys[:2]


def plot_report(history: RunHistory, keys: list[str]) -> dict:
    """``{"run", "status", "step", "epoch", "series": [{"key", "points", "best"}]}``; a
    KeyError naming the keys there are when one asked for is not logged."""
    available = history.metric_keys() + (["lr"] if history.lr_series() else [])
    for key in keys:
        if key not in available:
            from ..config.suggest import did_you_mean

            hint = did_you_mean(key, available)
            raise KeyError("no metric %r in metrics.jsonl%s; logged: %s"
                           % (key, hint, ", ".join(available) or "nothing yet"))
    series = []
    for key in keys or default_keys(history):
        if key == "lr":
            points = [[s, v] for s, _, v in history.lr_series()]
            best = None
        else:
            points = [[s, v] for s, _, v in history.series(key)]
            found = history.best(key)
            best = list(found) if found else None
        series.append({"key": key, "points": points, "best": best})
    return {"run": str(history.path), "status": STATUS_NAMES.get(history.status, history.status),
            "step": history.step, "epoch": history.epoch, "series": series}
