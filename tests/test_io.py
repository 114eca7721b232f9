"""mx.io: NDArrayIter and CSVIter give the batches, pads and descriptors real MXNet 1.9.1 gives
(tests/data/mxnet_io/io_golden.json, written by make_io_golden.py there)."""
import json
import os

import numpy
import pytest

import trainer_cli as mx

GOLDEN = json.load(open(os.path.join(os.path.dirname(__file__), "data", "mxnet_io",
                                     "io_golden.json")))["cases"]


def _epochs(it, epochs):
    out = []
    for _ in range(epochs):
        epoch = []
        for b in it:
            assert isinstance(b, mx.io.DataBatch)
            epoch.append({"data": [d.asnumpy().tolist() for d in b.data],
                          "label": [lab.asnumpy().tolist() for lab in (b.label or [])],
                          "pad": b.pad, "dtypes": [str(d.dtype) for d in b.data]})
        out.append(epoch)
        it.reset()
    return out


def _descs(descs):
    return [[d.name, list(d.shape), numpy.dtype(d.dtype).name, d.layout] for d in descs]


def _data_for(case):
    data = numpy.arange(30, dtype=numpy.float32).reshape(10, 3)
    return data, numpy.arange(10, dtype=numpy.float32)


ND_CASES = [c for c in GOLDEN if c["kind"] == "ndarray"]


@pytest.mark.parametrize("case", ND_CASES, ids=["%s-shuffle%d-bs%d" % (c["handle"], c["shuffle"],
                                                                        c["batch_size"])
                                                for c in ND_CASES])
def test_ndarray_iter_matches_mxnet(case):
    data, label = _data_for(case)
    numpy.random.seed(case["seed"])
    it = mx.io.NDArrayIter(data, label, batch_size=case["batch_size"], shuffle=case["shuffle"],
                           last_batch_handle=case["handle"])
    assert _descs(it.provide_data) == case["provide_data"]
    assert _descs(it.provide_label) == case["provide_label"]
    assert _epochs(it, len(case["batches"])) == case["batches"]


def test_ndarray_iter_named_and_listed_inputs_match_mxnet():
    dict_case = next(c for c in GOLDEN if c["kind"] == "ndarray_dict")
    numpy.random.seed(dict_case["seed"])
    it = mx.io.NDArrayIter({"b": numpy.arange(5), "a": numpy.arange(10).reshape(5, 2)}, None,
                           batch_size=2, shuffle=True)
    assert _descs(it.provide_data) == dict_case["provide_data"]
    assert _epochs(it, 2) == dict_case["batches"]

    list_case = next(c for c in GOLDEN if c["kind"] == "ndarray_list")
    numpy.random.seed(list_case["seed"])
    it = mx.io.NDArrayIter([mx.nd.arange(4, dtype="int32"), numpy.ones((4, 2))],
                           [numpy.zeros(4)], batch_size=3, shuffle=True)
    assert _descs(it.provide_data) == list_case["provide_data"]
    assert _descs(it.provide_label) == list_case["provide_label"]
    assert _epochs(it, 2) == list_case["batches"]


SPARSE_CASES = [c for c in GOLDEN if c["kind"] == "ndarray_sparse"]


@pytest.mark.parametrize("case", SPARSE_CASES, ids=["%s-%s-shuffle%d" % (
    c["source"], c["handle"], c["shuffle"]) for c in SPARSE_CASES])
def test_ndarray_iter_over_sparse_arrays_matches_mxnet(case):
    dense = numpy.arange(40, dtype=numpy.float32).reshape(10, 4)
    dense[[1, 4, 5]] = 0
    dense[:, 2] = 0
    numpy.random.seed(case["seed"])
    sparse = mx.nd.array(dense).tostype("row_sparse" if case["source"] == "rsp_data" else "csr")
    data, label = ((sparse, numpy.arange(10, dtype=numpy.float32))
                   if case["source"] != "csr_label"
                   else (numpy.arange(20, dtype=numpy.float32).reshape(10, 2), sparse))
    make = lambda: mx.io.NDArrayIter(data, label, batch_size=case["batch_size"],  # noqa: E731
                                     shuffle=case["shuffle"], last_batch_handle=case["handle"])
    if "error" in case:
        with pytest.raises(NotImplementedError) as caught:
            make()
        assert str(caught.value) == case["error"]
        return
    it = make()
    assert _epochs(it, len(case["batches"])) == case["batches"]
    it.reset()
    assert [[a.stype for a in b.data + b.label] for b in it] == case["stypes"]


CSV_CASES = [c for c in GOLDEN if c["kind"] == "csv"]


@pytest.mark.parametrize("case", CSV_CASES, ids=["rows%d-bs%d-round%d-label%d" % (
    len(c["rows"]), c["batch_size"], c["round_batch"], c["with_label"]) for c in CSV_CASES])
