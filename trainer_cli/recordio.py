"""MXNet's RecordIO files (``mx.recordio``): sequential (``MXRecordIO``) and indexed
(``MXIndexedRecordIO``, with MXNet's ``.idx`` text index) readers and writers, and the image
record header (``IRHeader``, ``pack``, ``unpack``, ``pack_img``, ``unpack_img``).

The file format is dmlc-core's, byte for byte: each record is the magic number 0xced7230a, a
32-bit word holding a continuation flag (top 3 bits) and a length (low 29 bits), the bytes, and
zero padding to a multiple of 4. A record that holds the magic number at a 4-byte-aligned
offset is written in parts split there (flags 1, 2, ..., 3), and reading joins them with the
magic number put back, so any bytes round-trip. Files from MXNet read here and files written
here read in MXNet.

Reading is bounded and checked: a file that is not a regular file, a wrong magic number, a
record longer than 2**30 bytes, a part sequence that does not close, a truncated record, or an
index line that is not ``key<TAB>offset`` is refused with an error naming the file and the byte
offset or line.
"""
from __future__ import annotations

import io
import numbers
import os
import struct
import threading
from collections import namedtuple

import numpy as np

from ._bounded import MiB, open_regular, read_regular_text
from .base import MXNetError

__all__ = ["MXRecordIO", "MXIndexedRecordIO", "IRHeader", "pack", "unpack", "pack_img",
           "unpack_img", "RecordIOError"]

_MAGIC = 0xced7230a
_MAGIC_BYTES = struct.pack("<I", _MAGIC)
_HEAD = struct.Struct("<II")
MAX_RECORD_BYTES = 1 << 30          # dmlc-core's writer refuses records of 2**30 bytes or more
MAX_INDEX_BYTES = 1024 * MiB


class RecordIOError(MXNetError, ValueError):
    """A RecordIO or index file that is damaged or not one (MXNet stops with MXNetError)."""


def _flag_length(word):
    return word >> 29, word & ((1 << 29) - 1)


