"""``mx.recordio`` and the RecordIO data sets: files MXNet 1.9.1 wrote (tests/data/mxnet_recordio,
with OpenCV for the images) read back record for record and pixel for pixel, the same records
written here byte for byte, and damaged or hostile files refused with the file and position."""
import os
import shutil
import struct

import numpy as np
import pytest

import trainer_cli as mx
from trainer_cli import gluon, recordio
from trainer_cli.gluon.data.vision import ImageRecordDataset

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_recordio")
MAGIC = (0xced7230a).to_bytes(4, "little")
PLAIN = [b"", b"a", b"abcd", MAGIC, b"xy" + b"zw" + MAGIC + b"tail", MAGIC * 3 + b"q",
         b"12345678" + MAGIC, b"k" + MAGIC + b"unaligned", bytes(range(256)) * 3]
IMAGES = ["bgr_png", "gray_png", "bgra_png", "bgr_jpg"]
EXPECTED = dict(np.load(os.path.join(HERE, "expected.npz")))


def _path(name):
    return os.path.join(HERE, name)


def test_mxnets_file_reads_record_for_record():
    reader = recordio.MXRecordIO(_path("plain.rec"), "r")
    got = []
    while True:
        record = reader.read()
        if record is None:
            break
        got.append(record)
    assert got == PLAIN
    reader.reset()
    assert reader.read() == PLAIN[0]
    indexed = recordio.MXIndexedRecordIO(_path("plain.idx"), _path("plain.rec"), "r")
    assert indexed.keys == list(range(10, 10 + len(PLAIN)))
    for key in reversed(indexed.keys):
        assert indexed.read_idx(key) == PLAIN[key - 10]


def test_written_here_the_files_are_mxnets_byte_for_byte(tmp_path):
    with recordio.MXIndexedRecordIO(str(tmp_path / "p.idx"), str(tmp_path / "p.rec"), "w") as w:
        for k, record in enumerate(PLAIN):
            w.write_idx(10 + k, record)
    for name in ("rec", "idx"):
        assert (tmp_path / ("p." + name)).read_bytes() == open(_path("plain." + name),
                                                                "rb").read()


@pytest.mark.parametrize("name", IMAGES)
@pytest.mark.parametrize("iscolor", [-1, 0, 1])
def test_unpack_img_gives_opencvs_pixels(name, iscolor):
    reader = recordio.MXIndexedRecordIO(_path("images.idx"), _path("images.rec"), "r")
    header, img = recordio.unpack_img(reader.read_idx(IMAGES.index(name)), iscolor)
    want = EXPECTED["%s/%d" % (name, iscolor)]
    assert img.dtype == np.uint8 and img.shape == want.shape
    np.testing.assert_array_equal(img, want)
    np.testing.assert_array_equal(np.atleast_1d(np.asarray(header.label, np.float32)),
                                  EXPECTED[name + "/label"])
    assert [header.flag, header.id, header.id2] == EXPECTED[name + "/ids"].tolist()


def test_pack_writes_mxnets_header_bytes():
    reader = recordio.MXIndexedRecordIO(_path("images.idx"), _path("images.rec"), "r")
    for k, name in enumerate(IMAGES):
        record = reader.read_idx(k)
        header, _ = recordio.unpack(record)
        label = header.label if header.flag else float(header.label)
        packed = recordio.pack(recordio.IRHeader(0, label, header.id, header.id2), b"")
        assert record.startswith(packed)


@pytest.mark.parametrize("flag", [1, 0])
def test_image_record_dataset_gives_mxnets_images(flag):
    dataset = ImageRecordDataset(_path("images.rec"), flag)
    assert len(dataset) == len(IMAGES)
    for k in range(len(dataset)):
        img, label = dataset[k]
        np.testing.assert_array_equal(img.asnumpy(), EXPECTED["dataset/%d/%d" % (k, flag)])
    doubled = ImageRecordDataset(_path("images.rec"), transform=lambda x, y: (x * 2, y))
    assert doubled[0][1] == 3.0


def test_pack_img_round_trips(tmp_path):
    rng = np.random.RandomState(1)
    bgr = rng.randint(0, 256, (5, 7, 3)).astype(np.uint8)
    for img in (bgr, bgr[..., 0]):
        header, back = recordio.unpack_img(
            recordio.pack_img(recordio.IRHeader(0, [1, 2], 3, 4), img, img_fmt=".png"))
        np.testing.assert_array_equal(back, img)
        assert header.label.tolist() == [1.0, 2.0] and (header.id, header.id2) == (3, 4)
    smooth = np.repeat(np.repeat(bgr[:2, :2], 8, axis=0), 8, axis=1)
    _, back = recordio.unpack_img(recordio.pack_img((0, 5.0, 0, 0), smooth, quality=95), 1)
    assert np.abs(back.astype(int) - smooth).mean() < 8     # JPEG: close, not equal
    with pytest.raises(ValueError, match=".jpg' or '.png"):
        recordio.pack_img((0, 0, 0, 0), bgr, img_fmt=".bmp")


