"""MXNet's binary array format (``mx.nd.save`` / ``save_parameters``) in both directions.

The files under data/mxnet_files/ were written by the real MXNet 1.9.1 (make_mxnet_files.py there,
with what MXNet's own ``nd.load`` returned for each in manifest.json). Reading: every file loads
here with MXNet's names, shapes, dtypes and values, and a network loaded from MXNet's
``save_parameters`` computes MXNet's output. Writing: for the same arrays, ``nd.save`` and
``save_parameters(format='mxnet')`` write MXNet's bytes exactly, so MXNet loads them.
"""
import json
import os
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer_cli import gluon, nd
from trainer_cli.gluon import nn
from trainer_cli.gluon.block import reset_name_counters
from trainer_cli.gluon.param_file import ParamFileError
from trainer_cli.ndarray.mxnet_format import MXNetFileError, read_mxnet_file

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_files")
with open(os.path.join(HERE, "manifest.json")) as _f:
    MANIFEST = json.load(_f)
ND_FILES = sorted(k for k in MANIFEST if k.endswith(".nd"))
# What MXNet wrote in its default (legacy-shape) mode for dense arrays of dtypes numpy holds.
BYTE_EXACT = ["list_dtypes.nd", "dict.nd", "single.nd", "empty_dict.nd"]


def _path(name):
    return os.path.join(HERE, name)


def _expected(entry):
    """(shape, dtype, values) as MXNet's nd.load gave them; bfloat16 is read as float32 here and
    a 0-d array as shape (1,), as trainer_cli's arrays are at least 1-d."""
    dtype = "float32" if entry["dtype"] == "bfloat16" else entry["dtype"]
    shape = tuple(entry["shape"]) or (1,)
    return shape, np.dtype(dtype), np.array(entry["values"], dtype=dtype).reshape(shape)


def _as_nd(entry):
    shape, dtype, values = _expected(entry)
    return nd.array(values, dtype=dtype)


@pytest.fixture(autouse=True)
def _fresh_names():
    reset_name_counters()


@pytest.mark.parametrize("name", ND_FILES)
def test_nd_load_reads_what_mxnet_saved(name):
    entry = MANIFEST[name]
    loaded = nd.load(_path(name))
    if entry["kind"] == "dict" and entry["names"]:
        assert isinstance(loaded, dict) and list(loaded) == entry["names"]
        arrays = list(loaded.values())
    else:  # a list, or an empty dict, which MXNet writes as an empty list and loads as []
        assert isinstance(loaded, list)
        arrays = loaded
    assert len(arrays) == len(entry["arrays"])
    for got, want in zip(arrays, entry["arrays"]):
        shape, dtype, values = _expected(want)
        assert got.shape == shape and got.dtype == dtype, want
        np.testing.assert_array_equal(got.asnumpy(), values)


def test_the_raw_reader_keeps_0d_and_zero_size_shapes():
    arrays, names = read_mxnet_file(_path("np_shape.nd"))
    assert names is None
    assert [a.shape for a in arrays] == [(), (0, 3), (2, 2)]
    assert arrays[0] == np.float32(3.5)


@pytest.mark.parametrize("name", BYTE_EXACT)
def test_nd_save_writes_mxnets_bytes(tmp_path, name):
    entry = MANIFEST[name]
    arrays = [_as_nd(a) for a in entry["arrays"]]
    data = dict(zip(entry["names"], arrays)) if entry["names"] else arrays
    if name == "single.nd":
        data = arrays[0]  # saved as a bare NDArray, which MXNet writes as a list of one
    if name == "empty_dict.nd":
        data = {}
    out = tmp_path / name
    nd.save(str(out), data)
    assert out.read_bytes() == open(_path(name), "rb").read()


def _net(prefix="net_"):
    net = nn.HybridSequential(prefix=prefix)
    with net.name_scope():
        net.add(nn.Conv2D(3, kernel_size=3, padding=1, in_channels=2))
        net.add(nn.BatchNorm(in_channels=3))
        net.add(nn.Activation("relu"))
        net.add(nn.Dense(4, in_units=3 * 4 * 4))
    return net


def _mxnet_output(entry, dtype):
    x = nd.array(np.array(entry["input"]).reshape(entry["input_shape"]), dtype=dtype)
    return x, np.array(entry["output"]).reshape(entry["output_shape"])


@pytest.mark.parametrize("name, dtype, rtol", [("net.params", "float32", 1e-5),
                                               ("net_fp64.params", "float64", 1e-12)])
def test_load_parameters_from_mxnet_gives_mxnets_output_and_saves_its_bytes(tmp_path, name,
                                                                           dtype, rtol):
    net = _net()
    if dtype != "float32":
        net.cast(dtype)
    net.load_parameters(_path(name))
    x, expected = _mxnet_output(MANIFEST[name], dtype)
    out = net(x)
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_allclose(out.asnumpy(), expected, rtol=rtol, atol=rtol)
    mine = tmp_path / name
    net.save_parameters(str(mine), format="mxnet")
    assert mine.read_bytes() == open(_path(name), "rb").read()


