"""TensorBoard event files beside ``metrics.jsonl`` (``logging: {tensorboard: true}``).

Written with tensorboardX, the standalone writer (the ``tensorboard`` extra), into
``<run dir>/tensorboard/``: a scalar per logged metric under ``train/<name>``, ``val/<name>`` and
``epoch/<name>`` (the epoch means), ``lr``, and the resolved config as text at step 0. A resume
opens its writer with ``purge_step`` at the step it resumes from, so TensorBoard drops the events
the stopped run logged after its checkpoint, as :func:`.logs.truncate_metrics` drops those rows.
"""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["TensorBoardSink", "TENSORBOARD_DIR"]

TENSORBOARD_DIR = "tensorboard"
_SKIP = ("kind", "step", "epoch", "time", "skipped")


class TensorBoardSink:
    def __init__(self, run_dir, config_yaml: str, resumed_from: int | None = None):
        from tensorboardX import SummaryWriter

        purge = None if resumed_from is None else resumed_from + 1
        # Event files are named by the second they were opened in; a resume within the same
        # second as the run before it would overwrite that run's file without a suffix of its own.
        suffix = ".%d.%d" % (os.getpid(), 0 if resumed_from is None else resumed_from)
        self._writer = SummaryWriter(log_dir=str(Path(run_dir) / TENSORBOARD_DIR), purge_step=purge,
                                     flush_secs=10, filename_suffix=suffix)
        if resumed_from is None:
            self._writer.add_text("config", "```yaml\n%s\n```" % config_yaml, 0)

    def row(self, row: dict):
        kind, step = row.get("kind"), row.get("step")
        for key, value in row.items():
            if key in _SKIP or not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            if key == "lr":
                tag = "lr"
            elif kind == "epoch":
                tag = "epoch/" + key.split("_", 1)[1] if key.startswith("train_") else "epoch/" + key
            else:
                prefix, _, name = key.partition("_")
                tag = "%s/%s" % (prefix, name) if prefix in ("train", "val") else key
            self._writer.add_scalar(tag, value, step)

    def close(self):
        self._writer.close()
