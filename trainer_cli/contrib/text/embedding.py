"""``contrib.text.embedding``: pre-trained token embeddings read from local text files, as
MXNet 1.9.1's ``mxnet.contrib.text.embedding``.

``GloVe`` and ``FastText`` read ``<embedding_root>/<glove|fasttext>/<pretrained_file_name>``,
by default under ``$MXNET_HOME/embeddings`` (``~/.mxnet/embeddings``), exactly where MXNet keeps
them; ``pretrained_file_path=`` names the file directly. Nothing is downloaded: a missing file
is an error naming the expected path. Each line is a token and its numbers, separated by
``elem_delim``; the first token is index 0 (the unknown token), the file's tokens follow in the
file's order. Files are read bounded (a regular file, lines of at most ``MAX_LINE_CHARS``).
"""
from __future__ import annotations

import io
import os
import warnings

import numpy

from ... import ndarray as nd
from ..._bounded import open_regular
from ...base import MXNetError, data_dir
from . import vocab
from ._names import FASTTEXT_FILES, GLOVE_FILES

__all__ = ["register", "create", "get_pretrained_file_names", "TokenEmbedding", "GloVe",
           "FastText", "CustomEmbedding", "CompositeEmbedding", "EmbeddingFileError",
           "MAX_LINE_CHARS"]

MAX_LINE_CHARS = 1 << 20
_REGISTRY = {}


class EmbeddingFileError(MXNetError, AssertionError, ValueError):
    """A pre-trained embedding file that is missing or malformed (MXNet: ValueError or an
    assertion)."""


def register(embedding_cls):
    """Register a token embedding class under its lower-case name, for ``create``."""
    _REGISTRY[embedding_cls.__name__.lower()] = embedding_cls
    return embedding_cls


def create(embedding_name, **kwargs):
    """The registered token embedding ``embedding_name`` (``glove``, ``fasttext``) made with
    ``kwargs``."""
    name = embedding_name.lower()
    if name not in _REGISTRY:
        raise KeyError("Cannot find token embedding %r; the registered ones are: %s"
                       % (embedding_name, ", ".join(sorted(_REGISTRY))))
    return _REGISTRY[name](**kwargs)


def get_pretrained_file_names(embedding_name=None):
    """The pre-trained file names of ``embedding_name``, or a dict of them for every
    registered embedding."""
    if embedding_name is not None:
        if embedding_name not in _REGISTRY:
            raise KeyError("Cannot find `embedding_name` %s. Use `get_pretrained_file_names("
                           "embedding_name=None).keys()` to get all the valid embedding names."
                           % embedding_name)
        return list(_REGISTRY[embedding_name].pretrained_file_names)
    return {name: list(cls.pretrained_file_names) for name, cls in _REGISTRY.items()}


def _parse_line(line, elem_delim, path, line_num):
    elems = line.rstrip().split(elem_delim)
    if len(elems) <= 1:
        raise EmbeddingFileError("%s, line %d: expected a token and its numbers separated by "
                                 "%r" % (path, line_num, elem_delim))
    try:
        return elems[0], [float(x) for x in elems[1:]]
    except ValueError as exc:
        raise EmbeddingFileError("%s, line %d: %s" % (path, line_num, exc)) from None