def test_parameter_dict_full_names_both_ways(tmp_path):
    net = _net()
    net.collect_params().load(_path("net_full.params"))
    x, expected = _mxnet_output(MANIFEST["net_full.params"], "float32")
    np.testing.assert_allclose(net(x).asnumpy(), expected, rtol=1e-5, atol=1e-5)
    mine = tmp_path / "full.params"
    net.collect_params().save(str(mine), format="mxnet")
    assert mine.read_bytes() == open(_path("net_full.params"), "rb").read()
    # The whole-block loader also recognises this layout.
    reset_name_counters()
    again = _net()
    again.load_parameters(str(mine))
    np.testing.assert_allclose(again(x).asnumpy(), expected, rtol=1e-5, atol=1e-5)


def test_module_checkpoint_names_load_into_a_parameter_dict():
    params = gluon.ParameterDict()
    params.get("fc_weight", shape=(1, 4), dtype="float64")
    params.get("weight", shape=(3, 2, 2))
    params.get("bias", shape=(3,))
    params.load(_path("dict.nd"))  # names "weight", "bias", "arg:fc_weight"
    want = {n: a for n, a in zip(MANIFEST["dict.nd"]["names"], MANIFEST["dict.nd"]["arrays"])}
    np.testing.assert_array_equal(params["fc_weight"].data().asnumpy(),
                                  _expected(want["arg:fc_weight"])[2])
    np.testing.assert_array_equal(params["bias"].data().asnumpy(), _expected(want["bias"])[2])


def test_npz_stays_the_default_and_other_formats_are_refused(tmp_path):
    net = nn.Dense(2, in_units=3)
    net.initialize()
    net.save_parameters(str(tmp_path / "a.params"))
    assert (tmp_path / "a.params").read_bytes()[:2] == b"PK"
    with pytest.raises(ValueError, match="format"):
        net.save_parameters(str(tmp_path / "b.params"), format="pickle")
    assert not (tmp_path / "b.params").exists()


def test_a_gpu_saved_record_loads_on_the_host(tmp_path):
    data = bytearray(open(_path("single.nd"), "rb").read())
    # header 24 bytes, record: magic, stype, ndim, one int64 size, then the device type.
    offset = 24 + 4 + 4 + 4 + 8
    assert struct.unpack_from("<ii", data, offset) == (1, 0)
    struct.pack_into("<ii", data, offset, 2, 3)
    path = tmp_path / "gpu.nd"
    path.write_bytes(bytes(data))
    (arr,) = nd.load(str(path))
    np.testing.assert_array_equal(arr.asnumpy(), _expected(MANIFEST["single.nd"]["arrays"][0])[2])


def _file(records, names=()):
    body = struct.pack("<QQQ", 0x112, 0, len(records)) + b"".join(records)
    body += struct.pack("<Q", len(names))
    for name in names:
        body += struct.pack("<Q", len(name)) + name
    return body


def test_old_mxnet_records_load(tmp_path):
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    v1 = struct.pack("<IIqq", 0xF993FAC8, 2, 2, 3) + struct.pack("<iii", 1, 0, 0) + values.tobytes()
    bare = struct.pack("<III", 2, 2, 3) + struct.pack("<iii", 1, 0, 0) + values.tobytes()
    path = tmp_path / "old.nd"
    path.write_bytes(_file([v1, bare], [b"a", b"b"]))
    loaded = nd.load(str(path))
    for arr in loaded.values():
        np.testing.assert_array_equal(arr.asnumpy(), values)


def _dense_record(shape=(2,), code=0, device=(1, 0), data=None, magic=0xF993FAC9, stype=0):
    data = np.zeros(shape, np.float32).tobytes() if data is None else data
    return (struct.pack("<Iii", magic, stype, len(shape)) + struct.pack("<%dq" % len(shape), *shape)
            + struct.pack("<iii", device[0], device[1], code) + data)


