"""MXNet's storage-fallback warning: logged when an operator without a sparse kernel densifies a
row_sparse or csr input.

Off unless ``MXNET_STORAGE_FALLBACK_LOG_VERBOSE`` is set to something other than ``0`` when
``nd`` is imported (or :func:`set_verbose` says so). MXNet logs it by default; here a sparse
array handed to a dense operator is ordinary (the answer is right either way), so it is quiet
unless asked. Each operator and storage type is logged once, with MXNet's wording, through the
``trainer_cli.nd`` logger.
"""
from __future__ import annotations

import logging
import os
import sys

__all__ = ["verbose", "set_verbose", "note", "OPERATOR_NAMES"]

verbose = os.environ.get("MXNET_STORAGE_FALLBACK_LOG_VERBOSE", "0").strip() not in ("", "0")
# Names of the operators the dispatch table knows: the frame that names the operator.
OPERATOR_NAMES: set = set()
_seen: set = set()
_logger = logging.getLogger("trainer_cli.nd")


def set_verbose(flag: bool) -> None:
    """Turn the fallback warning on or off for this process."""
    global verbose
    verbose = bool(flag)


def _operator_name(depth=2, limit=12):
    frame = sys._getframe(depth)
    first = frame.f_code.co_name if frame is not None else "?"
    for _ in range(limit):
        if frame is None:
            break
        name = frame.f_code.co_name
        if name in OPERATOR_NAMES or (name.startswith("__") and name.endswith("__")
                                       and name not in ("__init__", "__call__")):
            return name
        frame = frame.f_back
    return first


def note(array, op=None) -> None:
    """Log (once per operator and storage type) that ``array`` is being densified for ``op``
    (found on the call stack when not given)."""
    if op is None:
        op = _operator_name(3)
    key = (op, array.stype)
    if key in _seen:
        return
    _seen.add(key)
    _logger.warning(
        "Storage type fallback detected:\noperator = %s\ninput storage types = [%s, ]\n"
        "output storage types = [default, ]\nThe operator with default storage type will be "
        "dispatched for execution. You're seeing this warning message because the operator above "
        "is unable to process the given ndarrays with specified storage types, context and "
        "parameter. Temporary dense ndarrays are generated in order to execute the operator. "
        "This does not affect the correctness of the programme. You can set environment variable "
        "MXNET_STORAGE_FALLBACK_LOG_VERBOSE to 0 to suppress this warning.", op, array.stype)
