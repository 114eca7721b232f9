"""Matrix factorization for ratings: ``rating(u, i) = <P_u, Q_i> (+ b_u + c_i)``.

The input is one ``(user id, item id)`` pair per row (``data: {type: ratings}`` makes such data).
Every table is an ``Embedding(sparse_grad=True)``: a step's gradients hold only the rows its
batch looked up, and the optimizers update just those rows (lazily, MXNet's default), so a step
costs the same with ten thousand users or ten million.
"""
from trainer_cli.gluon import Block, nn


class MatrixFactorization(Block):
    def __init__(self, num_users, num_items, factors, biases, **kwargs):
        super().__init__(**kwargs)
        self.biases = biases
        with self.name_scope():
            self.users = nn.Embedding(num_users, factors, sparse_grad=True)
            self.items = nn.Embedding(num_items, factors, sparse_grad=True)
            if biases:
                self.user_bias = nn.Embedding(num_users, 1, sparse_grad=True)
                self.item_bias = nn.Embedding(num_items, 1, sparse_grad=True)

    def forward(self, x):
        user, item = x[:, 0], x[:, 1]
        out = (self.users(user) * self.items(item)).sum(axis=1)
        if self.biases:
            out = out + self.user_bias(user).reshape((-1,)) + self.item_bias(item).reshape((-1,))
        return out


def build(num_users: int, num_items: int, factors: int = 16, biases: bool = True):
    return MatrixFactorization(num_users, num_items, factors, biases)
