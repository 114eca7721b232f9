"""``mx.io.LibSVMIter`` as MXNet 1.9.1 runs it, written once against MXNet's API
(``record(mx, folder)``): three passes of batches over a small file (csr data, labels, pad:
the last batch wraps to the start and the next pass starts after it), a batch larger than the
file, labels from a second LibSVM file, and the lines of every part for 2 to 5 parts (dmlc-core
cuts the bytes, and a line starting on a boundary goes to the part before).

    /tmp/mxvenv/bin/python tests/data/mxnet_io/make_recording.py libsvm_cases libsvm.json

writes ``libsvm.json`` beside this file; tests/test_io_libsvm.py runs ``record`` on
trainer_cli and compares.
"""
import os

DATA = "1 0:1.5 3:2\n0 1:0.5\n1 2:3 4:-1\n0\n1 0:2 1:2 2:2\n0.5 4:7\n1 3:1e-3\n"
EVEN = "".join("%d %d:1\n" % (i + 1, i % 4) for i in range(8))     # lines of 6 bytes


def write_files(folder):
    paths = {}
    for name, text in (("data", DATA), ("even", EVEN)):
        paths[name] = os.path.join(folder, name + ".libsvm")
        with open(paths[name], "w") as f:
            f.write(text)
    return paths


def _batch(b):
    return {"data": b.data[0].asnumpy().tolist(), "stypes": [b.data[0].stype, b.label[0].stype],
            "label": b.label[0].asnumpy().tolist(), "pad": b.pad,
            "dtypes": [str(b.data[0].dtype), str(b.data[0].indices.dtype)]}


def record(mx, folder):
    paths = write_files(folder)
    out = {}
    it = mx.io.LibSVMIter(data_libsvm=paths["data"], data_shape=(5,), batch_size=3)
    out["provides"] = [[d.name, list(d.shape)] for d in it.provide_data + it.provide_label]
    passes = []
    for _ in range(3):
        passes.append([_batch(b) for b in it])
        it.reset()
    out["passes"] = passes
    it = mx.io.LibSVMIter(data_libsvm=paths["data"], data_shape=(5,), batch_size=10)
    out["larger_batch"] = [_batch(b) for b in it]
    it = mx.io.LibSVMIter(data_libsvm=paths["data"], data_shape=(5,), batch_size=2,
                          label_libsvm=paths["even"], label_shape=(4,))
    out["label_file"] = [_batch(b) for b in it]
    out["label_file_provides"] = [[d.name, list(d.shape)] for d in it.provide_label]
    for parts in (2, 3, 4, 5):
        for name in ("data", "even"):
            out["parts/%s/%d" % (name, parts)] = [
                [b.label[0].asnumpy().tolist()[0] for b in mx.io.LibSVMIter(
                    data_libsvm=paths[name], data_shape=(5,), batch_size=1, num_parts=parts,
                    part_index=part)] for part in range(parts)]
    return out
