"""``gluon.contrib.nn``: ``SparseEmbedding``, an embedding whose table lives in the Trainer's
kvstore as a row_sparse weight; ``Concurrent``/``HybridConcurrent``, children applied to the same
input with their outputs concatenated (the model zoo's Inception, DenseNet and SqueezeNet blocks);
``Identity``."""
from .... import ndarray as _nd
from ....ndarray import Embedding
from ...block import Block, HybridBlock, HybridSequential, Sequential
from ...nn import Identity
from ....symbol import Symbol

__all__ = ["SparseEmbedding", "Concurrent", "HybridConcurrent", "Identity"]


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
