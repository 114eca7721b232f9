"""``contrib.text.vocab``: a vocabulary indexing tokens as MXNet 1.9.1's does.

Index 0 is the unknown token, then the reserved tokens in their order, then the counter's
tokens by decreasing frequency, ties in increasing token order, stopping at ``min_freq`` or
``most_freq_count``.
"""
from __future__ import annotations

import collections

__all__ = ["Vocabulary", "UNKNOWN_IDX"]

UNKNOWN_IDX = 0


class Vocabulary:
    """Tokens indexed from a ``collections.Counter`` (see the module's docstring for the
    order)."""

    def __init__(self, counter=None, most_freq_count=None, min_freq=1, unknown_token="<unk>",
                 reserved_tokens=None):
        if not min_freq > 0:
            raise ValueError("`min_freq` must be set to a positive value.")
        if reserved_tokens is not None:
            reserved = set(reserved_tokens)
            if unknown_token in reserved:
                raise ValueError("`reserved_token` cannot contain `unknown_token`.")
            if len(reserved) != len(reserved_tokens):
                raise ValueError("`reserved_tokens` cannot contain duplicate reserved tokens.")
        self._unknown_token = unknown_token
        self._idx_to_token = [unknown_token]
        self._reserved_tokens = None if reserved_tokens is None else list(reserved_tokens)
        if reserved_tokens is not None:
            self._idx_to_token.extend(reserved_tokens)
        self._token_to_idx = {token: idx for idx, token in enumerate(self._idx_to_token)}
        if counter is not None:
            self._index_counter_keys(counter, most_freq_count, min_freq)

    def _index_counter_keys(self, counter, most_freq_count, min_freq):
        if not isinstance(counter, collections.Counter):
            raise TypeError("`counter` must be an instance of collections.Counter.")
        special = set(self._idx_to_token)
        token_freqs = sorted(counter.items(), key=lambda x: x[0])
        token_freqs.sort(key=lambda x: x[1], reverse=True)
        token_cap = len(special) + (len(counter) if most_freq_count is None else most_freq_count)
        for token, freq in token_freqs:
            if freq < min_freq or len(self._idx_to_token) == token_cap:
                break
            if token not in special:
                self._idx_to_token.append(token)
                self._token_to_idx[token] = len(self._idx_to_token) - 1

    def __len__(self):
        return len(self._idx_to_token)

    @property
    def token_to_idx(self):
        """A dict from each token to its index."""
        return self._token_to_idx

    @property
    def idx_to_token(self):
        """The list of tokens, by index."""
        return self._idx_to_token

    @property
    def unknown_token(self):
        return self._unknown_token

    @property
    def reserved_tokens(self):
        return self._reserved_tokens

    def to_indices(self, tokens):
        """The index of a token, or the list of indices of a list of tokens (0 for unknown)."""
        if not isinstance(tokens, list):
            return self._token_to_idx.get(tokens, UNKNOWN_IDX)
        return [self._token_to_idx.get(token, UNKNOWN_IDX) for token in tokens]

    def to_tokens(self, indices):
        """The token at an index, or the list of tokens at a list of indices."""
        single = not isinstance(indices, list)
        max_idx = len(self._idx_to_token) - 1
        tokens = []
        for idx in [indices] if single else indices:
            if not isinstance(idx, int) or idx > max_idx:
                raise ValueError("Token index %s in the provided `indices` is invalid." % (idx,))
            tokens.append(self._idx_to_token[idx])
        return tokens[0] if single else tokens

    def set_embedding(self, *embeddings):
        """Attach the token embeddings ``embeddings`` (concatenated, indexed as this vocabulary)
        as ``self.embedding``; ``set_embedding(None)`` removes it (GluonNLP's method)."""
        if len(embeddings) == 1 and embeddings[0] is None:
            self.embedding = None
            return
        from .embedding import CompositeEmbedding
        self.embedding = CompositeEmbedding(self, list(embeddings))
