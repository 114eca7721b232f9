"""read_regular: a file's bytes read to its size, bounded by the limit also when it grows."""
import os

import pytest

from trainer_cli import _bounded


def test_reads_whole_file(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(range(256)) * 3)
    assert _bounded.read_regular(str(path), 1000) == bytes(range(256)) * 3


def _stat_smaller(monkeypatch, size):
    """os.fstat reporting ``size`` bytes: the file grew after it was measured."""
    real = os.fstat

    class Shrunk:
        def __init__(self, st):
            self._st = st
            self.st_size = size

        def __getattr__(self, name):
            return getattr(self._st, name)

    monkeypatch.setattr(_bounded.os, "fstat", lambda fd: Shrunk(real(fd)))


def test_file_that_grew_is_read_whole_within_the_limit(tmp_path, monkeypatch):
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 100)
    _stat_smaller(monkeypatch, 10)
    assert _bounded.read_regular(str(path), 1000) == b"x" * 100


def test_file_that_grew_past_the_limit_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 100)
    _stat_smaller(monkeypatch, 10)
    with pytest.raises(_bounded.FileRefused):
        _bounded.read_regular(str(path), 50)


def test_file_over_the_limit_is_refused(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 100)
    with pytest.raises(_bounded.FileRefused):
        _bounded.read_regular(str(path), 99)
