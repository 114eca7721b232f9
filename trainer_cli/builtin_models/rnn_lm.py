"""A recurrent language model: Embedding, LSTM (or GRU), Dense over the vocabulary, for text data."""
from trainer_cli.gluon import Block, nn, rnn


class RNNModel(Block):
    """Token ids (N, T) -> logits (N, T, vocab_size). ``net(x)`` starts from a zero state;
    ``net(x, state)`` returns ``(logits, state)``, as gluon's recurrent layers do, so that the
    runner carries the state from batch to batch (``begin_state`` gives a stream's first)."""

    def __init__(self, vocab_size, embed_size, hidden_size, num_layers, mode, dropout, **kwargs):
        super().__init__(**kwargs)
        layer = {"lstm": rnn.LSTM, "gru": rnn.GRU}[mode]
        with self.name_scope():
            self.embedding = nn.Embedding(vocab_size, embed_size)
            self.drop = nn.Dropout(dropout) if dropout else None
            self.rnn = layer(hidden_size, num_layers=num_layers, layout="NTC", dropout=dropout,
                             input_size=embed_size)
            self.decoder = nn.Dense(vocab_size, flatten=False, in_units=hidden_size)

    def begin_state(self, batch_size, **kwargs):
        return self.rnn.begin_state(batch_size, **kwargs)

    def forward(self, x, state=None):
        emb = self.embedding(x)
        if self.drop is not None:
            emb = self.drop(emb)
        if state is None:
            out, new_state = self.rnn(emb), None
        else:
            out, new_state = self.rnn(emb, state)
        if self.drop is not None:
            out = self.drop(out)
        logits = self.decoder(out)
        return logits if state is None else (logits, new_state)

def build(vocab_size: int = 256, embed_size: int = 32, hidden_size: int = 64, num_layers: int = 1,
          mode: str = "lstm", dropout: float = 0.0):
    """``vocab_size`` is set from the training text's vocabulary when the config leaves it out."""
    if mode not in ("lstm", "gru"):
        raise ValueError("mode must be lstm or gru, got %r" % (mode,))
    return RNNModel(vocab_size, embed_size, hidden_size, num_layers, mode, dropout)
