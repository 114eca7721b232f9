"""``mx.io.ImageRecordIter`` / ``ImageRecordUInt8Iter``: MXNet 1.9.1's batches bit for bit where
nothing is random (tests/data/mxnet_io/image_record.json, recorded from the real MXNet by
``image_record_cases.record``: resizes with every interpolation, crops, padding, mirroring,
normalisation, gray, uint8, image-list and multi-value labels, an index file), and the random
augmenters, shuffling, parts and errors by their properties."""

import numpy as np
import pytest

import replay
import trainer_cli as mx

RECORDED, cases = replay.recording("mxnet_io", "image_record.json", "image_record_cases")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return cases.write_files(str(tmp_path_factory.mktemp("records")))


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    return cases.record(mx, str(tmp_path_factory.mktemp("ours")))


def test_every_recorded_case_is_here(ours):
    assert sorted(ours) == sorted(RECORDED) == sorted(cases.CASES)


@pytest.mark.parametrize("name", sorted(set(RECORDED) - {"no_round"}))
def test_each_case_is_mxnets_bits(ours, name):
    assert ours[name] == RECORDED[name]


def test_without_round_batch_the_last_batch_says_its_padding(ours):
    # MXNet's last batch reports pad 0 and holds uninitialised memory past its one image; here
    # pad says how many rows only fill it up. The rows that are images are MXNet's.
    for got, want in zip(ours["no_round"]["passes"], RECORDED["no_round"]["passes"]):
        assert got[:-1] == want[:-1]
        assert got[-1]["pad"] == 2 and got[-1]["sha256"][0] == want[-1]["sha256"][0]
        assert got[-1]["label"][0] == want[-1]["label"][0]


def _iter(files, **kwargs):
    kwargs.setdefault("data_shape", (3, 12, 12))
    kwargs.setdefault("batch_size", 7)
    return mx.io.ImageRecordIter(path_imgrec=files[0], **kwargs)


def _pass(it):
    it.reset()
    out = [(b.data[0].asnumpy(), b.label[0].asnumpy()) for b in it]
    return np.concatenate([d for d, _ in out]), np.concatenate([lab for _, lab in out])


def test_random_augmenters_are_seeded_and_independent_of_the_threads(files):
    augment = dict(rand_crop=True, rand_mirror=True, brightness=0.3, contrast=0.3,
                   saturation=0.3, pca_noise=0.1, resize=14)
    one = _pass(_iter(files, seed=5, preprocess_threads=1, **augment))[0]
    four = _pass(_iter(files, seed=5, preprocess_threads=4, **augment))[0]
    other = _pass(_iter(files, seed=6, preprocess_threads=1, **augment))[0]
    np.testing.assert_array_equal(one, four)
    assert not np.array_equal(one, other)
    plain = _pass(_iter(files, resize=14))[0]
    assert one.shape == plain.shape and np.isfinite(one).all()
    assert one.min() >= 0 and one.max() <= 255


def test_rand_mirror_flips_some_images_and_nothing_else(files):
    plain = _pass(_iter(files, resize=14))[0]
    mirrored = _pass(_iter(files, resize=14, rand_mirror=True, seed=3))[0]
    flipped = [np.array_equal(m, p[..., ::-1]) and not np.array_equal(m, p)
               for m, p in zip(mirrored, plain)]
    kept = [np.array_equal(m, p) for m, p in zip(mirrored, plain)]
    assert all(f or k for f, k in zip(flipped, kept)) and any(flipped) and any(kept)


def test_random_resized_crop_gives_the_data_shape(files):
    data, labels = _pass(_iter(files, data_shape=(3, 10, 8), random_resized_crop=True,
                               min_random_area=0.3, max_aspect_ratio=4 / 3.,
                               min_aspect_ratio=3 / 4., seed=2))
    assert data.shape == (7, 3, 10, 8) and labels.tolist() == [0, 1, 2, 3, 0, 1, 2]


