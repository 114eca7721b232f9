"""Did-you-mean suggestions and readable renderings of offending values."""
from __future__ import annotations

import datetime
import difflib
from collections.abc import Iterable


def _edits(a: str, b: str) -> int:
    """Optimal-string-alignment distance: typos are mostly one insertion, deletion, substitution
    or swap of neighbours, which difflib's ratio ranks poorly ('adma' is nearer 'adamax' there)."""
    prev2, prev = None, list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if prev2 is not None and i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def closest(word, candidates: Iterable[str]) -> str | None:
    """The candidate a typo most likely meant, or None."""
    if not isinstance(word, str):
        return None
    candidates = [str(c) for c in candidates]
    lowered = {c.lower(): c for c in candidates}
    key = word.lower()
    if key in lowered:  # a case slip is the likeliest mistake of all
        return lowered[key]
    # Two characters leave too little to guess from ('l9' is not a typo of 'l1').
    allowed = 0 if len(key) <= 2 else 1 if len(key) <= 4 else 2 if len(key) <= 10 else 3
    scored = sorted((_edits(key, c.lower()), -difflib.SequenceMatcher(None, key, c.lower()).ratio(),
                     n, c) for n, c in enumerate(candidates))
    if scored and scored[0][0] <= allowed:
        return scored[0][3]
    match = difflib.get_close_matches(key, list(lowered), n=1, cutoff=0.6)
    return lowered[match[0]] if match else None


def did_you_mean(word, candidates: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` or an empty string."""
    guess = closest(word, candidates)
    return f"; did you mean {guess!r}?" if guess is not None and guess != word else ""


def choice_list(choices: Iterable) -> str:
    return ", ".join(str(c) for c in choices)


def choice_message(value, choices, what: str = "value") -> str:
    """"unknown optimizer 'adm'; did you mean 'adam'? (choices: ...)" for a bad enum value."""
    choices = list(choices)
    if isinstance(value, str):
        return f"unknown {what} {show(value)}{did_you_mean(value, choices)} (choices: {choice_list(choices)})"
    return f"expected one of {choice_list(choices)}, got {show(value)}"


def show(value) -> str:
    """A value as the user typed it in YAML, short enough for one line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        text = value if len(value) <= 60 else value[:57] + "..."
        return repr(text)
    if isinstance(value, dict):
        return "a mapping" if value else "an empty mapping"
    if isinstance(value, (list, tuple)):
        return "a list" if value else "an empty list"
    if isinstance(value, (datetime.date, datetime.datetime)):
        return f"the date {value.isoformat()}"
    return type(value).__name__


def excerpt(text, limit: int = 24) -> str | None:
    """``text`` quoted when it is short enough to be a name or a value someone typed; None for
    anything longer, which may be a line of a file that is not ours (/etc/passwd) and is never
    echoed whole."""
    text = str(text)
    return repr(text) if len(text) <= limit and text.isprintable() else None
