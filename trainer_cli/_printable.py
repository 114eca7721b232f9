"""Text from files and folder names made safe to print on a terminal.

A run folder named ``ESC ] 0;title BEL`` or ``ESC [2J`` would retitle or clear the terminal of
whoever runs ``trainer runs``; a lone surrogate (a name that is not UTF-8) would make the print
itself fail. Every such character is spelled as a Python-style escape instead (``\\x1b``), so
what is shown is still the name, and no byte of it is obeyed. Rich markup is not this module's
business: the renderers print with markup off, or print ``Text`` objects.
"""
from __future__ import annotations

import unicodedata

__all__ = ["printable", "printable_tree"]

# C0/C1 controls, DEL, format characters (bidi overrides, zero-width), line and paragraph
# separators, and surrogates.
_ESCAPED_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}


def _escape(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that os.fsdecode could not decode
        return "\\x%02x" % (code - 0xDC00)
    if code <= 0xFF:
        return "\\x%02x" % code
    return "\\u%04x" % code


def printable(text, keep_newlines: bool = False) -> str:
    """``text`` (any value, as ``str()``) with control and format characters escaped; newlines
    and tabs stay with ``keep_newlines`` (a message of several lines)."""
    text = str(text)
    if text.isprintable():  # the usual case, at C speed
        return text
    out = []
    for char in text:
        if keep_newlines and char in "\n\t":
            out.append(char)
        elif unicodedata.category(char) in _ESCAPED_CATEGORIES:
            out.append(_escape(char))
        else:
            out.append(char)
    return "".join(out)


def printable_tree(value):
    """``value`` (dicts, lists, tuples, strings, numbers) with every string, keys included,
    :func:`printable`."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable_tree(k): printable_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(printable_tree(v) for v in value)
    return value
