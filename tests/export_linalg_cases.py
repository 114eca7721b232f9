"""A network whose hybrid_forward calls MXNet's linear-algebra operators (``F.linalg.*``),
shared by its golden-data generator (run with real MXNet 1.9.1,
tests/data/hybrid_export/linalg/make_linalg_golden.py) and tests/test_hybrid_export_linalg.py.
Built from the ``mx`` module it is given (``mxnet`` or ``trainer_cli``), with a fixed prefix so
that both name it alike."""
import numpy as np


def linalg_net(mx):
    gluon = mx.gluon

    class LinalgNet(gluon.HybridBlock):
        """A Gaussian's log-density as a covariance learner writes it: a Cholesky factor of a
        positive-definite matrix, a triangular solve, log-determinants, and a few more."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.proj = gluon.nn.Dense(4, in_units=4, use_bias=False)

        def hybrid_forward(self, F, x, a):
            cov = F.linalg.syrk(a, alpha=0.5) + F.linalg.makediag(F.ones_like(
                F.linalg.extractdiag(a)))
            chol = F.linalg.potrf(cov)
            z = F.linalg.trsm(chol, F.transpose(self.proj(x)), rightside=False, lower=True)
            quad = F.sum(F.square(z), axis=0)
            logdet = 2 * F.linalg.sumlogdiag(chol)
            sign, logabs = F.linalg.slogdet(cov)
            prod = F.linalg.gemm2(chol, chol, transpose_b=True, alpha=2.0)
            return F.broadcast_add(quad, logdet), sign * logabs, F.linalg.extracttrian(prod), F.linalg.inverse(cov)

    return LinalgNet(prefix="linalgnet_")


def inputs():
    rng = np.random.RandomState(3)
    return (rng.uniform(-1, 1, size=(5, 4)).astype(np.float32),
            rng.uniform(-1, 1, size=(4, 4)).astype(np.float32))


def set_weights(net, nd):
    rng = np.random.RandomState(7)
    for name, param in sorted(net.collect_params().items()):
        param.set_data(nd.array(rng.uniform(-1, 1, size=param.shape).astype(np.float32)))