class TokenEmbedding(vocab.Vocabulary):
    """A vocabulary with a vector per token (``idx_to_vec``, an NDArray of shape
    (len, vec_len)); the base of the embeddings."""

    pretrained_file_names = ()

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._vec_len = None
        self._idx_to_vec = None

    @classmethod
    def _pretrained_path(cls, embedding_root, pretrained_file_name, pretrained_file_path):
        if pretrained_file_path is not None:
            return pretrained_file_path
        name = cls.__name__.lower()
        if pretrained_file_name not in cls.pretrained_file_names:
            raise KeyError("Cannot find pretrained file %s for token embedding %s. Valid "
                           "pretrained files for embedding %s: %s"
                           % (pretrained_file_name, name, name,
                              ", ".join(cls.pretrained_file_names)))
        root = embedding_root if embedding_root is not None else os.path.join(data_dir(),
                                                                              "embeddings")
        return os.path.join(os.path.expanduser(root), name, pretrained_file_name)

    def _load_embedding(self, pretrained_file_path, elem_delim, init_unknown_vec,
                        encoding="utf8"):
        path = os.path.expanduser(os.fspath(pretrained_file_path))
        if not os.path.exists(path):
            raise EmbeddingFileError(
                "%s: the pre-trained token embedding file is not there (nothing is downloaded "
                "here: put the file there, e.g. unpacked from MXNet's or the embedding's own "
                "archive, or name it with pretrained_file_path=)" % path)
        vec_len, rows, seen, unknown_vec = None, [], set(), None
        try:
            with io.TextIOWrapper(open_regular(path, "rb"), encoding=encoding) as f:
                line_num = 0
                while True:
                    line = f.readline(MAX_LINE_CHARS + 1)
                    if not line:
                        break
                    line_num += 1
                    if len(line) > MAX_LINE_CHARS:
                        raise EmbeddingFileError("%s, line %d: longer than %d characters"
                                                 % (path, line_num, MAX_LINE_CHARS))
                    token, elems = _parse_line(line, elem_delim, path, line_num)
                    if token == self.unknown_token and unknown_vec is None:
                        unknown_vec = elems
                        seen.add(token)
                    elif token in seen:
                        warnings.warn("At line %d of the pre-trained token embedding file: the "
                                      "embedding vector for token %s has been loaded and a "
                                      "duplicate embedding for the  same token is seen and "
                                      "skipped." % (line_num, token))
                    elif len(elems) == 1:
                        warnings.warn("At line %d of the pre-trained text embedding file: token "
                                      "%s with 1-dimensional vector %s is likely a header and is "
                                      "skipped." % (line_num, token, elems))
                    else:
                        if vec_len is None:
                            vec_len = len(elems)
                        elif len(elems) != vec_len:
                            raise EmbeddingFileError(
                                "%s, line %d: the dimension of token %s is %d but the dimension "
                                "of previous tokens is %d. Dimensions of all the tokens must be "
                                "the same." % (path, line_num, token, len(elems), vec_len))
                        rows.append(numpy.array(elems, dtype=numpy.float32))
                        self._idx_to_token.append(token)
                        self._token_to_idx[token] = len(self._idx_to_token) - 1
                        seen.add(token)
        except UnicodeDecodeError as exc:
            raise EmbeddingFileError("%s: not %s text (%s)" % (path, encoding, exc)) from None
        except OSError as exc:
            raise EmbeddingFileError("%s: cannot read the file (%s)"
                                     % (path, getattr(exc, "strerror", None) or exc)) from None
        if vec_len is None:
            raise EmbeddingFileError("%s: no token vectors in the file" % path)
        table = numpy.zeros((len(rows) + 1, vec_len), dtype=numpy.float32)
        if rows:
            table[1:] = numpy.stack(rows)
        self._vec_len = vec_len
        self._idx_to_vec = nd.array(table)
        if unknown_vec is None:
            self._idx_to_vec[vocab.UNKNOWN_IDX] = init_unknown_vec(shape=vec_len)
        else:
            self._idx_to_vec[vocab.UNKNOWN_IDX] = nd.array(unknown_vec)

    def _index_tokens_from_vocabulary(self, vocabulary):
        self._token_to_idx = dict(vocabulary.token_to_idx)
        self._idx_to_token = list(vocabulary.idx_to_token)
        self._unknown_token = vocabulary.unknown_token
        self._reserved_tokens = (None if vocabulary.reserved_tokens is None
                                 else list(vocabulary.reserved_tokens))

    def _set_idx_to_vec_by_embeddings(self, token_embeddings, vocab_len, vocab_idx_to_token):
        new_vec_len = sum(embed.vec_len for embed in token_embeddings)
        table = numpy.zeros((vocab_len, new_vec_len), dtype=numpy.float32)
        col = 0
        for embed in token_embeddings:
            end = col + embed.vec_len
            table[0, col:end] = embed.idx_to_vec[0].asnumpy()
            if vocab_len > 1:
                table[1:, col:end] = embed.get_vecs_by_tokens(
                    list(vocab_idx_to_token[1:])).asnumpy()
            col = end
        self._vec_len = new_vec_len
        self._idx_to_vec = nd.array(table)

    def _build_embedding_for_vocabulary(self, vocabulary):
        if vocabulary is not None:
            if not isinstance(vocabulary, vocab.Vocabulary):
                raise TypeError("The argument `vocabulary` must be an instance of "
                                "contrib.text.vocab.Vocabulary.")
            self._set_idx_to_vec_by_embeddings([self], len(vocabulary), vocabulary.idx_to_token)
            self._index_tokens_from_vocabulary(vocabulary)

    @property
    def vec_len(self):
        return self._vec_len

    @property
    def idx_to_vec(self):
        return self._idx_to_vec

    def get_vecs_by_tokens(self, tokens, lower_case_backup=False):
        """The vector of a token (1-D), or of each token of a list (2-D); the unknown token's
        vector for tokens not indexed (with ``lower_case_backup``, the lower-case token is
        looked up before giving up)."""
        single = not isinstance(tokens, list)
        if single:
            tokens = [tokens]
        if lower_case_backup:
            indices = [self.token_to_idx[t] if t in self.token_to_idx
                       else self.token_to_idx.get(t.lower(), vocab.UNKNOWN_IDX) for t in tokens]
        else:
            indices = [self.token_to_idx.get(t, vocab.UNKNOWN_IDX) for t in tokens]
        table = self.idx_to_vec.asnumpy()
        vecs = nd.array(table[numpy.asarray(indices, dtype=numpy.int64)].reshape(
            len(indices), table.shape[1]), ctx=self.idx_to_vec.context)
        return vecs[0] if single else vecs

    def update_token_vectors(self, tokens, new_vectors):
        """Replace the vectors of ``tokens`` (indexed ones only; the unknown token by name)."""
        if self.idx_to_vec is None:
            raise ValueError("The property `idx_to_vec` has not been properly set.")
        if not isinstance(tokens, list) or len(tokens) == 1:
            if not isinstance(new_vectors, nd.NDArray) or new_vectors.ndim not in (1, 2):
                raise ValueError("`new_vectors` must be a 1-D or 2-D NDArray if `tokens` is a "
                                 "singleton.")
            if not isinstance(tokens, list):
                tokens = [tokens]
            if new_vectors.ndim == 1:
                new_vectors = new_vectors.reshape((1, -1))
        elif not isinstance(new_vectors, nd.NDArray) or new_vectors.ndim != 2:
            raise ValueError("`new_vectors` must be a 2-D NDArray if `tokens` is a list of "
                             "multiple strings.")
        if new_vectors.shape != (len(tokens), self.vec_len):
            raise ValueError("The length of new_vectors must be equal to the number of tokens "
                             "and the width of new_vectors must be equal to the dimension of "
                             "embeddings of the glossary.")
        indices = []
        for token in tokens:
            if token not in self.token_to_idx:
                raise ValueError("Token %s is unknown. To update the embedding vector for an "
                                 "unknown token, please specify it explicitly as the "
                                 "`unknown_token` %s in `tokens`. This is to avoid unintended "
                                 "updates." % (token, self.idx_to_token[vocab.UNKNOWN_IDX]))
            indices.append(self.token_to_idx[token])
        table = self.idx_to_vec.asnumpy().copy()
        table[numpy.asarray(indices)] = new_vectors.asnumpy()
        self._idx_to_vec = nd.array(table, ctx=self.idx_to_vec.context)


