"""Text for a language model in the ``data`` section::

    data:
      train: {type: text, path: corpus.txt, level: char, bptt: 35}
      val:   {type: text, path: valid.txt, level: char, bptt: 35}
      batch_size: 32

The text is cut into ``batch_size`` streams read side by side; each batch holds the next
``bptt`` tokens of every stream (inputs) and the tokens one further on (labels), so a model that
carries its recurrent state from batch to batch reads every stream through. The vocabulary is
the training text's (its tokens by falling count); the validation text's unknown tokens map to
``<unk>``.
"""
from __future__ import annotations

from typing import Annotated, Literal, Optional

import annotated_types as at
from pydantic import Field, ValidationInfo, field_validator

from .base import Section
from .files import checking_files, resolve_input

__all__ = ["TextData"]


class TextData(Section):
    """A UTF-8 text file for a character- or word-level language model."""

    type: Literal["text"]
    path: str = Field(description="the text file; relative paths are looked up next to the "
                                  "config, then in the working folder")
    level: Literal["char", "word"] = Field("char", description="tokens: characters, or words "
                                                               "split at white space")
    bptt: Annotated[int, at.Ge(1)] = Field(35, description="tokens per stream in a batch "
                                                           "(back-propagation through time)")
    max_vocab: Optional[Annotated[int, at.Ge(2)]] = Field(
        None, description="keep the most frequent tokens, the rest become <unk> (train only)")

    @field_validator("path")
    @classmethod
    def _exists(cls, value: str, info: ValidationInfo):
        return resolve_input(value, info, "text file") if checking_files(info) else value
