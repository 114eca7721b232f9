"""WikiText-2 read from the small files in ``wikitext-2/`` (made-up lines in the corpus's
layout: headings, blank lines, ``@-@``, non-ASCII, a tab, a form feed and a line separator),
written once against MXNet's API (``record(mx)``).

    /work/mxvenv/bin/python tests/data/mxnet_wikitext/make_wikitext_records.py

records ``wikitext.json`` (MXNet 1.9.1's arrays, vocabulary and counts; MXNet's SHA-1 check of
the files is bypassed there, as these are not the published files);
tests/test_wikitext.py replays ``record`` with trainer_cli."""
import os

import numpy

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "wikitext-2")


def _dataset(name, data):
    samples = [data[i] for i in range(len(data))]
    return {name + "/data": [x.asnumpy().tolist() for x, _ in samples],
            name + "/label": [y.asnumpy().tolist() for _, y in samples],
            name + "/dtype": sorted({numpy.dtype(a.dtype).name for pair in samples for a in pair}),
            name + "/len": len(data)}


def record(mx):
    text = mx.gluon.contrib.data.text
    out = {}
    train = text.WikiText2(root=ROOT, segment="train", seq_len=7)
    out.update(_dataset("train7", train))
    out["vocab"] = train.vocabulary.idx_to_token
    out["frequencies"] = sorted(train.frequencies.items())
    out.update(_dataset("train35", text.WikiText2(root=ROOT)))
    out.update(_dataset("train1", text.WikiText2(root=ROOT, seq_len=1)))
    valid = text.WikiText2(root=ROOT, segment="validation", vocab=train.vocabulary, seq_len=5)
    out.update(_dataset("valid5", valid))
    out["valid_frequencies"] = sorted(valid.frequencies.items())
    out["valid_same_vocab"] = valid.vocabulary is train.vocabulary
    return out
