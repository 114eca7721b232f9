"""The ``.npz`` writer (``trainer_cli._npz``): the bytes ``zipfile`` writes into a stream it cannot
seek, whole at once (``write_npz``) or with the CRCs and central directory finished later from the
file (``write_npz_deferred``, how a checkpoint leaves the training thread at numpy.save's speed)."""
import ctypes
import errno
import hashlib
import io
import os
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from numpy.lib import format as npy_format

from trainer_cli import _atomic, _npz
from trainer_cli._npz import read_npz, write_npz, write_npz_deferred


class Unseekable:
    def __init__(self):
        self.buffer = io.BytesIO()

    def write(self, data):
        return self.buffer.write(data)

    def flush(self):
        pass


def zipfile_bytes(arrays):
    """What zipfile and numpy's own .npy writer make of ``arrays`` in a stream without seek."""
    sink = Unseekable()
    with zipfile.ZipFile(sink, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, arr in arrays.items():
            with zf.open(name + ".npy", mode="w", force_zip64=True) as member:
                npy_format.write_array(member, np.asarray(arr), allow_pickle=False)
    return sink.buffer.getvalue()


def written(arrays):
    out = io.BytesIO()
    write_npz(out, arrays)
    return out.getvalue()


def deferred(path, arrays, change=None):
    """The file ``write_npz_deferred`` + ``finish`` make, ``change`` applied in between."""
    with _atomic.open_new_file(path, readable=True) as f:
        pending = write_npz_deferred(f, arrays)
        if change is not None:
            change()
        size, digest = pending.finish(f)
    data = path.read_bytes()
    assert size == len(data) and digest == hashlib.sha256(data).hexdigest()
    return data


MIXED = {
    "w": np.arange(12, dtype=np.float32).reshape(3, 4),
    "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)),
    "strided": np.arange(20.0).reshape(4, 5)[:, ::2],
    "scalar": np.float64(3.5),
    "empty": np.zeros((0, 5), np.float16),
    "mask": np.array([True, False, True]),
    "ids": np.array([-1, 2**40], np.int64),
    "z": np.array([1 + 2j], np.complex64),
    "big_endian": np.arange(3, dtype=">i4"),
    "gewichte_ä": np.ones(2, np.float32),
}


def test_the_bytes_are_zipfiles(tmp_path):
    expected = zipfile_bytes(MIXED)
    assert written(MIXED) == expected
    assert deferred(tmp_path / "a.npz", MIXED) == expected
    with zipfile.ZipFile(io.BytesIO(expected)) as zf:
        assert zf.testzip() is None          # every CRC right
    loaded = read_npz(io.BytesIO(expected))
    with np.load(io.BytesIO(expected), allow_pickle=False) as z:
        assert sorted(z.files) == sorted(MIXED)
        for name, arr in MIXED.items():
            np.testing.assert_array_equal(z[name], arr)
            np.testing.assert_array_equal(loaded[name], arr)
            assert loaded[name].dtype == np.asarray(arr).dtype


def test_an_empty_archive(tmp_path):
    assert written({}) == zipfile_bytes({}) == deferred(tmp_path / "a.npz", {})
    assert read_npz(io.BytesIO(written({}))) == {}


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=12).filter(lambda s: "\0" not in s),
                       st.tuples(st.sampled_from(["f4", "f8", "i1", "u2", "?"]),
                                 st.lists(st.integers(0, 4), max_size=3)),
                       max_size=5))
def test_any_arrays_give_zipfiles_bytes(spec):
    arrays = {name: (np.arange(int(np.prod(shape))) % 7).astype(dtype).reshape(shape)
              for name, (dtype, shape) in spec.items()}
    assert written(arrays) == zipfile_bytes(arrays)


def test_zip64_end_records_match_zipfiles(monkeypatch):
    """Offsets past 2 GiB and more than 65535 members take zip64 records: shown with the limits
    lowered on both sides."""
    arrays = {"a%d" % i: np.full(40, i, np.float64) for i in range(4)}
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 500)
    monkeypatch.setattr(_npz, "_ZIP64_LIMIT", 500)
    monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 3)
    monkeypatch.setattr(_npz, "_COUNT_LIMIT", 3)
    data = written(arrays)
    assert b"PK\x06\x06" in data and data == zipfile_bytes(arrays)
    monkeypatch.undo()
    np.testing.assert_array_equal(read_npz(io.BytesIO(data))["a3"], arrays["a3"])


def test_a_deferred_file_holds_the_arrays_as_they_were_when_written(tmp_path):
    arrays = {"w": np.arange(1000, dtype=np.float32), "b": np.ones(3)}
    before = written(arrays)

    def change():
        arrays["w"][:] = -1
        arrays["b"][0] = np.nan

    assert deferred(tmp_path / "a.npz", arrays, change) == before


@pytest.mark.parametrize("second_thread", [False, True])
def test_a_deferred_file_read_in_several_pieces(tmp_path, monkeypatch, second_thread):
    """Small pieces, their digest taken here or on a thread of its own (as large ones are)."""
    monkeypatch.setattr(_npz, "_READ_PIECE", 7)
    monkeypatch.setattr(_npz, "_THREAD_PIECE", 0 if second_thread else 1 << 20)
    assert deferred(tmp_path / "a.npz", MIXED) == zipfile_bytes(MIXED)


