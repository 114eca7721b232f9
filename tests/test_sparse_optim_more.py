"""Optimizer cases around sparse weights, against MXNet 1.9.1 (generator scripts beside the data
in tests/data/sparse)."""
import json
import os
import sys

import numpy as np
import pytest

from trainer_cli import nd, optimizer

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "sparse")
sys.path.insert(0, DATA)
import gen_fp16_rsp  # noqa: E402

with open(os.path.join(DATA, "mxnet_fp16_rsp.json")) as _f:
    FP16 = json.load(_f)


@pytest.mark.parametrize("case", FP16, ids=lambda c: "%s-%s" % (c["optimizer"], c["params"]))
def test_float16_row_sparse_weight_with_multi_precision_matches_mxnet(case):
    w = gen_fp16_rsp.run(nd, optimizer, case["optimizer"], case["params"])
    assert w.stype == case["stype"] and np.dtype(w.dtype).name == case["dtype"]
    assert w.asnumpy().astype(float).tolist() == case["weight"]


import gen_csr_weight  # noqa: E402

with open(os.path.join(DATA, "mxnet_csr_weight.json")) as _f:
    CSR = json.load(_f)


@pytest.mark.parametrize("case", CSR, ids=lambda c: "%s-%s" % (c["optimizer"], c["params"]))
def test_csr_weight_with_csr_gradient_matches_mxnets_fallback(case):
    w = gen_csr_weight.run(nd, optimizer, case["optimizer"], case["params"])
    if "error" in case:
        # MXNet's AdaGrad refuses a csr gradient; here it takes the dense fallback like the
        # others (docs/compat.md): the dense AdaGrad update.
        dense = gen_csr_weight.run(nd, optimizer, case["optimizer"], case["params"], "default")
        assert w.stype == "csr" and w.asnumpy().tolist() == dense.asnumpy().tolist()
        return
    assert w.stype == case["stype"]
    np.testing.assert_allclose(w.asnumpy(), case["weight"], rtol=1e-6, atol=1e-7)