def test_csv_iter_matches_mxnet(tmp_path, case):
    data_csv = tmp_path / "data.csv"
    data_csv.write_text("\n".join(",".join(str(v) for v in r) for r in case["rows"]) + "\n")
    kw = dict(data_csv=str(data_csv), data_shape=tuple(case["data_shape"]),
              batch_size=case["batch_size"], round_batch=case["round_batch"])
    if case["with_label"]:
        label_csv = tmp_path / "label.csv"
        label_csv.write_text("\n".join(str(10 * i) for i in range(len(case["rows"]))) + "\n")
        kw["label_csv"] = str(label_csv)
    if "dtype" in case:
        kw["dtype"] = case["dtype"]
    it = mx.io.CSVIter(**kw)
    assert _epochs(it, len(case["batches"])) == case["batches"]


def test_csv_iter_names_the_bad_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("1,2,3\n4,5\n")
    with pytest.raises(ValueError, match=r"bad\.csv, line 2: expected 3 values"):
        mx.io.CSVIter(data_csv=str(bad), data_shape=(3,), batch_size=1)
    bad.write_text("1,2,x\n")
    with pytest.raises(ValueError, match=r"bad\.csv, line 1: expected 3 comma-separated"):
        mx.io.CSVIter(data_csv=str(bad), data_shape=(3,), batch_size=1)
    with pytest.raises(ValueError, match="nothing.csv: cannot read"):
        mx.io.CSVIter(data_csv=str(tmp_path / "nothing.csv"), data_shape=(3,), batch_size=1)
    os.mkfifo(tmp_path / "fifo.csv")
    with pytest.raises(ValueError, match="not a regular file"):
        mx.io.CSVIter(data_csv=str(tmp_path / "fifo.csv"), data_shape=(3,), batch_size=1)


def test_csv_iter_refuses_hostile_lines_by_their_number(tmp_path, monkeypatch):
    bad = tmp_path / "bad.csv"
    # One line far longer than its values could be is refused before it is split into cells.
    bad.write_text("1,2\n" + "1," * 400 + "1\n")
    with pytest.raises(ValueError, match=r"bad\.csv, line 2: longer than 2 values"):
        mx.io.CSVIter(data_csv=str(bad), data_shape=(2,), batch_size=1)
    # An integer beyond the dtype: the line, not an OverflowError.
    bad.write_text("1,2\n99999999999999999999,3\n")
    for dtype in ("int32", "int64", "uint8"):
        with pytest.raises(ValueError, match=r"bad\.csv, line 2: a value outside %s" % dtype):
            mx.io.CSVIter(data_csv=str(bad), data_shape=(2,), batch_size=1, dtype=dtype)
    bad.write_text("1,-1\n")
    with pytest.raises(ValueError, match=r"line 1: a value outside uint8's range \[0, 255\]"):
        mx.io.CSVIter(data_csv=str(bad), data_shape=(2,), batch_size=1, dtype="uint8")
    # Rows gathered a block at a time come back whole and in order.
    monkeypatch.setattr("trainer_cli.io.csv_iter._BLOCK", 4)
    bad.write_text("".join("%d,%d\n" % (2 * i, 2 * i + 1) for i in range(5)))
    it = mx.io.CSVIter(data_csv=str(bad), data_shape=(2,), batch_size=5, dtype="int32")
    assert next(iter(it)).data[0].asnumpy().tolist() == [[2 * i, 2 * i + 1] for i in range(5)]


def test_ndarray_iter_feeds_a_gluon_loop():
    # The way the GAN/VAE tutorials consume it: batch.data[0], batch.label[0], reset per epoch.
    x = numpy.random.RandomState(0).rand(7, 2).astype(numpy.float32)
    it = mx.io.NDArrayIter(x, numpy.arange(7), batch_size=3, last_batch_handle="pad")
    seen = []
    for _ in range(2):
        it.reset()
        for batch in it:
            seen.append((batch.data[0].shape, batch.label[0].shape, batch.pad))
    assert seen == [((3, 2), (3,), 0), ((3, 2), (3,), 0), ((3, 2), (3,), 2)] * 2
    assert repr(mx.io.DataDesc("data", (3, 2))) == "DataDesc[data,(3, 2),<class 'numpy.float32'>,NCHW]"


def test_absent_io_iterators_say_so():
    with pytest.raises(mx.MXNetError, match="ImageDetRecordIter is MXNet's .*does not provide"):
        mx.io.ImageDetRecordIter


def test_csv_iter_reads_a_folder_of_files_in_name_order(tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "b.csv").write_text("3,4\n")
    (folder / "a.csv").write_text("1,2\n")
    it = mx.io.CSVIter(data_csv=str(folder), data_shape=(2,), batch_size=2)
    assert [b.data[0].asnumpy().tolist() for b in it] == [[[1.0, 2.0], [3.0, 4.0]]]
    labels = tmp_path / "labels.csv"
    labels.write_text("0\n")
    with pytest.raises(ValueError, match="labels.csv has 1 rows but .* has 2"):
        mx.io.CSVIter(data_csv=str(folder), data_shape=(2,), label_csv=str(labels), batch_size=2)