@pytest.mark.parametrize("iov_max", [1, 3, 1024])
@pytest.mark.parametrize("short", [False, True])
def test_a_real_file_takes_the_pieces_in_few_calls_even_when_calls_write_less(
        tmp_path, monkeypatch, iov_max, short):
    """An unbuffered file gets its pieces by writev (at most _IOV_MAX a call) and its
    descriptors by pwrite; calls that write only part of what they were given (as a signal or a
    full pipe can make them) still leave zipfile's bytes."""
    calls = {"writev": 0, "pwrite": 0}
    real_writev, real_pwrite = os.writev, os.pwrite

    def writev(fd, buffers):
        calls["writev"] += 1
        assert len(buffers) <= iov_max
        if short:
            return real_writev(fd, [bytes(buffers[0])[:3]])
        return real_writev(fd, buffers)

    def pwrite(fd, data, offset):
        calls["pwrite"] += 1
        return real_pwrite(fd, bytes(data)[:2] if short else data, offset)

    monkeypatch.setattr(_npz, "_IOV_MAX", iov_max)
    monkeypatch.setattr(_npz.os, "writev", writev)
    monkeypatch.setattr(_npz.os, "pwrite", pwrite)
    want = zipfile_bytes(MIXED)
    assert deferred(tmp_path / "a.npz", MIXED) == want
    with open(tmp_path / "b.npz", "wb", buffering=0) as f:
        write_npz(f, MIXED)
    assert (tmp_path / "b.npz").read_bytes() == want
    if iov_max == 1024 and not short:
        assert calls == {"writev": 2, "pwrite": len(MIXED) + 1}


@pytest.mark.parametrize("call", ["writev", "pwrite"])
def test_a_file_that_takes_no_bytes_is_an_error_not_a_hang(tmp_path, monkeypatch, call):
    monkeypatch.setattr(_npz.os, call, lambda *args: 0)
    with pytest.raises(OSError, match="took none of the"):
        deferred(tmp_path / "a.npz", MIXED)


def test_finishing_a_file_that_lost_its_end_is_an_error(tmp_path):
    path = tmp_path / "a.npz"
    with _atomic.open_new_file(path, readable=True) as f:
        pending = write_npz_deferred(f, {"w": np.arange(100.0)})
        os.ftruncate(f.fileno(), 300)
        with pytest.raises(OSError, match="ended at byte 300"):
            pending.finish(f)


def test_names_and_dtypes_that_cannot_be_saved_are_refused():
    with pytest.raises(TypeError, match="pickle"):
        written({"o": np.array([object()])})
    with pytest.raises(ValueError, match="NUL"):
        written({"a\0b": np.ones(1)})


def test_a_real_file_gets_its_size_reserved_first(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(_atomic, "_FALLOCATE", lambda fd, mode, offset, n: asked.append(
        (mode, offset, n)) or 0)
    path = tmp_path / "a.npz"
    with open(path, "wb") as f:
        write_npz(f, MIXED)
    assert asked == [(1, 0, path.stat().st_size)]     # FALLOC_FL_KEEP_SIZE, the whole file
    written(MIXED)                                    # a stream without a descriptor: none
    assert len(asked) == 1


def _failing(code):
    def fallocate(fd, mode, offset, n):
        ctypes.set_errno(code)
        return -1
    return fallocate


def test_a_full_disk_is_known_before_any_byte_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(_atomic, "_FALLOCATE", _failing(errno.ENOSPC))
    path = tmp_path / "a.npz"
    with open(path, "wb") as f, pytest.raises(OSError) as caught:
        write_npz(f, MIXED)
    assert caught.value.errno == errno.ENOSPC and path.stat().st_size == 0


def test_a_file_system_that_cannot_reserve_still_gets_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(_atomic, "_FALLOCATE", _failing(errno.EOPNOTSUPP))
    path = tmp_path / "a.npz"
    with open(path, "wb") as f:
        write_npz(f, MIXED)
    assert path.read_bytes() == zipfile_bytes(MIXED)


def test_reserving_keeps_the_size(tmp_path):
    with open(tmp_path / "a", "wb") as f:
        _atomic.reserve(f.fileno(), 1 << 20)
        assert os.fstat(f.fileno()).st_size == 0


def test_starting_the_writeback_leaves_the_file_as_it_was(tmp_path):
    path = tmp_path / "a.npz"
    with open(path, "wb") as f:
        write_npz(f, MIXED)
        f.flush()
        _atomic.start_writeback(f.fileno())
    assert path.read_bytes() == zipfile_bytes(MIXED)


@pytest.mark.parametrize("header", [
    "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3, }",   # NumPy: a TokenError
    "{'descr': '<f4', 'fortran_order': False, 'sh\x00pe': (4, 3), '",
    "(" * 3000,
])
def test_an_npy_header_numpy_cannot_tokenize_is_a_clear_error(tmp_path, header):
    from trainer_cli.run.data import DataError, load_npy

    header = header.ljust(117) + "\n"
    npy = (b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode("latin1")
           + bytes(48))
    (tmp_path / "x.npy").write_bytes(npy)
    with pytest.raises(DataError, match=r"x.npy: cannot read as a .npy array"):
        load_npy(tmp_path / "x.npy")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("x.npy", npy)
    with pytest.raises(_npz.NpzError, match=r"member 'x.npy' has an unreadable .npy header"):
        read_npz(io.BytesIO(buf.getvalue()))
