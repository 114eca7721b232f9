"""The order in which a run visits its training samples: a pure function of (seed, epoch).

Epoch ``e``'s permutation is ``numpy.random.default_rng([seed, e]).permutation(n)`` (or
``arange(n)`` without shuffling), so any epoch can be rebuilt without replaying the ones before,
and a resumed run sees exactly the batches an uninterrupted one would.

``last_batch``:

- ``keep``: the short last batch of each epoch is used;
- ``discard``: it is dropped;
- ``rollover``: it is carried into the next epoch, whose first batch starts with it (MXNet's
  ``BatchSampler`` semantics). Think of the epochs' permutations laid end to end as one stream of
  samples cut into full batches; epoch ``e`` owns the batches that end inside it, i.e. batches
  ``floor(e*n/b)`` up to ``floor((e+1)*n/b)``. The carried samples are the tail of that stream
  before epoch ``e``, so they too are a pure function of (seed, epoch).
"""
from __future__ import annotations

import numpy

__all__ = ["BatchOrder"]


class BatchOrder:
    """Batches (arrays of sample indices) of every epoch of one training set."""

    def __init__(self, num_samples: int, batch_size: int, last_batch: str = "keep",
                 shuffle: bool = True, seed: int = 0):
        if num_samples < 1 or batch_size < 1:
            raise ValueError("num_samples and batch_size must be positive")
        if last_batch not in ("keep", "discard", "rollover"):
            raise ValueError("last_batch must be keep, discard or rollover, got %r" % (last_batch,))
        self.n = int(num_samples)
        self.batch_size = int(batch_size)
        self.last_batch = last_batch
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self._cache: dict = {}
        self._batches = (None, [])

    def permutation(self, epoch: int) -> numpy.ndarray:
        if not self.shuffle:
            return numpy.arange(self.n)
        perm = self._cache.get(epoch)
        if perm is None:
            if len(self._cache) > 4:
                self._cache.clear()
            perm = numpy.random.default_rng([self.seed, epoch]).permutation(self.n)
            self._cache[epoch] = perm
        return perm

    def num_batches(self, epoch: int) -> int:
        n, b = self.n, self.batch_size
        if self.last_batch == "keep":
            return -(-n // b)
        if self.last_batch == "discard":
            return n // b
        return (epoch + 1) * n // b - epoch * n // b

    def batches(self, epoch: int) -> list:
        """Index arrays of epoch ``epoch``'s batches, in order (the same list while the epoch
        lasts: the loop asks every step; do not change it)."""
        if self._batches[0] != epoch:
            self._batches = (epoch, self._epoch_batches(epoch))
        return self._batches[1]

    def _epoch_batches(self, epoch: int) -> list:
        b = self.batch_size
        if self.last_batch != "rollover":
            perm = self.permutation(epoch)
            return [perm[i:i + b] for i in range(0, self.num_batches(epoch) * b, b)]
        first = epoch * self.n // b          # global index of this epoch's first batch
        count = self.num_batches(epoch)
        stream = self._stream(first * b, (first + count) * b)
        return [stream[i * b:(i + 1) * b] for i in range(count)]

    def carry(self, epoch: int) -> numpy.ndarray:
        """Samples carried into ``epoch`` by rollover (empty for keep and discard)."""
        if self.last_batch != "rollover":
            return numpy.arange(0)
        start = epoch * self.n // self.batch_size * self.batch_size
        return self._stream(start, epoch * self.n)

    def _stream(self, start: int, stop: int) -> numpy.ndarray:
        """Positions ``[start, stop)`` of the epochs' permutations laid end to end."""
        if stop <= start:
            return numpy.arange(0)
        parts = []
        for epoch in range(start // self.n, (stop - 1) // self.n + 1):
            lo, hi = max(start, epoch * self.n), min(stop, (epoch + 1) * self.n)
            parts.append(self.permutation(epoch)[lo - epoch * self.n:hi - epoch * self.n])
        return numpy.concatenate(parts)

    def updates_in_epoch(self, epoch: int, accumulation: int) -> int:
        """Optimizer steps in ``epoch``: a short accumulation window at its end is one step too."""
        return -(-self.num_batches(epoch) // accumulation)

    def total_updates(self, epochs: int | None, steps: int | None, accumulation: int) -> int | None:
        """Steps a run with these limits takes (None when neither limit is given)."""
        if epochs is None:
            return steps
        if self.last_batch == "rollover":
            total = sum(self.updates_in_epoch(e, accumulation) for e in range(epochs))
        else:
            total = epochs * self.updates_in_epoch(0, accumulation)
        return total if steps is None else min(total, steps)
