"""``gluon.contrib.data.text``: the WikiText-2 and WikiText-103 language-modelling corpora, read
from the local files MXNet downloads (``wiki.train.tokens``, ``wiki.valid.tokens``,
``wiki.test.tokens``) in ``root``, by default ``$MXNET_HOME/datasets/wikitext-2`` (or
``-103``), where MXNet unpacks its archive; the archive's own ``wikitext-2/`` folder under
``root`` is read too. Nothing is downloaded: a missing file is an error naming it and the
folder."""
from __future__ import annotations

import os

import numpy

from ....base import data_dir
from ....contrib import text
from ....ndarray import creation
from ...data.dataset import Dataset
from ...data.vision.datasets import MAX_FILE_BYTES, DatasetFileError, _locate, _read_bounded

__all__ = ["WikiText2", "WikiText103"]

EOS_TOKEN = "<eos>"
_SEGMENTS = {"train": "wiki.train.tokens", "validation": "wiki.valid.tokens",
             "test": "wiki.test.tokens"}


class _WikiText(Dataset):
    """The corpus's segment as consecutive token indices: sample ``i`` is the ``seq_len``
    tokens from ``i * seq_len`` (int32 NDArray) and, as its label, the same tokens one
    position later. Lines are split at spaces, empty lines dropped, and each line ends with
    ``<eos>``; the tokens past the last whole sample are dropped (MXNet 1.9.1's layout)."""

    _namespace = ""

    def __init__(self, root=None, segment="train", vocab=None, seq_len=35):
        if segment not in _SEGMENTS:
            raise ValueError("%s: segment must be one of %s, got %r"
                             % (type(self).__name__, ", ".join(_SEGMENTS), segment))
        if int(seq_len) < 1:
            raise ValueError("%s: seq_len must be at least 1, got %r"
                             % (type(self).__name__, seq_len))
        if root is None:
            root = os.path.join(data_dir(), "datasets", self._namespace)
        self._root = os.path.expanduser(root)
        self._segment, self._seq_len = segment, int(seq_len)
        self._vocab, self._counter = vocab, None
        self._read()

    @property
    def vocabulary(self):
        """The ``contrib.text.vocab.Vocabulary`` indexing the tokens: the one given, or one
        built from this segment's tokens with ``<eos>`` reserved."""
        return self._vocab

    @property
    def frequencies(self):
        """The ``collections.Counter`` of this segment's tokens."""
        return self._counter

    def _read(self):
        path, = _locate(self._root, [_SEGMENTS[self._segment]], type(self).__name__,
                        subfolder=self._namespace)
        raw = _read_bounded(path, MAX_FILE_BYTES)
        try:
            content = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DatasetFileError("%s: not UTF-8 text (byte %d)" % (path, exc.start)) from None
        self._counter = text.utils.count_tokens_from_str(content)
        if self._vocab is None:
            self._vocab = text.vocab.Vocabulary(counter=self._counter,
                                                reserved_tokens=[EOS_TOKEN])
        tokens = []
        for line in content.splitlines():
            words = line.split()
            if words:
                tokens.extend(words)
                tokens.append(EOS_TOKEN)
        indices = numpy.asarray(self._vocab.to_indices(tokens), dtype=numpy.int32)
        whole = max(len(indices) - 1, 0) // self._seq_len * self._seq_len
        self._data = creation.array(indices[:whole].reshape(-1, self._seq_len), dtype="int32")
        self._label = creation.array(indices[1:whole + 1].reshape(-1, self._seq_len),
                                     dtype="int32")

    def __getitem__(self, idx):
        return self._data[idx], self._label[idx]

    def __len__(self):
        return self._label.shape[0]


class WikiText2(_WikiText):
    """WikiText-2 (Salesforce Research; CC BY-SA): about 2M training tokens. Files of
    ``wikitext-2-v1.zip`` in ``root`` (default ``$MXNET_HOME/datasets/wikitext-2``)."""

    _namespace = "wikitext-2"


class WikiText103(_WikiText):
    """WikiText-103 (Salesforce Research; CC BY-SA): about 103M training tokens. Files of
    ``wikitext-103-v1.zip`` in ``root`` (default ``$MXNET_HOME/datasets/wikitext-103``)."""

    _namespace = "wikitext-103"