def test_seed_aug_gives_each_place_in_the_pass_its_own_draws(files):
    a = _pass(_iter(files, rand_crop=True, resize=16, seed_aug=9, seed=1))[0]
    b = _pass(_iter(files, rand_crop=True, resize=16, seed_aug=9, seed=2))[0]
    np.testing.assert_array_equal(a, b)


def test_shuffle_gives_a_new_order_each_pass_and_round_batch_continues_it(files):
    def passes(seed):
        # the image list's first label is 2 * the record's id: which image each row is
        it = _iter(files, batch_size=3, shuffle=True, seed=seed, data_shape=(3, 8, 8),
                   path_imglist=files[3], label_width=2)
        out = []
        for _ in range(3):
            out.append([int(v) // 2 for b in it for v in b.label[0].asnumpy()[:, 0]])
            it.reset()
        return out
    first, second, third = passes(4)
    # 7 images in batches of 3: a pass's last batch takes the next pass's first images, and
    # the next pass starts after them
    assert sorted(first[:7]) == list(range(7)) and first[:7] != list(range(7))
    nxt = first[7:] + second
    assert len(first) == 9 and sorted(nxt[:7]) == list(range(7)) and nxt[:7] != first[:7]
    assert sorted((second[5:] + third)[:7]) == list(range(7))
    assert passes(4) == [first, second, third] and passes(5) != [first, second, third]


def test_parts_split_the_records(files):
    labels = []
    for part in range(3):
        it = _iter(files, batch_size=1, num_parts=3, part_index=part, data_shape=(3, 8, 8))
        labels.append([int(b.label[0].asnumpy()[0]) for b in it])
    assert labels == [[0, 1], [2, 3], [0, 1, 2]]


def test_a_crop_of_an_image_already_the_data_shape_is_the_crop_resized(files):
    # MXNet resizes into the image it crops from when that has the data shape already, and
    # gives garbage (docs/compat.md); here it is the crop, resized.
    it = _iter(files, data_shape=(3, 16, 16), batch_size=3, max_crop_size=12, min_crop_size=12,
               dtype="uint8")
    got = next(it).data[0].asnumpy()[2]            # the third image is 16x16
    header, png = mx.recordio.unpack(mx.recordio.MXIndexedRecordIO(files[1], files[0], "r")
                                     .read_idx(2))
    pixels = mx.image.imdecode(png)
    want = mx.image.imresize(mx.image.fixed_crop(pixels, 2, 2, 12, 12), 16, 16, interp=1)
    np.testing.assert_array_equal(got, want.asnumpy().transpose(2, 0, 1))


def test_bad_arguments_and_records_say_what_is_wrong(files, tmp_path):
    with pytest.raises(NotImplementedError, match="max_rotate_angle"):
        _iter(files, max_rotate_angle=10)
    with pytest.raises(NotImplementedError, match="affine"):
        _iter(files, max_aspect_ratio=0.2)
    with pytest.raises(TypeError, match="no_such_thing"):
        _iter(files, no_such_thing=1)
    with pytest.raises(ValueError, match="inter_method 7"):
        _iter(files, inter_method=7)
    with pytest.raises(ValueError, match="fewer than a batch of 8"):
        _iter(files, batch_size=8)
    with pytest.raises(ValueError, match="data_shape"):
        _iter(files, data_shape=(4, 8, 8))
    with pytest.raises(ValueError, match="dtype"):
        _iter(files, dtype="int8")
    with pytest.raises(ValueError, match="has 1 label.*label_width is 2"):
        next(_iter(files, label_width=2))
    with pytest.raises(ValueError, match="smaller than max_crop_size"):
        next(_iter(files, max_crop_size=20, min_crop_size=20, data_shape=(3, 8, 8)))
    broken = tmp_path / "broken.rec"
    broken.write_bytes(open(files[0], "rb").read()[:100])
    with pytest.raises(mx.recordio.RecordIOError, match="truncated"):
        mx.io.ImageRecordIter(path_imgrec=str(broken), data_shape=(3, 8, 8), batch_size=1)
    assert mx.io.ImageRecordUInt8Iter(path_imgrec=files[0], data_shape=(3, 8, 8),
                                      batch_size=2).provide_data[0].dtype == np.uint8
