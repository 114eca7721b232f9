"""A linear model on sparse (CSR) features: ``sparse.dot(x, W) + b``, MXNet's sparse linear
classification example. ``W`` gets row_sparse gradients holding only the features a batch
uses, and the optimizers update only those rows (lazily, MXNet's default)."""
from trainer_cli import nd
from trainer_cli.gluon import Block


class SparseLinear(Block):
    def __init__(self, num_features, outputs, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.weight = self.params.get("weight", shape=(num_features, outputs),
                                          grad_stype="row_sparse")
            self.bias = self.params.get("bias", shape=(outputs,), init="zeros")

    def forward(self, x):
        ctx = x.context
        return nd.sparse.dot(x, self.weight.data(ctx)) + self.bias.data(ctx)


def build(num_features: int, outputs: int = 2):
    return SparseLinear(num_features, outputs)
