"""``gluon.contrib.data.text``: WikiText-2's samples, labels, vocabulary and counts are MXNet
1.9.1's for the same files (tests/data/mxnet_wikitext, recorded from the real MXNet by the same
``wikitext_cases.record``); files are found where MXNet or the corpus's archive puts them, and
a missing or damaged file is an error naming it."""
import json
import os
import shutil
import sys

import pytest

import trainer_cli as mx
from trainer_cli.gluon.contrib.data import text
from trainer_cli.gluon.data.vision import DatasetFileError

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_wikitext")
sys.path.insert(0, HERE)
import wikitext_cases  # noqa: E402

with open(os.path.join(HERE, "wikitext.json"), encoding="utf-8") as _f:
    RECORDED = json.load(_f)
OURS = json.loads(json.dumps(wikitext_cases.record(mx), ensure_ascii=False))


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_each_recorded_value_is_mxnets(key):
    assert OURS[key] == RECORDED[key]


def test_every_recorded_value_is_here():
    assert sorted(OURS) == sorted(RECORDED)


def test_samples_are_consecutive_tokens_and_labels_the_next_ones():
    data = text.WikiText2(root=wikitext_cases.ROOT, seq_len=4)
    flat = [t for i in range(len(data)) for t in data[i][0].asnumpy().tolist()]
    labels = [t for i in range(len(data)) for t in data[i][1].asnumpy().tolist()]
    assert flat[1:] == labels[:-1]
    with open(os.path.join(wikitext_cases.ROOT, "wiki.train.tokens"), encoding="utf-8") as f:
        lines = [line.split() for line in f.read().splitlines()]     # \x0c, \u2028 end lines
    tokens = [t for words in lines if words for t in words + ["<eos>"]]
    assert len(tokens) == 128 and tokens.count("<eos>") == 9
    assert [data.vocabulary.idx_to_token[i] for i in flat + labels[-1:]] == [
        t if t in data.vocabulary.token_to_idx else "<unk>" for t in tokens[:125]]


def test_the_archives_folder_and_the_default_root(tmp_path, monkeypatch):
    shutil.copytree(wikitext_cases.ROOT, tmp_path / "wikitext-2")
    beside = text.WikiText2(root=str(tmp_path), seq_len=7)        # the archive's own folder
    assert len(beside) == RECORDED["train7/len"]
    monkeypatch.setenv("MXNET_HOME", str(tmp_path / "home"))
    (tmp_path / "home" / "datasets").mkdir(parents=True)
    shutil.copytree(wikitext_cases.ROOT, tmp_path / "home" / "datasets" / "wikitext-2")
    assert len(text.WikiText2(segment="validation", seq_len=5)) == RECORDED["valid5/len"]


def test_missing_damaged_and_bad_arguments_are_clear_errors(tmp_path):
    with pytest.raises(DatasetFileError, match=r"WikiText103: wiki\.test\.tokens not found in "
                       + str(tmp_path) + r".*does not download"):
        text.WikiText103(root=str(tmp_path), segment="test")
    (tmp_path / "wiki.train.tokens").write_bytes(b"good words \xff\xfe bad\n")
    with pytest.raises(DatasetFileError, match=r"wiki\.train\.tokens: not UTF-8 text \(byte 11\)"):
        text.WikiText2(root=str(tmp_path))
    with pytest.raises(ValueError, match="segment must be one of train, validation, test"):
        text.WikiText2(root=str(tmp_path), segment="valid")
    with pytest.raises(ValueError, match="seq_len must be at least 1"):
        text.WikiText2(root=str(tmp_path), seq_len=0)


def test_a_corpus_shorter_than_a_sample_has_no_samples(tmp_path):
    (tmp_path / "wiki.train.tokens").write_text(" one two \n", encoding="utf-8")
    data = text.WikiText2(root=str(tmp_path), seq_len=35)
    assert len(data) == 0
    (tmp_path / "wiki.train.tokens").write_text("", encoding="utf-8")
    assert len(text.WikiText2(root=str(tmp_path))) == 0
