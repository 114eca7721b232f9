"""The part MXNet's C++ batch iterators share here (``CSVIter``, ``ImageRecordIter``,
``LibSVMIter``): a batch made by ``iter_next`` and held for ``next()`` and the getters, and the
``reset`` of a pass whose last batch wrapped around (``round_batch``): the images or rows it
took from the start already began the next pass, which goes on after them."""
from __future__ import annotations

from .data_batch import DataBatch, DataIter

__all__ = ["HeldBatchIter"]


class HeldBatchIter(DataIter):
    """``iter_next`` sets ``_batch`` to ``(data, label, pad)`` (None at the end) and
    ``_overflow`` to the rows a wrapped-around last batch took; ``_restart`` starts a pass."""

    _batch = None
    _overflow = 0

    def _restart(self):
        self._pos = 0

    def reset(self):
        if self._overflow:
            self._overflow = 0      # the wrap-around already started this pass
        else:
            self._restart()

    def next(self):
        if self.iter_next():
            data, label, pad = self._batch
            return DataBatch(data=[data], label=[label], pad=pad, index=None)
        raise StopIteration

    def getdata(self):
        return [self._batch[0]] if self._batch else None

    def getlabel(self):
        return [self._batch[1]] if self._batch else None

    def getpad(self):
        return self._batch[2] if self._batch else 0
