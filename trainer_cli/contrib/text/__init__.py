"""``contrib.text``: counting tokens, vocabularies, and pre-trained token embeddings (GloVe,
fastText, or any such text file) read from local files, as MXNet 1.9.1's ``mxnet.contrib.text``.
"""
from . import embedding, utils, vocab

__all__ = ["utils", "vocab", "embedding"]
