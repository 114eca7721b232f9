"""row_sparse and csr arrays in MXNet's binary ``nd.save`` format, both ways: files MXNet 1.9.1
wrote (``tests/data/sparse/gen_sparse_files.py``) load with their storage type, and ``nd.save``
writes the same bytes MXNet does (so MXNet loads what this writes)."""
import os
import sys

import numpy as np
import pytest

from trainer_cli import nd
from trainer_cli.ndarray.mxnet_format import MXNetFileError

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "sparse")
sys.path.insert(0, DATA)
from gen_sparse_files import arrays as sparse_file_arrays  # noqa: E402


def _same(a, b):
    assert a.stype == b.stype and tuple(a.shape) == tuple(b.shape) and a.dtype == b.dtype
    assert a.asnumpy().tolist() == b.asnumpy().tolist()
    if a.stype != "default":
        assert a.indices.asnumpy().tolist() == b.indices.asnumpy().tolist()
        assert a.data.asnumpy().tolist() == b.data.asnumpy().tolist()
    if a.stype == "csr":
        assert a.indptr.asnumpy().tolist() == b.indptr.asnumpy().tolist()


def test_mxnet_written_sparse_arrays_load_with_their_storage():
    want = sparse_file_arrays(nd)
    got = nd.load(os.path.join(DATA, "mxnet_sparse_dict.params"))
    assert sorted(got) == sorted(want)
    for name in want:
        _same(got[name], want[name])
    listed = nd.load(os.path.join(DATA, "mxnet_sparse_list.params"))
    _same(listed[0], want["csr"])
    _same(listed[1], want["rsp"])


@pytest.mark.parametrize("fname,as_dict", [("mxnet_sparse_dict.params", True),
                                           ("mxnet_sparse_list.params", False)])
def test_nd_save_writes_mxnets_bytes(tmp_path, fname, as_dict):
    a = sparse_file_arrays(nd)
    data = a if as_dict else [a["csr"], a["rsp"]]
    out = tmp_path / fname
    nd.save(str(out), data)
    with open(os.path.join(DATA, fname), "rb") as f:
        assert out.read_bytes() == f.read()


def test_round_trip_of_sparse_arrays(tmp_path):
    a = sparse_file_arrays(nd)
    nd.save(str(tmp_path / "x.params"), a)
    back = nd.load(str(tmp_path / "x.params"))
    for name in a:
        _same(back[name], a[name])


def test_unsorted_row_ids_in_a_file_are_refused(tmp_path):
    raw = bytearray(open(os.path.join(DATA, "mxnet_sparse_list.params"), "rb").read())
    # The row_sparse record's row ids are the file's last 3 int64 before the (empty) name
    # count: rows 0, 2, 3 -> 0, 3, 2.
    tail = len(raw) - 8 - 3 * 8
    rows = np.frombuffer(bytes(raw[tail:tail + 24]), "<i8")
    assert rows.tolist() == [0, 2, 3]
    raw[tail + 8:tail + 24] = np.array([3, 2], "<i8").tobytes()
    path = tmp_path / "bad.params"
    path.write_bytes(bytes(raw))
    with pytest.raises(MXNetFileError, match="sorted"):
        nd.load(str(path))
