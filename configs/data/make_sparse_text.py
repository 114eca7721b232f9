"""Writes sparse_text.npz (CSR features in SciPy's save_npz layout, written without SciPy) and
sparse_text_labels.npy: seeded synthetic "documents" over a 2,000-word vocabulary, 30 words
each with counts 1-3, labelled by a hidden linear rule over 500 informative words. Run from this folder:

    python make_sparse_text.py
"""
import io
import zipfile

import numpy as np

ROWS, VOCAB, WORDS, INFORMATIVE, SEED = 4000, 2000, 30, 500, 11


def main():
    rng = np.random.default_rng(SEED)
    signal = np.zeros(VOCAB)
    signal[rng.choice(VOCAB, INFORMATIVE, replace=False)] = rng.normal(scale=2.0, size=INFORMATIVE)
    indptr, indices, data, labels = [0], [], [], []
    for _ in range(ROWS):
        words = np.sort(rng.choice(VOCAB, WORDS, replace=False))
        counts = rng.integers(1, 4, size=WORDS).astype(np.float32)
        indices.append(words)
        data.append(counts)
        indptr.append(indptr[-1] + WORDS)
        labels.append(float(signal[words] @ counts + 0.5 * rng.normal() > 0))
    arrays = {"indices": np.concatenate(indices).astype(np.int32),
              "indptr": np.asarray(indptr, dtype=np.int32),
              "format": np.array(b"csr"), "shape": np.array([ROWS, VOCAB]),
              "data": np.concatenate(data).astype(np.float32)}
    with zipfile.ZipFile("sparse_text.npz", "w", zipfile.ZIP_DEFLATED) as zf:
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, arr, allow_pickle=False)
            zf.writestr(name + ".npy", buf.getvalue())
    np.save("sparse_text_labels.npy", np.asarray(labels, dtype=np.float32))


if __name__ == "__main__":
    main()
