"""``gluon.contrib.data``: MXNet 1.9's ``IntervalSampler`` and the ``text`` corpora
(``text.WikiText2``, ``text.WikiText103``, read from local files)."""
from ...data.sampler import Sampler
from . import text

__all__ = ["IntervalSampler", "text"]


class IntervalSampler(Sampler):
    """Indices of ``[0, length)`` ``interval`` apart: ``0, interval, 2 * interval, ...``, then
    (with ``rollover``) again from 1, 2, ... until every index was given once."""

    def __init__(self, length, interval, rollover=True):
        if interval > length:
            raise ValueError("Interval %d must be smaller than or equal to length %d"
                             % (interval, length))
        self._length, self._interval, self._rollover = length, interval, rollover

    def __iter__(self):
        for start in range(self._interval if self._rollover else 1):
            yield from range(start, self._length, self._interval)

    def __len__(self):
        # MXNet 1.9.1 answers ``length`` also without rollover, where fewer indices come.
        return self._length if self._rollover else len(range(0, self._length, self._interval))
