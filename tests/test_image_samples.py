"""A runner's image samples: the keyed random streams they draw from (per thread, made at
their first draw, the process's own streams untouched) and the transforms run on NumPy images,
``ToTensor`` and ``Normalize`` once per batch, against a Compose called on each sample."""
import random
import threading

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer_cli import nd
from trainer_cli import random as _random
from trainer_cli.gluon.data.vision import transforms as T
from trainer_cli.run.data import DataError
from trainer_cli.run.images import Transformer


def _expected(key, n):
    """What a stream of ``key`` draws: its CPU generator a PCG64 of the key's SeedSequence,
    Python's random seeded with that sequence's first 64-bit word."""
    seq = numpy.random.SeedSequence(key)
    gen = numpy.random.Generator(numpy.random.PCG64(seq))
    py = random.Random(int(seq.generate_state(1, numpy.uint64)[0]))
    return gen.random(n).tolist(), [py.random() for _ in range(n)]


def _draw(n):
    return ([float(_random.generator(None).random()) for _ in range(n)],
            [_random.py_random().random() for _ in range(n)])


def test_a_stream_draws_by_its_key_and_leaves_the_process_streams_where_they_were():
    _random.seed(11)
    random.seed(5)
    run_state, py_state = _random.get_state(), random.getstate()
    with _random.cpu_stream([7, 1, 42]):
        assert _draw(3) == _expected([7, 1, 42], 3)
        with _random.cpu_stream(9):            # nested: its own, then the outer one again
            assert _draw(2) == _expected(9, 2)
        assert _draw(1) == tuple(v[3:] for v in _expected([7, 1, 42], 4))
    assert _random.get_state() == run_state and random.getstate() == py_state
    assert _random.py_random() is random
    # The order of the two kinds of draw does not matter: each is made from the key alone.
    with _random.cpu_stream([7, 1, 42]):
        py_first = [_random.py_random().random() for _ in range(3)]
        gen_after = _random.generator(None).random(3).tolist()
    assert (gen_after, py_first) == _expected([7, 1, 42], 3)


def test_streams_on_threads_are_their_own_and_the_training_thread_keeps_its_generator():
    keys = [[3, 0, i] for i in range(8)]
    want = {i: _expected(k, 50) for i, k in enumerate(keys)}
    got, errors = {}, []
    start = threading.Barrier(len(keys) + 1)

    def sample(i):
        try:
            start.wait(10)
            with _random.cpu_stream(keys[i]):
                draws = ([], [])
                for _ in range(50):        # interleaved with the other threads' draws
                    draws[0].append(float(_random.generator(None).random()))
                    draws[1].append(_random.py_random().random())
            got[i] = draws
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    _random.seed(3)
    reference = numpy.random.Generator(numpy.random.PCG64(3)).random(200).tolist()
    threads = [threading.Thread(target=sample, args=(i,)) for i in range(len(keys))]
    for t in threads:
        t.start()
    start.wait(10)
    mine = [float(_random.generator(None).random()) for _ in range(200)]
    for t in threads:
        t.join(30)
    assert not errors
    assert {i: tuple(v) for i, v in got.items()} == want
    assert mine == reference


def _images(n, seed=0, size=(20, 24)):
    rng = numpy.random.default_rng(seed)
    return [rng.integers(0, 256, size + (3,), dtype=numpy.uint8) for _ in range(n)]


def _per_sample(compose, images, keys):
    """The samples as a Compose called on each, in its stream, makes them."""
    out = []
    for image, key in zip(images, keys):
        with _random.cpu_stream(key):
            out.append(compose(nd.array(image, dtype=image.dtype)).asnumpy()
                       .astype(numpy.float32))
    return numpy.stack(out)


@pytest.mark.parametrize("blocks, batched", [
    (lambda: [T.RandomResizedCrop(16), T.RandomFlipLeftRight(), T.ToTensor(),
              T.Normalize((0.4, 0.5, 0.6), (0.2, 0.25, 0.3))], 2),
    (lambda: [T.ToTensor(), T.Normalize(0.5, 0.25)], 2),             # nothing per sample
    (lambda: [T.CenterCrop(12), T.RandomFlipTopBottom()], 0),        # uint8 samples, cast
    (lambda: [T.RandomResizedCrop(16), T.RandomBrightness(0.3), T.ToTensor()], None),
])
def test_samples_and_batch_give_the_bits_of_a_compose_called_on_each(blocks, batched):
    images = _images(6)
    keys = [[5, 2, i] for i in range(6)]
    transformer = Transformer(T.Compose(blocks()))
    # None: RandomBrightness is not a NumPy-level transform, so each sample calls the Compose.
    assert (transformer.each is None) == (batched is None)
    assert len(transformer.tail) == (batched or 0)
    got = transformer.batch([transformer.sample(image, key) for image, key in zip(images, keys)])
    want = _per_sample(T.Compose(blocks()), images, keys)
    assert got.dtype == numpy.float32 and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def test_samples_of_different_sizes_are_refused_with_their_shapes():
    transformer = Transformer(T.Compose([T.ToTensor()]))
    a, b = _images(1, size=(4, 5))[0], _images(1, size=(6, 5))[0]
    with pytest.raises(DataError, match=r"different sizes .*\(4, 5, 3\), \(6, 5, 3\).*add a "
                                        r"resize or crop"):
        transformer.batch([transformer.sample(a, 1), transformer.sample(b, 2)])


def test_a_failing_transform_is_named_on_its_error():
    transformer = Transformer(T.Compose([T.ToTensor(), T.Normalize((0.1, 0.2), 0.5)]))
    with pytest.raises(ValueError, match="2 values for an input of 3 channels") as info:
        transformer.batch([transformer.sample(_images(1)[0], 1)])
    assert "Normalize" in info.value.failed_block


@settings(max_examples=80, deadline=None)
@given(h=st.integers(1, 40), w=st.integers(1, 40), channels=st.sampled_from([1, 3, 4]),
       dh=st.integers(1, 50), dw=st.integers(1, 50), view=st.booleans(),
       seed=st.integers(0, 2 ** 16))
def test_the_compiled_bilinear_resize_gives_the_numpy_passes_bits(h, w, channels, dh, dw, view,
                                                                 seed):
    from trainer_cli import _jit
    from trainer_cli.ndarray import _opencv_resize as R

    rng = numpy.random.default_rng(seed)
    img = rng.integers(0, 256, (h + 2, w + 3, channels), dtype=numpy.uint8)
    img = img[1:h + 1, 2:w + 2] if view else numpy.ascontiguousarray(img[:h, :w])  # a crop
    assert _jit.enabled()
    compiled = R._bilinear_u8(img, dh, dw)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(_jit, "_numba", False)
        passes = R._bilinear_u8(img, dh, dw)
    assert compiled.dtype == numpy.uint8 and compiled.shape == passes.shape == (dh, dw, channels)
    assert compiled.tobytes() == passes.tobytes()