@register
class GloVe(TokenEmbedding):
    """GloVe vectors from ``<embedding_root>/glove/<pretrained_file_name>`` (or
    ``pretrained_file_path``); restricted to ``vocabulary``'s tokens when given."""

    pretrained_file_names = GLOVE_FILES

    def __init__(self, pretrained_file_name="glove.840B.300d.txt", embedding_root=None,
                 init_unknown_vec=nd.zeros, vocabulary=None, pretrained_file_path=None,
                 **kwargs):
        path = self._pretrained_path(embedding_root, pretrained_file_name, pretrained_file_path)
        super().__init__(**kwargs)
        self._load_embedding(path, " ", init_unknown_vec)
        if vocabulary is not None:
            self._build_embedding_for_vocabulary(vocabulary)


@register
class FastText(TokenEmbedding):
    """fastText vectors from ``<embedding_root>/fasttext/<pretrained_file_name>`` (or
    ``pretrained_file_path``); restricted to ``vocabulary``'s tokens when given."""

    pretrained_file_names = FASTTEXT_FILES

    def __init__(self, pretrained_file_name="wiki.simple.vec", embedding_root=None,
                 init_unknown_vec=nd.zeros, vocabulary=None, pretrained_file_path=None,
                 **kwargs):
        path = self._pretrained_path(embedding_root, pretrained_file_name, pretrained_file_path)
        super().__init__(**kwargs)
        self._load_embedding(path, " ", init_unknown_vec)
        if vocabulary is not None:
            self._build_embedding_for_vocabulary(vocabulary)


class CustomEmbedding(TokenEmbedding):
    """Vectors from any text file of lines ``token<delim>v1<delim>v2...``."""

    def __init__(self, pretrained_file_path, elem_delim=" ", encoding="utf8",
                 init_unknown_vec=nd.zeros, vocabulary=None, **kwargs):
        super().__init__(**kwargs)
        self._load_embedding(pretrained_file_path, elem_delim, init_unknown_vec, encoding)
        if vocabulary is not None:
            self._build_embedding_for_vocabulary(vocabulary)


class CompositeEmbedding(TokenEmbedding):
    """``vocabulary``'s tokens with the vectors of ``token_embeddings`` concatenated."""

    def __init__(self, vocabulary, token_embeddings):
        if not isinstance(vocabulary, vocab.Vocabulary):
            raise TypeError("The argument `vocabulary` must be an instance of "
                            "contrib.text.vocab.Vocabulary.")
        if not isinstance(token_embeddings, list):
            token_embeddings = [token_embeddings]
        for embed in token_embeddings:
            if not isinstance(embed, TokenEmbedding):
                raise TypeError("The argument `token_embeddings` must be an instance or a list "
                                "of instances of contrib.text.embedding.TokenEmbedding.")
        self._index_tokens_from_vocabulary(vocabulary)
        self._set_idx_to_vec_by_embeddings(token_embeddings, len(self), self.idx_to_token)


_TokenEmbedding = TokenEmbedding     # MXNet's own name for the base class