def test_the_data_loader_reads_records_in_worker_processes():
    dataset = gluon.data.RecordFileDataset(_path("plain.rec"))
    loader = gluon.data.DataLoader(dataset, batch_size=1, num_workers=2,
                                   batchify_fn=lambda samples: samples[0])
    try:
        assert list(loader) == PLAIN
    finally:
        loader.close()
    images = gluon.data.DataLoader(
        ImageRecordDataset(_path("images.rec"), transform=lambda x, y: x.astype("float32")),
        batch_size=2, num_workers=2)
    try:
        assert [b.shape for b in images] == [(2, 6, 8, 3), (2, 6, 8, 3)]
    finally:
        images.close()


def _damaged(tmp_path, data, index="0\t0\n"):
    (tmp_path / "d.rec").write_bytes(data)
    (tmp_path / "d.idx").write_text(index)
    return str(tmp_path / "d.rec")


def _word(flag, length):
    return struct.pack("<II", 0xced7230a, (flag << 29) | length)


@pytest.mark.parametrize("data, message", [
    (b"\x00\x01", "truncated record header at byte 0"),
    (struct.pack("<II", 0x12345678, 4) + b"abcd", "not a RecordIO record at byte 0"),
    (_word(0, 8) + b"abcd", "truncated record at byte 0"),
    (_word(0, (1 << 29) - 1), "truncated record at byte 0"),      # no 512 MB read
    (_word(2, 0), "flag 2 out of sequence at byte 0"),
    (_word(1, 4) + b"abcd" + _word(0, 0), "flag 0 out of sequence at byte 12"),
    (_word(1, 4) + b"abcd", "truncated record header at byte 12"),
    (_word(5, 0), "flag 5 out of sequence"),
])
def test_damaged_record_files_are_refused_with_the_position(tmp_path, data, message):
    reader = recordio.MXRecordIO(_damaged(tmp_path, data), "r")
    with pytest.raises(recordio.RecordIOError, match=message) as caught:
        reader.read()
    assert "d.rec" in str(caught.value) and isinstance(caught.value, mx.MXNetError)


@pytest.mark.parametrize("index, message", [
    ("0\t0\nbad line\n", "line 2: expected"), ("0\t-4\n", "line 1"),
    ("x\t0\n", "line 1"), ("0\t0\textra\n", "line 1"), (b"\xff\xfe", "not UTF-8")])
def test_damaged_indexes_are_refused_with_the_line(tmp_path, index, message):
    path = _damaged(tmp_path, _word(0, 0))
    if isinstance(index, bytes):
        (tmp_path / "d.idx").write_bytes(index)
    else:
        (tmp_path / "d.idx").write_text(index)
    with pytest.raises(recordio.RecordIOError, match=message):
        recordio.MXIndexedRecordIO(str(tmp_path / "d.idx"), path, "r")


def test_hostile_paths_and_misuse(tmp_path):
    path = _damaged(tmp_path, _word(0, 0), index="0\t0\n1\t400\n")
    reader = recordio.MXIndexedRecordIO(str(tmp_path / "d.idx"), path, "r")
    with pytest.raises(recordio.RecordIOError, match="past the end"):
        reader.read_idx(1)
    with pytest.raises(KeyError, match="7"):
        reader.read_idx(7)
    os.mkfifo(str(tmp_path / "fifo.rec"))
    with pytest.raises(recordio.RecordIOError, match="not a regular file"):
        recordio.MXRecordIO(str(tmp_path / "fifo.rec"), "r")
    with pytest.raises(recordio.RecordIOError, match="reading, not writing"):
        reader.write(b"x")
    with pytest.raises(ValueError, match="Invalid flag"):
        recordio.MXRecordIO(path, "a")
    writer = recordio.MXRecordIO(str(tmp_path / "w.rec"), "w")
    with pytest.raises(recordio.RecordIOError, match="writing, not reading"):
        writer.read()
    with pytest.raises(recordio.RecordIOError, match="shorter than its"):
        recordio.unpack(b"123")


def test_a_reader_in_a_forked_child_must_reset_first(tmp_path):
    shutil.copy(_path("plain.rec"), tmp_path / "p.rec")
    reader = recordio.MXRecordIO(str(tmp_path / "p.rec"), "r")
    reader.pid = -1         # as a forked child sees it
    with pytest.raises(RuntimeError, match="multiple processes"):
        reader.read()


def test_read_idx_head_reads_a_records_start(tmp_path):
    with recordio.MXIndexedRecordIO(str(tmp_path / "h.idx"), str(tmp_path / "h.rec"), "w") as w:
        w.write_idx(0, b"0123456789")
        w.write_idx(1, b"ab" + b"cd" + MAGIC + b"tail")     # written in parts
        w.write_idx(2, b"")
    reader = recordio.MXIndexedRecordIO(str(tmp_path / "h.idx"), str(tmp_path / "h.rec"), "r")
    assert reader.read_idx_head(0, 4) == b"0123" and reader.read_idx_head(0, 99) == b"0123456789"
    assert reader.read_idx_head(1, 6) == b"abcd" + MAGIC[:2]
    assert reader.read_idx_head(2, 4) == b""
    assert reader.read_idx(0) == b"0123456789"