HOSTILE = {
    "a huge array count": (struct.pack("<QQQ", 0x112, 0, 2 ** 63) + b"\0" * 3, "truncated"),
    "a huge size": (_file([_dense_record(shape=(2 ** 40, 2 ** 20), data=b"")]), "needs"),
    "a negative size": (_file([_dense_record(shape=(-4,), data=b"")]), "negative"),
    "too many dimensions": (_file([struct.pack("<Iii", 0xF993FAC9, 0, 10 ** 9)]), "dimensions"),
    "an unknown dtype": (_file([_dense_record(code=9)]), "dtype code 9"),
    "an unknown storage type": (_file([_dense_record(stype=7)]), "storage type 7"),
    "an unknown device": (_file([_dense_record(device=(4, 0))]), "device type 4"),
    "an unknown record header": (_file([struct.pack("<I", 0xDEADBEEF)]), "0xDEADBEEF"),
    "an empty array": (_file([struct.pack("<Iii", 0xF993FAC9, 0, 0)]), "empty"),
    "a huge name": (_file([_dense_record()])[:-8] + struct.pack("<QQ", 1, 2 ** 62), "name 0"),
    "names that do not match": (_file([_dense_record()], [b"a", b"b"]), "2 names for 1 arrays"),
    "a repeated name": (_file([_dense_record(), _dense_record()], [b"a", b"a"]), "twice"),
    "trailing bytes": (_file([_dense_record()]) + b"\0", "unexpected"),
    "a name that is not UTF-8": (_file([_dense_record()], [b"\xff"]), "UTF-8"),
}


def _sparse_file(rows, shape, stored_rows):
    data = np.ones((stored_rows, shape[1]), np.float32).tobytes()
    rec = (struct.pack("<Ii", 0xF993FAC9, 1) + struct.pack("<iqq", 2, stored_rows, shape[1])
           + struct.pack("<iqq", 2, *shape) + struct.pack("<iii", 1, 0, 0)
           + struct.pack("<iiq", 6, 1, len(rows)) + data + np.array(rows, np.int64).tobytes())
    return _file([rec], [b"w"])


HOSTILE["a row index out of range"] = (_sparse_file([0, 9], (5, 3), 2), "outside")
HOSTILE["a sparse array too big to make dense"] = (_sparse_file([], (2 ** 40, 4), 0), "expand")


def _many_sparse_records(count, shape):
    """``count`` empty row_sparse records, each just under the one-array cap when made dense:
    a few kilobytes that would ask for ``count`` GiB."""
    rec = (struct.pack("<Ii", 0xF993FAC9, 1) + struct.pack("<iqq", 2, 0, shape[1])
           + struct.pack("<iqq", 2, *shape) + struct.pack("<iii", 1, 0, 0)
           + struct.pack("<iiq", 6, 1, 0))
    return _file([rec] * count, [b"w%d" % i for i in range(count)])


HOSTILE["sparse arrays that together are too big to make dense"] = (
    _many_sparse_records(64, (2 ** 26, 4)), "together")
# nd.load keeps sparse records sparse (nothing table-sized is allocated), so only the Gluon
# loaders, which make them dense, refuse that file.
_DENSE_LOADERS_ONLY = {"sparse arrays that together are too big to make dense"}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_files_are_clear_errors(tmp_path, case):
    content, words = HOSTILE[case]
    path = tmp_path / "bad.params"
    path.write_bytes(content)
    if case in _DENSE_LOADERS_ONLY:
        loaded = nd.load(str(path))
        assert all(a.stype == "row_sparse" and a.data.shape[0] == 0 for a in loaded.values())
    else:
        with pytest.raises(MXNetFileError) as info:
            nd.load(str(path))
        assert str(path) in str(info.value) and words in str(info.value)
    with pytest.raises(ParamFileError) as info:
        nn.Dense(2, in_units=1).load_parameters(str(path))
    assert str(path) in str(info.value)


@pytest.mark.parametrize("name", ["net.params", "sparse.nd", "np_shape.nd"])
def test_every_truncation_is_a_clear_error(tmp_path, name):
    data = open(_path(name), "rb").read()
    path = tmp_path / name
    for cut in range(len(data)):
        path.write_bytes(data[:cut])
        with pytest.raises(MXNetFileError):
            read_mxnet_file(str(path))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1597), st.integers(1, 255)), min_size=1, max_size=4))
def test_damaged_files_load_or_fail_clearly(tmp_path_factory, flips):
    data = bytearray(open(_path("net_full.params"), "rb").read())
    for where, mask in flips:
        data[where % len(data)] ^= mask
    path = tmp_path_factory.mktemp("fuzz") / "damaged.params"
    path.write_bytes(bytes(data))
    try:
        read_mxnet_file(str(path))
    except MXNetFileError as exc:
        assert str(path) in str(exc)


@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_load_refuses_a_fifo_or_a_device_without_blocking(tmp_path, kind):
    import os
    import signal

    path = tmp_path / "x.params"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        os.symlink("/dev/zero", path)

    def expired(signum, frame):
        raise AssertionError("nd.load blocked on %s" % kind)

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(10)
    try:
        with pytest.raises(MXNetFileError, match="not a regular file"):
            nd.load(str(path))
        with pytest.raises(MXNetFileError, match="not a regular file"):
            read_mxnet_file(str(path))
        with pytest.raises(ParamFileError, match="x.params"):
            nn.Dense(2, in_units=1).load_parameters(str(path))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
