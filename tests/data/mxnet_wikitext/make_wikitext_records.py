"""Records what MXNet 1.9.1 gives for wikitext_cases.py:

    /work/mxvenv/bin/python tests/data/mxnet_wikitext/make_wikitext_records.py
"""
import json
import os
import sys

import mxnet
import mxnet.gluon.contrib.data.text as mx_text

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import wikitext_cases  # noqa: E402

mx_text.check_sha1 = lambda path, sha1: True     # not the published files: read them as they are
with open(os.path.join(HERE, "wikitext.json"), "w", encoding="utf-8") as f:
    json.dump(wikitext_cases.record(mxnet), f, ensure_ascii=False, sort_keys=True)
