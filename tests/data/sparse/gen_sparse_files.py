"""Write MXNet 1.9.1 array files holding row_sparse and csr arrays, for
``tests/test_sparse_files.py`` (run with MXNet installed, from the repository root)::

    python tests/data/sparse/gen_sparse_files.py

``mxnet_sparse_dict.params``: a dict of a row_sparse, a csr, a dense, an empty row_sparse, an
empty csr and float64 / float16 sparse arrays; ``mxnet_sparse_list.params``: a list of a csr and
a row_sparse array. The arrays are rebuilt by ``sparse_file_arrays`` in the test.
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def arrays(nd):
    d = np.arange(20, dtype=np.float32).reshape(4, 5) / 4
    d[1] = 0
    d[2, 3] = 0
    rsp = nd.array(d).tostype("row_sparse")
    csr = nd.array(d).tostype("csr")
    return {
        "rsp": rsp, "csr": csr, "dense": nd.array(d),
        "rsp_empty": nd.sparse.zeros("row_sparse", (3, 2)),
        "csr_empty": nd.sparse.zeros("csr", (2, 3)),
        "rsp_f64": nd.array(d, dtype="float64").tostype("row_sparse"),
        "csr_f16": nd.array(d, dtype="float16").tostype("csr"),
        "rsp_3d": nd.array(np.arange(24, dtype=np.float32).reshape(4, 3, 2) * (np.arange(4) % 2).reshape(4, 1, 1)).tostype("row_sparse"),
    }


if __name__ == "__main__":
    import mxnet as mx

    a = arrays(mx.nd)
    mx.nd.save(os.path.join(HERE, "mxnet_sparse_dict.params"), a)
    mx.nd.save(os.path.join(HERE, "mxnet_sparse_list.params"), [a["csr"], a["rsp"]])
