"""Extending a run on resume: ``trainer resume RUN -o epochs=N`` (or ``steps=N``).

Only the length may change: every other key shaped the steps already taken, and a resume that
changed them would continue a run nobody configured. An extended run is bitwise the run that had
the longer limit from the start whenever nothing depends on the limit itself. The one thing that
can is a schedule that has already reached its end: a ``poly`` or ``cosine`` schedule whose
``max_update`` lies at or before the step resumed from sits at its final rate from there on,
where a user who asked for a longer run most likely meant the schedule to stretch with it. That
is allowed only with ``force`` (and said so).
"""
from __future__ import annotations

from ..config import ConfigError, ConfigIssue

__all__ = ["EXTENDABLE_KEYS", "check_overrides", "plan_extension"]

EXTENDABLE_KEYS = ("epochs", "steps")


def check_overrides(overrides) -> list[str]:
    """The overrides, when every one sets an extendable key; a ConfigError naming the others."""
    bad = []
    for text in overrides:
        key = text.split("=", 1)[0].strip()
        if key not in EXTENDABLE_KEYS:
            bad.append(ConfigIssue("trainer resume -o changes only the run's length (%s); %r "
                                   "shaped the steps already taken: start a new run with it instead"
                                   % (", ".join(k + "=N" for k in EXTENDABLE_KEYS), key),
                                   key=key, override="-o " + text))
    if bad:
        raise ConfigError(bad)
    return list(overrides)


def plan_extension(config, state, total_steps, force: bool) -> list[str]:
    """Check that ``config`` (with the new limit, ``total_steps`` long) extends a run now at
    ``state``; returns the notes to log. A ConfigError when it does not extend it, or when the
    result would not be the run configured that long from the start and ``force`` is not set."""
    where = "-o " + " -o ".join("%s=%s" % (k, getattr(config, k)) for k in EXTENDABLE_KEYS
                                if getattr(config, k) is not None)
    if total_steps is None or total_steps <= state.step:
        raise ConfigError([ConfigIssue(
            "the run is already at step %d; the new limit gives %s steps in all, so there is "
            "nothing to extend (ask for more epochs or steps)" % (state.step, total_steps),
            override=where)])
    notes = []
    if state.finished and state.stop_reason == "early_stopping":
        if not force:
            raise ConfigError([ConfigIssue(
                "the run was ended by early stopping at step %d; extending it trains on past "
                "that point (early stopping keeps its count and may stop it again at the next "
                "evaluation). Add --force to do so" % state.step, override=where)])
        notes.append("extending a run that early stopping ended (--force)")
    sched = config.lr_scheduler
    max_update = None if sched is None else sched.params.get("max_update")
    if sched is not None and sched.type in ("poly", "cosine") and isinstance(max_update, int) \
            and max_update <= state.step:
        if not force:
            raise ConfigError([ConfigIssue(
                "the %s schedule ended at step %d (max_update), at or before step %d where this "
                "run stands: the added steps would all run at its final rate, unlike a run "
                "configured this long from the start with a schedule fitted to it. Add --force "
                "to continue at the final rate" % (sched.type, max_update, state.step),
                override=where)])
        notes.append("the %s schedule ended at step %d; the added steps run at its final rate "
                     "(--force)" % (sched.type, max_update))
    notes.append("extended to %d steps (%s)" % (total_steps, where))
    return notes
