"""contrib.text against real MXNet 1.9.1 (tests/data/mxnet_text/, written by
make_text_golden.py there): token counts, vocabulary order, embeddings read from local files."""
import collections
import json
import os

import numpy
import pytest

import trainer_cli as mx
from trainer_cli import nd
from trainer_cli.contrib import text

HERE = os.path.join(os.path.dirname(__file__), "data", "mxnet_text")
ROOT = os.path.join(HERE, "embeddings")
with open(os.path.join(HERE, "text_golden.json")) as _f:
    J = json.load(_f)
A = numpy.load(os.path.join(HERE, "text_golden.npz"), allow_pickle=False)
SOURCE = " Life is great ! \n life is good . \n The life of a cat is good , the cat is great !\n"


def _close(got, key):
    got = got.asnumpy()
    assert got.dtype == numpy.float32 and got.shape == A[key].shape
    numpy.testing.assert_array_equal(got, A[key])


def test_count_tokens_from_str_is_mxnets():
    counter = text.utils.count_tokens_from_str(SOURCE)
    assert isinstance(counter, collections.Counter) and dict(counter) == J["count"]
    assert dict(text.utils.count_tokens_from_str(SOURCE, to_lower=True)) == J["count_lower"]
    start = collections.Counter({"is": 5})
    got = text.utils.count_tokens_from_str("*Life*is*great*!*\n*life*is*good*.*\n", "\\*", "\n",
                                           True, start)
    assert got is start and dict(got) == J["count_star"]


@pytest.mark.parametrize("name,kwargs", [
    ("default", {}), ("most2", {"most_freq_count": 2}), ("min2", {"min_freq": 2}),
    ("reserved", {"reserved_tokens": ["<pad>", "is"], "unknown_token": "?"}),
    ("most3min2", {"most_freq_count": 3, "min_freq": 2, "reserved_tokens": ["<bos>"]})])
def test_vocabulary_order_and_indices_are_mxnets(name, kwargs):
    v = text.vocab.Vocabulary(text.utils.count_tokens_from_str(SOURCE), **kwargs)
    assert v.idx_to_token == J["vocab_" + name]
    assert len(v) == len(J["vocab_" + name])
    assert v.to_indices(["cat", "nope", "is", "Life"]) == J["vocab_" + name + "_indices"]
    assert all(v.token_to_idx[t] == i for i, t in enumerate(v.idx_to_token))


def test_vocabulary_lookups_and_bad_arguments():
    v = text.vocab.Vocabulary(text.utils.count_tokens_from_str(SOURCE))
    assert v.to_tokens([1, 3, 0]) == J["to_tokens"]
    assert v.to_indices("cat") == J["to_index_single"] and v.to_tokens(0) == "<unk>"
    with pytest.raises(ValueError, match="index 99"):
        v.to_tokens(99)
    with pytest.raises(ValueError, match="unknown_token"):
        text.vocab.Vocabulary(reserved_tokens=["<unk>"])
    with pytest.raises(ValueError, match="duplicate"):
        text.vocab.Vocabulary(reserved_tokens=["a", "a"])
    with pytest.raises(ValueError, match="min_freq"):
        text.vocab.Vocabulary(min_freq=0)


def test_glove_fasttext_custom_composite_are_mxnets():
    glove = text.embedding.create("glove", pretrained_file_name="glove.6B.50d.txt",
                                  embedding_root=ROOT)
    assert glove.idx_to_token == J["glove_tokens"] and glove.vec_len == 5
    _close(glove.idx_to_vec, "glove_vecs")
    _close(glove.get_vecs_by_tokens(["cat", "LIFE", "zebra"]), "glove_lookup")
    _close(glove.get_vecs_by_tokens(["cat", "LIFE", "Life"], lower_case_backup=True),
           "glove_lookup_lower")
    assert glove.get_vecs_by_tokens("cat").shape == (5,)
    v = text.vocab.Vocabulary(text.utils.count_tokens_from_str(SOURCE))
    glove_v = text.embedding.GloVe("glove.6B.50d.txt", embedding_root=ROOT, vocabulary=v,
                                   init_unknown_vec=nd.ones)
    assert glove_v.idx_to_token == J["glove_vocab_tokens"]
    _close(glove_v.idx_to_vec, "glove_vocab_vecs")
    with pytest.warns(UserWarning):              # the header line and a duplicate token
        fast = text.embedding.FastText(embedding_root=ROOT)
    assert fast.idx_to_token == J["fast_tokens"]
    _close(fast.idx_to_vec, "fast_vecs")
    custom = text.embedding.CustomEmbedding(os.path.join(HERE, "custom.txt"), elem_delim="\t")
    _close(custom.idx_to_vec, "custom_vecs")
    _close(text.embedding.CompositeEmbedding(v, [glove, custom]).idx_to_vec, "composite_vecs")
    v.set_embedding(glove, custom)
    _close(v.embedding.idx_to_vec, "composite_vecs")
    custom.update_token_vectors(["bad", "<unk>"], nd.array([[1, 2, 3, 4], [5, 6, 7, 8]]))
    _close(custom.idx_to_vec, "custom_updated")
    with pytest.raises(ValueError, match="Token zebra is unknown"):
        custom.update_token_vectors("zebra", nd.ones((4,)))


def test_pretrained_names_and_mxnet_home(tmp_path, monkeypatch):
    assert text.embedding.get_pretrained_file_names("glove") == J["names_glove"]
    assert len(text.embedding.get_pretrained_file_names()["fasttext"]) == J["names_fasttext_count"]
    monkeypatch.setenv("MXNET_HOME", ROOT[:-len("/embeddings")])
    glove = text.embedding.GloVe("glove.6B.50d.txt")     # $MXNET_HOME/embeddings/glove/...
    assert glove.idx_to_token == J["glove_tokens"]
    path = os.path.join(ROOT, "glove", "glove.6B.50d.txt")
    assert text.embedding.GloVe(pretrained_file_path=path).idx_to_token == J["glove_tokens"]


def test_missing_or_damaged_files_are_clear_errors(tmp_path):
    expected = os.path.join(str(tmp_path), "glove", "glove.6B.100d.txt")
    with pytest.raises(mx.MXNetError, match="%s: .*not there.*nothing is downloaded"
                       % expected.replace(".", r"\.")):
        text.embedding.GloVe("glove.6B.100d.txt", embedding_root=str(tmp_path))
    with pytest.raises(KeyError, match="Valid pretrained files"):
        text.embedding.GloVe("glove.nope.txt", embedding_root=str(tmp_path))
    with pytest.raises(KeyError, match="registered"):
        text.embedding.create("word2vec")
    bad = tmp_path / "bad.txt"
    bad.write_text("a 1 2\nb 1 2 3\n")
    with pytest.raises(mx.MXNetError, match=r"bad\.txt, line 2: the dimension of token b is 3"):
        text.embedding.CustomEmbedding(str(bad))
    bad.write_text("a 1 x\n")
    with pytest.raises(ValueError, match=r"bad\.txt, line 1: could not convert"):
        text.embedding.CustomEmbedding(str(bad))
    bad.write_text("a" * (text.embedding.MAX_LINE_CHARS + 5))
    with pytest.raises(mx.MXNetError, match=r"bad\.txt, line 1: longer than"):
        text.embedding.CustomEmbedding(str(bad))
    fifo = tmp_path / "fifo.txt"
    os.mkfifo(fifo)
    with pytest.raises(mx.MXNetError, match="fifo.txt"):
        text.embedding.CustomEmbedding(str(fifo))