class MXRecordIO:
    """Read (``flag='r'``) or write (``flag='w'``) the records of ``uri`` one after another:
    ``write(bytes)``, ``read()`` (the next record's bytes, None at the end). A reader used in a
    forked child must be reopened first (``reset``): the two processes would share its offset."""

    def __init__(self, uri, flag):
        self.uri = os.fspath(uri)
        self.flag = flag
        self.pid = None
        self.is_open = False
        self._file = None
        self.open()

    def open(self):
        if self.flag == "w":
            self._file = open(self.uri, "wb")
            self.writable = True
        elif self.flag == "r":
            try:
                self._file = open_regular(self.uri, "rb")
            except OSError as exc:
                raise RecordIOError("%s: cannot open the record file (%s)"
                                    % (self.uri, exc.strerror or exc)) from None
            self.writable = False
        else:
            raise ValueError("Invalid flag %s" % self.flag)
        self.pid = os.getpid()
        self.is_open = True

    def __del__(self):
        try:
            self.close()
        except Exception:       # interpreter shutdown: nothing left to report to
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __getstate__(self):
        """What a worker process needs to reopen the file (a writer cannot be sent)."""
        if self.is_open and self.writable:
            raise RuntimeError("a RecordIO writer cannot be sent to another process")
        state = dict(self.__dict__)
        state["is_open"] = False
        state["_file"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if self.flag == "r":
            self.open()

    def _check_pid(self, allow_reset=False):
        if self.pid != os.getpid():
            if not allow_reset:
                raise RuntimeError("Forbidden operation in multiple processes")
            self.reset()

    def close(self):
        if not self.is_open:
            return
        self._file.close()
        self.is_open = False
        self.pid = None

    def reset(self):
        """Close and reopen: a reader starts from the first record again."""
        self.close()
        self.open()

    def write(self, buf):
        """Append one record (bytes)."""
        if not self.writable:
            raise RecordIOError("%s: opened for reading, not writing" % self.uri)
        self._check_pid(allow_reset=False)
        buf = bytes(buf)
        if len(buf) >= MAX_RECORD_BYTES:
            raise RecordIOError("%s: RecordIO only accept record less than 2^30 bytes (this one "
                                "has %d)" % (self.uri, len(buf)))
        parts, start = [], 0
        # Split at every 4-byte-aligned copy of the magic number, as dmlc-core's writer does.
        for i in range(0, len(buf) - len(buf) % 4, 4):
            if buf[i:i + 4] == _MAGIC_BYTES:
                parts.append((1 if start == 0 else 2, buf[start:i]))
                start = i + 4
        parts.append((3 if start else 0, buf[start:]))
        out = []
        for flag, part in parts:
            out.append(_HEAD.pack(_MAGIC, (flag << 29) | len(part)))
            out.append(part)
        out.append(b"\0" * (-len(buf) % 4))
        self._file.write(b"".join(out))

    def _part(self, within_record):
        """The next record part's ``(offset, flag, length, padded length)``, checked against the
        format and the file's size (before anything is read: a damaged length must not make a
        huge read buffer); None at the end of the file between records."""
        f = self._file
        offset = f.tell()
        head = f.read(_HEAD.size)
        if not head and not within_record:
            return None
        if len(head) != _HEAD.size:
            raise RecordIOError("%s: truncated record header at byte %d" % (self.uri, offset))
        magic, word = _HEAD.unpack(head)
        if magic != _MAGIC:
            raise RecordIOError("%s: not a RecordIO record at byte %d (magic %#x, expected "
                                "%#x)" % (self.uri, offset, magic, _MAGIC))
        flag, length = _flag_length(word)
        if flag > 3 or (flag in (2, 3)) != within_record:
            raise RecordIOError("%s: a record part with flag %d out of sequence at byte %d"
                                % (self.uri, flag, offset))
        padded = length + (-length % 4)
        if offset + _HEAD.size + padded > os.fstat(f.fileno()).st_size:
            raise RecordIOError("%s: truncated record at byte %d (%d bytes claimed, the "
                                "file ends sooner)" % (self.uri, offset, padded))
        return offset, flag, length, padded

    def read(self):
        """The next record's bytes, or None at the end of the file."""
        if self.writable:
            raise RecordIOError("%s: opened for writing, not reading" % self.uri)
        self._check_pid(allow_reset=False)
        pieces, size = [], 0
        while True:
            part = self._part(bool(pieces))
            if part is None:
                return None
            offset, flag, length, padded = part
            size += length + (4 if pieces else 0)
            if size >= MAX_RECORD_BYTES:
                raise RecordIOError("%s: the record at byte %d is larger than 2^30 bytes"
                                    % (self.uri, offset))
            data = self._file.read(padded)
            if len(data) != padded:
                raise RecordIOError("%s: truncated record at byte %d (%d of %d bytes)"
                                    % (self.uri, offset, len(data), padded))
            if pieces:
                pieces.append(_MAGIC_BYTES)
            pieces.append(data[:length])
            if flag in (0, 3):
                return b"".join(pieces)


class MXIndexedRecordIO(MXRecordIO):
    """``MXRecordIO`` with random access through an index file, ``idx_path``: a line
    ``key<TAB>byte offset`` per record (MXNet's ``.idx``). ``keys`` lists them in file order;
    ``read_idx(key)``, ``write_idx(key, bytes)``; keys are made with ``key_type``."""

    def __init__(self, idx_path, uri, flag, key_type=int):
        self.idx_path = os.fspath(idx_path)
        self.idx = {}
        self.keys = []
        self.key_type = key_type
        self.fidx = None
        super().__init__(uri, flag)

    def open(self):
        super().open()
        self.idx = {}
        self.keys = []
        if self.writable:
            self.fidx = open(self.idx_path, "w")
            return
        try:
            text = read_regular_text(self.idx_path, MAX_INDEX_BYTES)
        except UnicodeDecodeError:
            raise RecordIOError("%s: not a record index (not UTF-8 text)" % self.idx_path) \
                from None
        except OSError as exc:
            raise RecordIOError("%s: cannot read the record index (%s)"
                                % (self.idx_path, getattr(exc, "reason", None) or exc.strerror
                                   or exc)) from None
        for number, line in enumerate(text.splitlines(), 1):
            fields = line.strip().split("\t")
            if fields == [""]:
                continue
            try:
                key, offset = self.key_type(fields[0]), int(fields[1])
                if offset < 0 or len(fields) != 2:
                    raise ValueError
            except (ValueError, IndexError):
                raise RecordIOError("%s, line %d: expected 'key<TAB>byte offset', got %r"
                                    % (self.idx_path, number, line[:80])) from None
            self.idx[key] = offset
            self.keys.append(key)

    def close(self):
        if not self.is_open:
            return
        super().close()
        if self.fidx is not None:
            self.fidx.close()
            self.fidx = None

    # The lock around a seek and its read (read_idx, read_idx_head), so that threads may read
    # records of one reader at once; made anew in a forked process, where another thread may
    # have held the parent's.
    _lock = None
    _lock_pid = None

    def __getstate__(self):
        state = super().__getstate__()
        state["fidx"] = None
        state.pop("_lock", None)
        state.pop("_lock_pid", None)
        return state

    def _reading(self):
        pid = os.getpid()
        if self._lock_pid != pid:
            self._lock, self._lock_pid = threading.Lock(), pid
        return self._lock

    def seek(self, idx):
        """Position the reader at record ``idx`` (a key of the index)."""
        if self.writable:
            raise RecordIOError("%s: opened for writing, not reading" % self.uri)
        self._check_pid(allow_reset=True)
        try:
            offset = self.idx[idx]
        except KeyError:
            raise KeyError("%r is not a key of %s" % (idx, self.idx_path)) from None
        self._file.seek(offset)

    def tell(self):
        """The byte offset the next record will be written at."""
        if not self.writable:
            raise RecordIOError("%s: opened for reading, not writing" % self.uri)
        return self._file.tell()

    def read_idx(self, idx):
        """The record of key ``idx``."""
        with self._reading():
            self.seek(idx)
            record = self.read()
        if record is None:
            raise RecordIOError("%s: the index %s points past the end of the file for key %r"
                                % (self.uri, self.idx_path, idx))
        return record

    def read_idx_head(self, idx, size):
        """The first ``size`` bytes of record ``idx`` (fewer when it is shorter), without
        reading the rest of it: an image record's header and labels, say."""
        with self._reading():
            self.seek(idx)
            part = self._part(False)
            if part is not None and part[1] == 0:
                return self._file.read(min(size, part[2]))
        return self.read_idx(idx)[:size]    # a record in parts (or none there): read it whole

    def write_idx(self, idx, buf):
        """Append record ``buf`` under key ``idx``."""
        key = self.key_type(idx)
        offset = self.tell()
        self.write(buf)
        self.fidx.write("%s\t%d\n" % (str(key), offset))
        self.idx[key] = offset
        self.keys.append(key)


def record_offsets(reader):
    """The byte offset of every record of ``reader`` (an ``MXRecordIO`` opened for reading),
    found by reading the file once; the reader is left at its first record."""
    reader.reset()
    offsets = []
    while True:
        offset = reader._file.tell()
        if reader.read() is None:
            break
        offsets.append(offset)
    reader.reset()
    return offsets


def read_record_at(reader, offset):
    """The record of ``reader`` at byte ``offset`` (one of ``record_offsets``')."""
    reader._check_pid(allow_reset=True)
    reader._file.seek(offset)
    record = reader.read()
    if record is None:
        raise RecordIOError("%s: no record at byte %d" % (reader.uri, offset))
    return record


IRHeader = namedtuple("HEADER", ["flag", "label", "id", "id2"])
IRHeader.__doc__ = """An image record's header: ``flag`` (0, or the number of float32 labels that
follow the header), ``label`` (a number, or an array of labels), ``id`` and ``id2`` (uint64)."""
_IR = struct.Struct("IfQQ")
IR_HEADER_BYTES = _IR.size      # an image record's header; float32 labels follow when it counts them


def pack(header, s):
    """``header`` (an ``IRHeader``; an array label goes after it as float32) and the bytes
    ``s`` as one record's bytes."""
    header = IRHeader(*header)
    if isinstance(header.label, numbers.Number):
        header = header._replace(flag=0)
    else:
        label = np.asarray(header.label, dtype=np.float32)
        header = header._replace(flag=label.size, label=0)
        s = label.tobytes() + s
    return _IR.pack(*header) + s


def unpack(s):
    """A record's bytes as ``(IRHeader, payload bytes)`` (an array label when the header's
    flag counts labels)."""
    if len(s) < _IR.size:
        raise RecordIOError("an image record of %d bytes is shorter than its %d-byte header"
                            % (len(s), _IR.size))
    header = IRHeader(*_IR.unpack(s[:_IR.size]))
    s = s[_IR.size:]
    if header.flag > 0:
        if len(s) < 4 * header.flag:
            raise RecordIOError("an image record's header counts %d labels; %d bytes follow it"
                                % (header.flag, len(s)))
        header = header._replace(label=np.frombuffer(s, np.float32, header.flag))
        s = s[header.flag * 4:]
    return header, s


def unpack_img(s, iscolor=-1):
    """``(IRHeader, image)``: the record's image decoded as OpenCV's ``imdecode`` gives it, a
    uint8 NumPy array in BGR order: ``iscolor`` 1 three channels, 0 gray (H, W), -1 as stored
    (gray (H, W), BGR, or BGRA with an alpha channel). Decoded with Pillow."""
    # Pillow's decoding lives with the image data sets; loaded on first use (gluon sits above
    # this module, which gluon's RecordFileDataset imports).
    from .gluon.data.vision import image_file
    header, s = unpack(s)
    if iscolor < 0:
        Image = image_file._pillow()
        try:
            with Image.open(io.BytesIO(s)) as probe:
                mode = probe.mode
        except (OSError, ValueError, SyntaxError) as exc:
            raise image_file.ImageFileError("<record>: cannot decode the image (%s)" % exc) \
                from None
        if mode in ("RGBA", "LA", "PA") or (mode == "P" and "transparency" in probe.info):
            with Image.open(io.BytesIO(s)) as image:
                rgba = np.asarray(image.convert("RGBA"), dtype=np.uint8)
            return header, np.ascontiguousarray(rgba[..., [2, 1, 0, 3]])
        iscolor = 0 if mode in ("L", "1", "I;16", "I;16B", "I;16L", "I") else 1
    img = image_file.imdecode(s, 1 if iscolor > 0 else 0, "<record>")
    if iscolor > 0:
        return header, np.ascontiguousarray(img[..., ::-1])
    return header, img[..., 0]


def pack_img(header, img, quality=95, img_fmt=".jpg"):
    """``pack`` of ``img`` (a uint8 array, BGR or gray, as OpenCV takes it) encoded as
    ``img_fmt`` (``.jpg`` with ``quality``, ``.png`` with compression level ``min(quality,
    9)``). Encoded with Pillow: the bytes are not OpenCV's, the image they decode to is (PNG)
    or close to it (JPEG)."""
    from .gluon.data.vision import image_file
    Image = image_file._pillow()
    img = np.asarray(img)
    if img.dtype != np.uint8:
        raise TypeError("pack_img encodes uint8 images, not %s" % img.dtype)
    if img.ndim == 3 and img.shape[2] == 1:
        img = img[..., 0]
    if img.ndim == 3 and img.shape[2] in (3, 4):
        order = [2, 1, 0] if img.shape[2] == 3 else [2, 1, 0, 3]
        picture = Image.fromarray(np.ascontiguousarray(img[..., order]))
    elif img.ndim == 2:
        picture = Image.fromarray(img)
    else:
        raise ValueError("pack_img takes (H, W), (H, W, 1), (H, W, 3) or (H, W, 4) images, not "
                         "%s" % (img.shape,))
    stream = io.BytesIO()
    kind = img_fmt.upper()
    if kind in (".JPG", ".JPEG"):
        if picture.mode == "RGBA":
            picture = picture.convert("RGB")
        picture.save(stream, format="JPEG", quality=int(quality))
    elif kind == ".PNG":
        picture.save(stream, format="PNG", compress_level=min(int(quality), 9))
    else:
        raise ValueError("pack_img writes '.jpg' or '.png', not %r" % (img_fmt,))
    return pack(header, stream.getvalue())
