"""``nd.histogram`` and ``nd.khatri_rao`` as MXNet 1.9.1 gives them, written once against its
API (``record(mx)``): equal bins over ranges (values on the edges and outside among them),
given edges, NumPy's bins without a range, float64 data; khatri_rao of three matrices and of
one. ``make_histogram_records.py`` records ``histogram.npz`` with the real MXNet."""
import warnings

import numpy as np


def record(mx):
    nd = mx.nd
    rng = np.random.RandomState(0)
    x = nd.array(np.concatenate([rng.randn(500) * 2, [0, 4.0, -4.0, 1.0, 3.0, 0.5 + 1e-7]])
                 .astype(np.float32))
    out = {}
    for i, (bins, span) in enumerate([(4, (0, 4)), (7, (-3, 3.3)), (10, (-4, 4)),
                                      (3, (-1, 2.5))]):
        counts, edges = nd.histogram(x, bins=bins, range=span)
        out["counts%d" % i], out["edges%d" % i] = counts.asnumpy(), edges.asnumpy()
    counts, edges = nd.histogram(x, bins=nd.array([-3, -1, 0, 0.5, 2.5, 4]))
    out["counts_given"], out["edges_given"] = counts.asnumpy(), edges.asnumpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # "range is not specified, using numpy's"
        counts, edges = nd.histogram(x, bins=6)
    out["counts_numpy"], out["edges_numpy"] = counts.asnumpy(), edges.asnumpy()
    xd = nd.array(rng.randn(300) * 3, dtype="float64")
    counts, edges = nd.histogram(xd, bins=5, range=(-2, 7))
    out["counts_f64"], out["edges_f64"] = counts.asnumpy(), edges.asnumpy()
    a, b, c = (nd.array(rng.randn(n, 4)) for n in (3, 2, 5))
    out["khatri_rao"] = nd.khatri_rao(a, b, c).asnumpy()
    out["khatri_rao_one"] = nd.khatri_rao(a).asnumpy()
    return out
