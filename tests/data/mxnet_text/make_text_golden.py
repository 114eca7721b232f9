"""Outputs of real MXNet 1.9.1's ``mxnet.contrib.text``, for tests/test_contrib_text.py.

Run in a venv with MXNet 1.9.1:  python make_text_golden.py
Writes the small embedding files it reads (glove.6B.50d.txt is a 5-dimensional stand-in under
that name, fake.vec a fastText-style file with a header line, custom.txt tab-separated), and
text_golden.json / text_golden.npz (arrays only) beside this script.
"""
import collections
import json
import os

import numpy as np
import mxnet as mx
from mxnet import nd
from mxnet.contrib import text

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = " Life is great ! \n life is good . \n The life of a cat is good , the cat is great !\n"


def write_files(rng):
    words = ["the", "cat", "is", "good", "great", "life", "Life", "!", "of", "a"]
    os.makedirs(os.path.join(HERE, "embeddings", "glove"), exist_ok=True)
    with open(os.path.join(HERE, "embeddings", "glove", "glove.6B.50d.txt"), "w") as f:
        for w in words:
            f.write(w + " " + " ".join("%.6f" % v for v in rng.randn(5)) + "\n")
    os.makedirs(os.path.join(HERE, "embeddings", "fasttext"), exist_ok=True)
    with open(os.path.join(HERE, "embeddings", "fasttext", "wiki.simple.vec"), "w") as f:
        f.write("6 3\n")
        for w in ["<unk>", "cat", "dog", "the", "cat", "life"]:
            f.write(w + " " + " ".join("%.5f" % v for v in rng.randn(3)) + " \n")
    with open(os.path.join(HERE, "custom.txt"), "w") as f:
        for w in ["good", "bad", "great"]:
            f.write(w + "\t" + "\t".join("%.4f" % v for v in rng.randn(4)) + "\n")


def main():
    # MXNet re-downloads a file whose SHA-1 is not the real one's: these stand-ins are taken
    # as they are.
    mx.gluon.utils.check_sha1 = lambda *args, **kwargs: True
    rng = np.random.RandomState(3)
    write_files(rng)
    out, arrays = {}, {}
    counter = text.utils.count_tokens_from_str(SOURCE)
    out["count"] = dict(counter)
    out["count_lower"] = dict(text.utils.count_tokens_from_str(SOURCE, to_lower=True))
    out["count_star"] = dict(text.utils.count_tokens_from_str(
        "*Life*is*great*!*\n*life*is*good*.*\n", "\\*", "\n", True,
        collections.Counter({"is": 5})))
    for name, kwargs in [("default", {}), ("most2", {"most_freq_count": 2}),
                         ("min2", {"min_freq": 2}),
                         ("reserved", {"reserved_tokens": ["<pad>", "is"], "unknown_token": "?"}),
                         ("most3min2", {"most_freq_count": 3, "min_freq": 2,
                                        "reserved_tokens": ["<bos>"]})]:
        v = text.vocab.Vocabulary(counter, **kwargs)
        out["vocab_" + name] = v.idx_to_token
        out["vocab_" + name + "_indices"] = v.to_indices(["cat", "nope", "is", "Life"])
    v = text.vocab.Vocabulary(counter)
    out["to_tokens"] = v.to_tokens([1, 3, 0])
    out["to_index_single"] = v.to_indices("cat")

    root = os.path.join(HERE, "embeddings")
    glove = text.embedding.create("glove", pretrained_file_name="glove.6B.50d.txt",
                                  embedding_root=root)
    out["glove_tokens"] = glove.idx_to_token
    arrays["glove_vecs"] = glove.idx_to_vec.asnumpy()
    arrays["glove_lookup"] = glove.get_vecs_by_tokens(["cat", "LIFE", "zebra"]).asnumpy()
    arrays["glove_lookup_lower"] = glove.get_vecs_by_tokens(["cat", "LIFE", "Life"],
                                                            lower_case_backup=True).asnumpy()
    glove_v = text.embedding.GloVe("glove.6B.50d.txt", embedding_root=root, vocabulary=v,
                                   init_unknown_vec=nd.ones)
    out["glove_vocab_tokens"] = glove_v.idx_to_token
    arrays["glove_vocab_vecs"] = glove_v.idx_to_vec.asnumpy()
    fast = text.embedding.FastText(embedding_root=root)
    out["fast_tokens"] = fast.idx_to_token
    arrays["fast_vecs"] = fast.idx_to_vec.asnumpy()
    custom = text.embedding.CustomEmbedding(os.path.join(HERE, "custom.txt"), elem_delim="\t")
    arrays["custom_vecs"] = custom.idx_to_vec.asnumpy()
    comp = text.embedding.CompositeEmbedding(v, [glove, custom])
    arrays["composite_vecs"] = comp.idx_to_vec.asnumpy()
    custom.update_token_vectors(["bad", "<unk>"], nd.array([[1, 2, 3, 4], [5, 6, 7, 8]]))
    arrays["custom_updated"] = custom.idx_to_vec.asnumpy()
    out["names_glove"] = text.embedding.get_pretrained_file_names("glove")
    out["names_fasttext_count"] = len(text.embedding.get_pretrained_file_names("fasttext"))
    with open(os.path.join(HERE, "text_golden.json"), "w") as f:
        json.dump(out, f, indent=0, sort_keys=True)
    np.savez(os.path.join(HERE, "text_golden.npz"), **arrays)


if __name__ == "__main__":
    main()
