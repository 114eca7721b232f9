"""What a user sees when a config is wrong: one paragraph per problem, all problems at once."""
from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["ConfigIssue", "ConfigError"]

MAX_KEY_SHOWN = 60


@dataclass(frozen=True)
class ConfigIssue:
    """One problem in a config, placed where the user can find it.

    ``key`` is the dotted key as the user wrote it (``optimizer.lerning_rate``); the place is a
    file position (``file``, ``line``, ``column``, 1-based) or, for a value given on the command
    line, the ``override`` text (``-o epochs=three``).
    """

    message: str
    key: str = ""
    file: str | None = None
    line: int | None = None
    column: int | None = None
    override: str | None = None

    @property
    def location(self) -> str:
        if self.override is not None:
            return f"override {self.override}"
        if self.file is None:
            return "<config>"
        if self.line is None:
            return self.file
        return f"{self.file}:{self.line}:{self.column}"

    def sort_key(self):
        # File problems in reading order first, then overrides in command-line order.
        return (self.override is not None, self.line or 0, self.column or 0)

    def __str__(self) -> str:
        # A key may be a whole line of a file someone included by mistake: show its start only.
        key = self.key if len(self.key) <= MAX_KEY_SHOWN else self.key[:MAX_KEY_SHOWN - 3] + "..."
        head = f"{self.location}: {key}: " if key else f"{self.location}: "
        return head + self.message

    def to_dict(self) -> dict:
        return asdict(self)


class ConfigError(Exception):
    """A config that cannot be used; ``issues`` lists every problem found, in reading order."""

    def __init__(self, issues):
        issues = list(issues)
        if not issues:
            raise ValueError("a ConfigError needs at least one issue")
        order = {id(issue): n for n, issue in enumerate(issues)}
        self.issues: list[ConfigIssue] = sorted(issues, key=lambda i: (i.sort_key(), order[id(i)]))
        super().__init__(str(self))

    def __str__(self) -> str:
        return "\n\n".join(str(issue) for issue in self.issues)

    def __reduce__(self):  # rebuild from the issues (mpi ranks pass exceptions by pickle)
        return (type(self), (self.issues,))

    def to_dict(self) -> dict:
        return {"errors": [issue.to_dict() for issue in self.issues]}
