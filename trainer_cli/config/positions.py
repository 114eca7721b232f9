"""Where each key and value of a config came from: a file position or a command-line override.

Paths are tuples of mapping keys (str) and list indices (int), in the canonical form the schema
validates. Each entry remembers the path the user actually wrote, so that a message can say
``optimizer.lerning_rate`` even after the shorthand was moved under ``optimizer.params``.
"""
from __future__ import annotations

from dataclasses import dataclass

Path = tuple


@dataclass(frozen=True)
class Place:
    """A file position (1-based line and column) or an override's text."""

    file: str | None = None
    line: int | None = None
    column: int | None = None
    override: str | None = None


@dataclass(frozen=True)
class Entry:
    key: Place | None  # where the key is written; None for the root and list items
    value: Place  # where the value starts
    user_path: Path  # the path as the user wrote it


def dotted(path: Path) -> str:
    return ".".join(str(p) for p in path)


class PositionMap:
    def __init__(self):
        self._entries: dict[Path, Entry] = {}

    def set(self, path: Path, entry: Entry) -> None:
        self._entries[tuple(path)] = entry

    def get(self, path: Path) -> Entry | None:
        return self._entries.get(tuple(path))

    def __contains__(self, path) -> bool:
        return tuple(path) in self._entries

    def items(self):
        return list(self._entries.items())

    def __len__(self) -> int:
        return len(self._entries)

    def find(self, path: Path) -> tuple[Path, Entry | None]:
        """The entry for ``path`` or, failing that, for its longest recorded prefix."""
        path = tuple(path)
        for end in range(len(path), -1, -1):
            entry = self._entries.get(path[:end])
            if entry is not None:
                return path[:end], entry
        return (), None

    def drop_under(self, path: Path) -> None:
        """Forget ``path`` and everything below it (its value is being replaced)."""
        n = len(path)
        for p in [p for p in self._entries if p[:n] == tuple(path)]:
            del self._entries[p]

    def mark_override(self, path: Path, user_path: Path, text: str, descendants=()) -> None:
        """Record that ``path`` and the given descendant paths came from ``-o text``."""
        place = Place(override=text)
        self.set(path, Entry(place, place, tuple(user_path)))
        for rel in descendants:
            self.set(tuple(path) + tuple(rel), Entry(place, place, tuple(user_path) + tuple(rel)))

    def apply_moves(self, base: Path, moves) -> None:
        """Re-key entries after a normalizer reshaped the value at ``base``.

        Moves apply in order. A move ``(old, new)`` re-keys ``base+old`` and everything below it
        to ``base+new``; with ``old == ()`` the entry of ``base`` itself is copied to
        ``base+new`` (a scalar shorthand that became the value of one key: ``optimizer: adam``).
        """
        base = tuple(base)
        for old, new in moves:
            old, new = tuple(old), tuple(new)
            if not old:
                entry = self._entries.get(base)
                if entry is not None:
                    self._entries[base + new] = entry
                continue
            src = base + old
            n = len(src)
            moved = {base + new + p[n:]: self._entries.pop(p)
                     for p in [p for p in self._entries if p[:n] == src]}
            self._entries.update(moved)

    def copy(self) -> "PositionMap":
        out = PositionMap()
        out._entries = dict(self._entries)
        return out
