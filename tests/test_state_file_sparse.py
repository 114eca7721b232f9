"""Optimizer-state files with row_sparse states: stored as their parts (row ids and values, never
densified, never pickle), rebuilt exactly; files without sparse states stay version 1."""
from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

from trainer_cli import cpu, nd, optimizer
from trainer_cli.optimizer.state_file import StateFileError, dumps_states, loads_states


def rsp(rows, values, shape):
    return nd.sparse.row_sparse_array((np.asarray(values, dtype=np.float32), rows), shape=shape)


def npz_entries(data):
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        header = json.loads(np.load(z.open("__header__.npy")).tobytes())
        shapes = {n[:-4]: np.load(z.open(n)).shape for n in z.namelist()}
    return header, shapes


def test_row_sparse_states_round_trip_as_parts():
    big = (1_000_000, 4)                      # a table-sized dense copy would be 16 MB
    mom = rsp([3, 999_999], [[1, 2, 3, 4], [5, 6, 7, 8]], big)
    mean, var = rsp([0], [[1, 1, 1, 1]], big), rsp([], np.zeros((0, 4)), big)
    opt = optimizer.create("sgd", momentum=0.9)
    data = dumps_states({0: {0: mom, 1: (mean, var), 2: nd.ones((2,)), 3: None}}, opt)
    assert len(data) < 100_000
    header, shapes = npz_entries(data)
    assert header["version"] == 2
    assert max(int(np.prod(s)) for n, s in shapes.items() if n != "__header__") < 100
    by_device, loaded_opt = loads_states(data)
    states = by_device[0]
    assert states[0].stype == "row_sparse" and states[0].shape == big
    assert states[0].indices.asnumpy().tolist() == [3, 999_999]
    assert states[0].data.asnumpy().tolist() == [[1, 2, 3, 4], [5, 6, 7, 8]]
    assert states[0].context == cpu(0)
    assert isinstance(states[1], tuple) and states[1][1].indices.asnumpy().tolist() == []
    assert states[1][1].data.shape == (0, 4)
    assert states[2].stype == "default" and states[3] is None
    assert loaded_opt.momentum == 0.9


def test_files_without_sparse_states_stay_version_1():
    header, _ = npz_entries(dumps_states({0: {0: nd.ones((3,))}}, None))
    assert header["version"] == 1
    by_device, _ = loads_states(dumps_states({0: {0: nd.ones((3,))}}, None))
    assert by_device[0][0].asnumpy().tolist() == [1, 1, 1]


def _rewrite_state(data, edit):
    """``data`` with the header's first state layout changed by ``edit`` (arrays kept)."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for name in src.namelist():
            body = src.read(name)
            if name == "__header__.npy":
                header = json.loads(np.load(io.BytesIO(body)).tobytes())
                edit(header["devices"][0]["states"][0]["state"]["row_sparse"])
                buf = io.BytesIO()
                np.save(buf, np.frombuffer(json.dumps(header).encode(), dtype=np.uint8))
                body = buf.getvalue()
            dst.writestr(name, body)
    return out.getvalue()


@pytest.mark.parametrize("edit, message", [
    (lambda p: p.update(shape=[2, 4]), "within"),             # row 3 outside 2 rows
    (lambda p: p.update(shape=[10, 3]), "data of shape"),
    (lambda p: p.update(indices=p["data"]), "dtype"),
    (lambda p: p.update(data="a99"), "missing"),
    (lambda p: p.update(shape=[]), "shape"),
])
def test_damaged_row_sparse_state_is_a_clear_error(edit, message):
    data = dumps_states({0: {0: rsp([1, 3], np.ones((2, 4)), (10, 4))}}, None)
    with pytest.raises(StateFileError, match=message):
        loads_states(_rewrite_state(data, edit))


def test_unsorted_row_ids_in_a_file_are_refused():
    data = dumps_states({0: {0: rsp([1, 3], np.ones((2, 4)), (10, 4))}}, None)
    # Swap the two stored row ids in place: same dtype and shape, now unsorted.
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for name in src.namelist():
            body = src.read(name)
            arr = np.load(io.BytesIO(body))
            if arr.dtype == np.int64 and arr.tolist() == [1, 3]:
                buf = io.BytesIO()
                np.save(buf, np.array([3, 1], dtype=np.int64))
                body = buf.getvalue()
            dst.writestr(name, body)
    with pytest.raises(StateFileError, match="sorted"):
        loads_states(out.getvalue())
