"""Text for a language model: tokens, a vocabulary, and windows of ``bptt`` tokens.

The token stream is cut into ``batch_size`` streams of equal length, read side by side: sample
``j * batch_size + b`` is window ``j`` of stream ``b`` (inputs: its ``bptt`` tokens; labels: the
tokens one further on). With the batch order unshuffled, batch ``j`` is window ``j`` of every
stream, so a recurrent state carried from batch to batch reads each stream through. Token ids
are float32, as MXNet's Embedding takes them.
"""
from __future__ import annotations

import collections

import numpy

from .._bounded import FileRefused, read_regular_text
from .data import Arrays, DataError

__all__ = ["Vocabulary", "load_text", "UNK"]

UNK = "<unk>"
# A text file larger than this is refused (the tokens are held in memory as Python strings).
MAX_TEXT_BYTES = 64 << 20


class Vocabulary:
    """Token <-> id: ``<unk>`` is 0, then the tokens by falling count (ties: in code-point
    order), so the ids are a pure function of the text."""

    def __init__(self, tokens, max_size=None):
        counts = collections.Counter(tokens)
        counts.pop(UNK, None)
        ordered = sorted(counts, key=lambda t: (-counts[t], t))
        if max_size is not None:
            ordered = ordered[:max_size - 1]
        self.tokens = [UNK] + ordered
        self.ids = {t: i for i, t in enumerate(self.tokens)}

    def __len__(self):
        return len(self.tokens)

    def encode(self, tokens) -> numpy.ndarray:
        ids = self.ids
        return numpy.fromiter((ids.get(t, 0) for t in tokens), dtype=numpy.int64, count=len(tokens))


def tokens_of(spec) -> list:
    try:
        text = read_regular_text(spec.path, MAX_TEXT_BYTES)
    except UnicodeDecodeError as exc:
        raise DataError("%s: not UTF-8 text (%s)" % (spec.path, exc)) from None
    except (OSError, FileRefused) as exc:
        raise DataError("%s: cannot read (%s)" % (spec.path, exc)) from None
    return list(text) if spec.level == "char" else text.split()


def windows(ids: numpy.ndarray, batch_size: int, bptt: int, where: str) -> Arrays:
    """The samples of a token stream (see the module's docstring); the tokens that do not fill
    a window of every stream are left out."""
    length = (len(ids) - 1) // batch_size          # tokens per stream, plus one label beyond
    count = length // bptt                         # windows per stream
    if count < 1:
        raise DataError("%s: %d tokens make no window of %d tokens in each of batch_size %d "
                        "streams (need at least %d tokens)"
                        % (where, len(ids), bptt, batch_size, batch_size * bptt + 1))
    streams = numpy.stack([ids[b * length:b * length + count * bptt + 1] for b in range(batch_size)])
    x = streams[:, :-1].reshape(batch_size, count, bptt).transpose(1, 0, 2).reshape(-1, bptt)
    y = streams[:, 1:].reshape(batch_size, count, bptt).transpose(1, 0, 2).reshape(-1, bptt)
    return Arrays(numpy.ascontiguousarray(x, dtype=numpy.float32),
                  numpy.ascontiguousarray(y, dtype=numpy.float32), streams=batch_size)


def load_text(spec, batch_size: int, vocab: Vocabulary | None = None):
    """``(Arrays, vocabulary)`` of a text section; the vocabulary is built from this text
    unless given (a validation text uses the training text's)."""
    tokens = tokens_of(spec)
    if vocab is None:
        vocab = Vocabulary(tokens, spec.max_vocab)
    return windows(vocab.encode(tokens), batch_size, spec.bptt, spec.path), vocab
