"""Batches real MXNet 1.9.1's mx.io.NDArrayIter and CSVIter give, for tests/test_io.py.

Run in a venv with MXNet 1.9.1:  python make_io_golden.py  (writes io_golden.json beside it).
"""
import json
import os
import tempfile

import numpy as np
import mxnet as mx

HERE = os.path.dirname(os.path.abspath(__file__))


def batches(it, epochs):
    out = []
    for _ in range(epochs):
        epoch = []
        for b in it:
            epoch.append({"data": [d.asnumpy().tolist() for d in b.data],
                          "label": [l.asnumpy().tolist() for l in (b.label or [])],
                          "pad": b.pad,
                          "dtypes": [str(d.dtype) for d in b.data]})
        out.append(epoch)
        it.reset()
    return out


def nd_cases():
    cases = []
    data = np.arange(30, dtype=np.float32).reshape(10, 3)
    label = np.arange(10, dtype=np.float32)
    for handle in ("pad", "discard", "roll_over"):
        for shuffle in (False, True):
            for bs in (3, 4, 10, 13):
                np.random.seed(7)
                it = mx.io.NDArrayIter(data, label, batch_size=bs, shuffle=shuffle,
                                       last_batch_handle=handle)
                cases.append({"kind": "ndarray", "handle": handle, "shuffle": shuffle,
                              "batch_size": bs, "seed": 7,
                              "provide_data": [[d.name, list(d.shape), np.dtype(d.dtype).name,
                                                d.layout] for d in it.provide_data],
                              "provide_label": [[d.name, list(d.shape), np.dtype(d.dtype).name,
                                                 d.layout] for d in it.provide_label],
                              "batches": batches(it, 3)})
    # several named inputs (sorted by name), no label, int data
    np.random.seed(3)
    it = mx.io.NDArrayIter({"b": np.arange(5), "a": np.arange(10).reshape(5, 2)}, None,
                           batch_size=2, shuffle=True)
    cases.append({"kind": "ndarray_dict", "seed": 3,
                  "provide_data": [[d.name, list(d.shape), np.dtype(d.dtype).name, d.layout]
                                   for d in it.provide_data],
                  "batches": batches(it, 2)})
    np.random.seed(0)
    it = mx.io.NDArrayIter([mx.nd.arange(4, dtype="int32"), np.ones((4, 2))],
                           [np.zeros(4)], batch_size=3, shuffle=True)
    cases.append({"kind": "ndarray_list", "seed": 0,
                  "provide_data": [[d.name, list(d.shape), np.dtype(d.dtype).name, d.layout]
                                   for d in it.provide_data],
                  "provide_label": [[d.name, list(d.shape), np.dtype(d.dtype).name, d.layout]
                                    for d in it.provide_label],
                  "batches": batches(it, 2)})
    return cases


def sparse_cases():
    """NDArrayIter over csr and row_sparse arrays (MXNet needs SciPy to shuffle a csr one):
    the batches, their storage types, and the error of a csr array without 'discard'."""
    dense = np.arange(40, dtype=np.float32).reshape(10, 4)
    dense[[1, 4, 5]] = 0
    dense[:, 2] = 0
    cases = []
    for source in ("csr_data", "csr_label", "rsp_data"):
        for handle in ("discard", "pad", "roll_over"):
            for shuffle in (False, True):
                np.random.seed(11)
                stype = "row_sparse" if source == "rsp_data" else "csr"
                sparse = mx.nd.array(dense).tostype(stype)
                data, label = ((sparse, np.arange(10, dtype=np.float32)) if source != "csr_label"
                               else (np.arange(20, dtype=np.float32).reshape(10, 2), sparse))
                case = {"kind": "ndarray_sparse", "source": source, "handle": handle,
                        "shuffle": shuffle, "batch_size": 3, "seed": 11}
                try:
                    it = mx.io.NDArrayIter(data, label, batch_size=3, shuffle=shuffle,
                                           last_batch_handle=handle)
                except NotImplementedError as exc:
                    case["error"] = str(exc)
                    cases.append(case)
                    continue
                case["batches"] = batches(it, 2)
                it.reset()
                case["stypes"] = [[a.stype for a in b.data + b.label] for b in it]
                cases.append(case)
    return cases


def csv_cases():
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        rows = [[1, 2, 3], [2, 3, 4], [3, 4, 5], [4, 5, 6], [5, 6, 7]]
        data_csv = os.path.join(tmp, "data.csv")
        label_csv = os.path.join(tmp, "label.csv")
        with open(data_csv, "w") as f:
            f.write("\n".join(",".join(str(v) for v in r) for r in rows) + "\n")
        with open(label_csv, "w") as f:
            f.write("\n".join(str(10 * i) for i in range(len(rows))) + "\n")
        for n_rows in (4, 5):
            with open(data_csv, "w") as f:
                f.write("\n".join(",".join(str(v) for v in r) for r in rows[:n_rows]) + "\n")
            with open(label_csv, "w") as f:
                f.write("\n".join(str(10 * i) for i in range(n_rows)) + "\n")
            for bs in (2, 3):
                for round_batch in (True, False):
                    for with_label in (True, False):
                        kw = dict(data_csv=data_csv, data_shape=(3,), batch_size=bs,
                                  round_batch=round_batch)
                        if with_label:
                            kw["label_csv"] = label_csv
                        it = mx.io.CSVIter(**kw)
                        cases.append({"kind": "csv", "rows": rows[:n_rows], "batch_size": bs,
                                      "round_batch": round_batch, "with_label": with_label,
                                      "data_shape": [3],
                                      "batches": batches(it, 3)})
        with open(data_csv, "w") as f:
            f.write("1,2,3,4\n5,6,7,8\n9,10,11,12\n")
        it = mx.io.CSVIter(data_csv=data_csv, data_shape=(2, 2), batch_size=2, dtype="int32")
        cases.append({"kind": "csv", "rows": [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]],
                      "batch_size": 2, "round_batch": True, "with_label": False,
                      "data_shape": [2, 2], "dtype": "int32", "batches": batches(it, 2)})
    return cases


if __name__ == "__main__":
    out = {"mxnet": mx.__version__, "numpy": np.__version__, "cases": nd_cases() + sparse_cases() + csv_cases()}
    with open(os.path.join(HERE, "io_golden.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
    print(len(out["cases"]), "cases")
