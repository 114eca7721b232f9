"""What ``test_utils`` gives, written once against MXNet's API (``record(mx)``): seeded random
shapes and arrays (MXNet's draw from ``numpy.random``), the tolerance tables, the reductions,
and ``assert_almost_equal``'s failure messages and printed mismatch lists.

    /tmp/mxvenv/bin/python tests/data/mxnet_test_utils/make_records.py

records ``records.json``; tests/test_test_utils.py replays ``record`` with trainer_cli."""
import contextlib
import io

import numpy as np


def record(mx):
    tu = mx.test_utils
    out = {}
    np.random.seed(3)
    out["shapes"] = [list(map(int, tu.rand_shape_2d())), list(map(int, tu.rand_shape_3d(4, 5, 6))),
                     list(map(int, tu.rand_shape_nd(4, 7))),
                     list(map(int, tu.rand_shape_2d(2, 2, allow_zero_size=True)))]
    np.random.seed(4)
    arr, (_, idx) = tu.rand_sparse_ndarray((6, 3), "row_sparse", density=0.5)
    out["row_sparse"] = {"indices": idx.tolist(), "values": arr.asnumpy().tolist(),
                         "stype": arr.stype}
    np.random.seed(5)
    out["powerlaw"] = tu.rand_ndarray((6, 8), "csr", density=0.5,
                                      distribution="powerlaw").asnumpy().tolist()
    np.random.seed(6)
    out["dense"] = tu.rand_ndarray((2, 3)).asnumpy().tolist()
    out["arrays"] = [a.tolist() for a in tu.random_arrays((2,), (1, 2))]
    out["rtols"] = {str(k): v for k, v in tu.default_rtols().items()}
    out["atols"] = {str(k): v for k, v in tu.default_atols().items()}
    out["tols16_32"] = list(tu.get_tols(np.ones(2, np.float16), np.ones(2, np.float32), None, None))
    out["tols_dict"] = list(tu.get_tols(np.ones(2), np.ones(2), {np.dtype(np.float64): 0.5}, None))
    out["np_reduce"] = tu.np_reduce(np.arange(24.).reshape(2, 3, 4), (0, 2), True, np.sum).tolist()
    out["collapse"] = tu.collapse_sum_like(np.arange(24.).reshape(2, 3, 4), (3, 1)).tolist()
    out["assign_each"] = tu.assign_each(np.arange(6.).reshape(2, 3), lambda x: x * x + 1).tolist()
    out["assign_each2"] = tu.assign_each2(np.arange(6.).reshape(2, 3), np.ones((2, 3)),
                                          lambda x, y: x - y).tolist()
    failures = []
    for a, b, kw in [([1., 2., 3.], [1.1, 2., 3.3], {}),
                     ([[1., 2.], [3., 4.]], [[1., 2.5], [3., 4.]], {"rtol": 1e-3, "atol": 0}),
                     ([1., 2., 3., 4.], [2., 3., 4., 5.], {"mismatches": (2, 3)}),
                     ([1., 2.], [1.00001, 2.], {})]:
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                tu.assert_almost_equal(mx.nd.array(a), mx.nd.array(b), names=("p", "q"), **kw)
            failures.append(None)
        except AssertionError as exc:
            failures.append({"message": str(exc), "printed": printed.getvalue()})
    out["failures"] = failures
    return out
