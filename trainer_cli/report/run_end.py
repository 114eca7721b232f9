"""What ``trainer run`` / ``resume`` add when a run ends: the HTML report in the run directory,
and a one-line sparkline of the training loss with the best validation value."""
from __future__ import annotations

from .curves import sparkline
from .history import load_history
from .html_report import write_report

__all__ = ["end_of_run"]

REPORT_FILE = "report.html"


def end_of_run(run_dir) -> dict:
    """Write ``run_dir/report.html``; ``{"report", "sparkline", "best"}``. A report that cannot
    be written is ``{"report": None, "error": ...}``: it must never fail a finished run."""
    try:
        history = load_history(run_dir)
        path = write_report([history], history.path / REPORT_FILE)
    except Exception as exc:  # a full disk, say: the run itself is safe in its checkpoint
        return {"report": None, "report_error": "the report was not written: %s" % exc,
                "sparkline": "", "best": None}
    losses = [v for _, _, v in history.series("train_loss")]
    key = next((k for k in (history.headline_metric(), "val_loss") if k and k.startswith("val_")), None)
    best = history.best(key) if key else None
    return {"report": str(path), "sparkline": sparkline(losses),
            "best": {"metric": key, "value": best[1], "step": best[0]} if best else None}
