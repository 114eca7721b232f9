"""Matrix factorization for ratings: ``rating(u, i) = <P_u, Q_i> (+ b_u + c_i)``.

The input is one ``(user id, item id)`` pair per row (``data: {type: ratings}`` makes such data).
Every table is an ``Embedding(sparse_grad=True)``: a step's gradients hold only the rows its
batch looked up, and the optimizers update just those rows (lazily, MXNet's default), so a step
costs the same with ten thousand users or ten million.
"""
from trainer_cli.gluon import Block, nn
from trainer_cli.gluon.contrib import nn as contrib_nn


class MatrixFactorization(Block):
    def __init__(self, num_users, num_items, factors, biases, sparse_weights=False, **kwargs):
        super().__init__(**kwargs)
        self.biases = biases
        # sparse_weights: the tables are row_sparse weights kept in the kvstore, each forward
        # pulling only its batch's rows (MXNet's SparseEmbedding).
        table = ((lambda n, d: contrib_nn.SparseEmbedding(n, d)) if sparse_weights
                 else (lambda n, d: nn.Embedding(n, d, sparse_grad=True)))
        with self.name_scope():
            self.users = table(num_users, factors)
            self.items = table(num_items, factors)
            if biases:
                self.user_bias = table(num_users, 1)
                self.item_bias = table(num_items, 1)

    def forward(self, x):
        user, item = x[:, 0], x[:, 1]
        out = (self.users(user) * self.items(item)).sum(axis=1)
        if self.biases:
            out = out + self.user_bias(user).reshape((-1,)) + self.item_bias(item).reshape((-1,))
        return out


def build(num_users: int, num_items: int, factors: int = 16, biases: bool = True,
          sparse_weights: bool = False):
    return MatrixFactorization(num_users, num_items, factors, biases, sparse_weights)
