"""A max pooling of a ReLU-fused convolution hands its gradient back already masked.

``Conv2D(activation='relu')`` followed by ``MaxPool2D`` (LeNet, VGG) masks the same gradient
twice over: the pooling routes each window's gradient to the window's maximum, then the
convolution multiplies the whole routed gradient (mostly zeros) by its ReLU's mask ``out > 0``.
At a window's maximum that mask is ``max > 0``, one value per window. So the pooling multiplies
its own (four times smaller) gradient by ``pooled > 0`` (inside its kernel, window by window, on
its pieces' threads), marks the gradient it returns, and the convolution skips its mask for a
gradient so marked: a pass over the layer's largest array less (LeNet's first layer: 5.5 MB read
twice and written once; the LeNet step 2-6% faster on one thread, 2-9% on two, in-process A/B;
multiplied in NumPy before the kernel it was slower on two threads). The numbers are the same
but for one sign of zero: in a window whose maximum is 0, a negative gradient gives +0.0 where
the two masks gave -0.0. A gradient that also takes another consumer's share is a new array,
unmarked, and is masked as before (masking it twice changes nothing).

Arrays are known by identity, weakly: a mark goes with the array it names.
"""
from __future__ import annotations

import weakref

__all__ = ["mark_output", "is_output", "mark_masked", "take_masked"]

_outputs = weakref.WeakValueDictionary()    # id -> a ReLU-fused convolution's output array
_masked = weakref.WeakValueDictionary()     # id -> a gradient already masked by that ReLU


def mark_output(out) -> None:
    """``out`` is a convolution's output after its ReLU (it masks its own gradient by it)."""
    _outputs[id(out)] = out


def is_output(x) -> bool:
    return _outputs.get(id(x)) is x


def mark_masked(g) -> None:
    """``g`` is a gradient for such an output, already multiplied by its mask."""
    _masked[id(g)] = g


def take_masked(g) -> bool:
    """Whether ``g`` was marked (the mark is used up)."""
    if _masked.get(id(g)) is g:
        del _masked[id(g)]
        return True
    return False
