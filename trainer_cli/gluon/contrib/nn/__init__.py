"""``gluon.contrib.nn``: ``SparseEmbedding``, an embedding whose table lives in the Trainer's
kvstore as a row_sparse weight; ``Concurrent``/``HybridConcurrent``, children applied to the same
input with their outputs concatenated (the model zoo's Inception, DenseNet and SqueezeNet blocks);
``Identity``; ``PixelShuffle1D/2D/3D`` (sub-pixel upsampling); ``SyncBatchNorm`` on one
device (MXNet's arithmetic; statistics synchronized across devices are not available)."""
from .... import ndarray as _nd
from ....ndarray import Embedding
from ...block import Block, HybridBlock, HybridSequential, Sequential
from ...nn import Identity
from ....symbol import Symbol
from .sync_batch_norm import SyncBatchNorm

__all__ = ["SparseEmbedding", "Concurrent", "HybridConcurrent", "Identity", "PixelShuffle1D",
           "PixelShuffle2D", "PixelShuffle3D", "SyncBatchNorm"]


def _factors(factor, count):
    factors = (int(factor),) * count if isinstance(factor, int) else tuple(int(f) for f in factor)
    if len(factors) != count:
        raise ValueError("PixelShuffle%dD: %d factors, got %r" % (count, count, factor))
    return factors


class PixelShuffle1D(HybridBlock):
    """``(N, C*f, W)`` to ``(N, C, W*f)``: output column ``w*f + i`` is input channel
    ``c*f + i`` at ``w``."""

    def __init__(self, factor):
        super().__init__()
        self._factor = _factors(factor, 1)[0]

    def hybrid_forward(self, F, x):
        f = self._factor
        x = F.reshape(x, (0, -4, -1, f, 0))           # (N, C, f, W)
        return F.reshape(F.transpose(x, (0, 1, 3, 2)), (0, 0, -3))

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, self._factor)


class PixelShuffle2D(HybridBlock):
    """``(N, C*f1*f2, H, W)`` to ``(N, C, H*f1, W*f2)``: output pixel ``(h*f1 + i, w*f2 + j)``
    is input channel ``(c*f1 + i)*f2 + j`` at ``(h, w)``."""

    def __init__(self, factor):
        super().__init__()
        self._factors = _factors(factor, 2)

    def hybrid_forward(self, F, x):
        f1, f2 = self._factors
        x = F.reshape(x, (0, -4, -1, f1 * f2, 0, 0))   # (N, C, f1*f2, H, W)
        x = F.reshape(x, (0, 0, -4, f1, f2, 0, 0))     # (N, C, f1, f2, H, W)
        x = F.transpose(x, (0, 1, 4, 2, 5, 3))         # (N, C, H, f1, W, f2)
        return F.reshape(x, (0, 0, -3, -3))

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, self._factors)


class PixelShuffle3D(HybridBlock):
    """``(N, C*f1*f2*f3, D, H, W)`` to ``(N, C, D*f1, H*f2, W*f3)``, as ``PixelShuffle2D``
    with a third axis."""

    def __init__(self, factor):
        super().__init__()
        self._factors = _factors(factor, 3)

    def hybrid_forward(self, F, x):
        f1, f2, f3 = self._factors
        x = F.reshape(x, (0, -4, -1, f1 * f2 * f3, 0, 0, 0))    # (N, C, f1*f2*f3, D, H, W)
        x = F.reshape(x, (0, 0, -4, f1, f2 * f3, 0, 0, 0))      # (N, C, f1, f2*f3, D, H, W)
        x = F.reshape(x, (0, 0, 0, -4, f2, f3, 0, 0, 0))        # (N, C, f1, f2, f3, D, H, W)
        x = F.transpose(x, (0, 1, 5, 2, 6, 3, 7, 4))            # (N, C, D, f1, H, f2, W, f3)
        return F.reshape(x, (0, 0, -3, -3, -3))

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, self._factors)


class Concurrent(Sequential):
    """Every child gets the same input; their outputs are concatenated along ``axis``."""

    def __init__(self, axis=-1, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self.axis = axis

    def forward(self, x):
        return _nd.concat(*[block(x) for block in self._children.values()], dim=self.axis)


class HybridConcurrent(HybridSequential):
    """The hybrid form of :class:`Concurrent`."""

    def __init__(self, axis=-1, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self.axis = axis

    def forward(self, x):
        if isinstance(x, Symbol):   # a graph being recorded: MXNet's concat node in this scope
            return HybridBlock.forward(self, x)
        return _nd.concat(*[block(x) for block in self._children.values()], dim=self.axis)

    def hybrid_forward(self, F, x):
        return F.concat(*[block(x) for block in self._children.values()], dim=self.axis)


class SparseEmbedding(Block):
    """Map integer indices (given as floats) to rows of a ``(input_dim, output_dim)`` table held
    as a row_sparse weight: each forward pulls only the rows its batch looks up
    (``weight.row_sparse_data``), and the gradient is row_sparse. The table is updated on the
    Trainer's kvstore, so a Trainer must exist before the first forward (MXNet 1.9's block)."""

    def __init__(self, input_dim, output_dim, dtype="float32", weight_initializer=None, **kwargs):
        super().__init__(**kwargs)
        self._kwargs = {"input_dim": input_dim, "output_dim": output_dim, "dtype": dtype,
                        "sparse_grad": True}
        self.weight = self.params.get("weight", shape=(input_dim, output_dim),
                                      init=weight_initializer, dtype=dtype,
                                      grad_stype="row_sparse", stype="row_sparse")

    def forward(self, x):
        weight = self.weight.row_sparse_data(x)
        return Embedding(x, weight, **self._kwargs)

    def __repr__(self):
        return "{block_name}({input_dim} -> {output_dim}, {dtype})".format(
            block_name=type(self).__name__, **self._kwargs)
