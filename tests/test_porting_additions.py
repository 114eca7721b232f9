"""MXNet 1.9.1 names that ported programs use: Dataset.filter/shard/take/sample, FilterSampler,
contrib.data.IntervalSampler, gluon.utils.check_sha1, init.Mixed, EvalMetric.get_config, and
Parameter.dtype as given (values as the real MXNet 1.9.1 gives them, where it runs them)."""
import hashlib

import numpy as np
import pytest

import trainer_cli as mx
from trainer_cli import gluon, nd
from trainer_cli.gluon.contrib.data import IntervalSampler
from trainer_cli.gluon.data import ArrayDataset, FilterSampler, SequentialSampler


def _dataset(n=10):
    return ArrayDataset(list(range(n)), list(range(10, 10 + n)))


def test_dataset_filter_shard_take_and_sample():
    ds = _dataset()
    even = ds.filter(lambda sample: sample[0] % 2 == 0)
    assert len(even) == 5 and [even[i] for i in range(5)] == [(0, 10), (2, 12), (4, 14), (6, 16),
                                                            (8, 18)]
    # MXNet's cut: the first len % num_shards shards one sample longer.
    shards = [ds.shard(3, i) for i in range(3)]
    assert [len(s) for s in shards] == [4, 3, 3]
    assert [s[0][0] for s in shards] == [0, 4, 7]
    assert sum(([s[i][0] for i in range(len(s))] for s in shards), []) == list(range(10))
    with pytest.raises(ValueError):
        ds.shard(3, 3)
    assert len(ds.take(4)) == 4 and ds.take(4)[3] == (3, 13)
    assert len(ds.take(None)) == 10 and len(ds.take(99)) == 10
    picked = ds.sample(SequentialSampler(3, start=5))
    assert [picked[i][0] for i in range(3)] == [5, 6, 7]
    with pytest.raises(TypeError, match="Sampler"):
        ds.sample([1, 2])
    assert list(FilterSampler(lambda sample: sample[1] > 16, ds)) == [7, 8, 9]


def test_interval_sampler():
    # MXNet's documented examples.
    assert list(IntervalSampler(13, interval=3)) == [0, 3, 6, 9, 12, 1, 4, 7, 10, 2, 5, 8, 11]
    assert list(IntervalSampler(13, interval=3, rollover=False)) == [0, 3, 6, 9, 12]
    assert len(IntervalSampler(13, 3)) == 13
    assert len(IntervalSampler(13, 3, rollover=False)) == 5   # MXNet says 13, then gives 5
    with pytest.raises(ValueError, match="Interval"):
        IntervalSampler(3, 4)


def test_check_sha1(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"trainer" * 300000)       # more than one read block
    assert gluon.utils.check_sha1(str(path), hashlib.sha1(path.read_bytes()).hexdigest())
    assert not gluon.utils.check_sha1(str(path), "0" * 40)


def test_mixed_initializer_in_gluon():
    # MXNet 1.9.1's Gluon refuses Mixed in initialize() (AssertionError); here the first
    # matching pattern's initializer fills each parameter without an initializer of its own.
    net = gluon.nn.Dense(2, in_units=3, bias_initializer=mx.init.Constant(7))
    net.initialize(mx.init.Mixed([".*weight", ".*"], [mx.init.One(), mx.init.Zero()]))
    assert net.weight.data().asnumpy().tolist() == [[1, 1, 1]] * 2
    assert net.bias.data().asnumpy().tolist() == [7, 7]             # its own initializer
    block = gluon.nn.HybridSequential()
    block.add(gluon.nn.Dense(2, in_units=2, weight_initializer=None, use_bias=False))
    block.add(gluon.nn.Dense(1, in_units=2, use_bias=False))
    second = list(block.collect_params().values())[1].name     # prefixes count up
    block.initialize(mx.init.Mixed([second, ".*"], [mx.init.Constant(3), mx.init.One()]))
    assert [p.data().asnumpy().ravel().tolist() for p in block.collect_params().values()] == \
        [[1, 1, 1, 1], [3, 3]]
    with pytest.raises(ValueError, match="did not match any pattern"):
        gluon.nn.Dense(2, in_units=2, use_bias=False).initialize(
            mx.init.Mixed(["nothing"], [mx.init.One()]))
    assert mx.init.Mixed(["a"], ["zeros"]) == mx.init.Mixed(["a"], ["zeros"])
    assert mx.init.Mixed(["a"], ["zeros"]) != mx.init.Mixed(["b"], ["zeros"])


def test_metric_get_config_recreates_the_metric():
    for metric in (mx.metric.Accuracy(axis=1), mx.metric.TopKAccuracy(top_k=3),
                   mx.metric.F1(average="micro"), mx.metric.MCC(average="micro"),
                   mx.metric.CrossEntropy(eps=1e-8), mx.metric.Perplexity(ignore_label=0),
                   mx.metric.RMSE(average="micro"),
                   mx.metric.create(["acc", mx.metric.MAE(name="l1")])):
        config = metric.get_config()
        assert config["metric"] == type(metric).__name__ and config["name"] == metric.name
        again = mx.metric.create(**config)
        assert type(again) is type(metric) and again.get_config() == config
    with pytest.raises(NotImplementedError):
        mx.metric.create(lambda label, pred: 0.0).get_config()


def test_parameter_dtype_is_as_given():
    # MXNet keeps the dtype it was given: a layer's 'float32', numpy.float32 by default, the
    # argument of cast(); code compares it with strings.
    net = gluon.nn.Dense(2, in_units=3)
    net.initialize()
    assert net.weight.dtype == "float32"
    net.cast("float16")
    assert net.weight.dtype == "float16" and net.weight.data().dtype == np.float16
    assert gluon.Parameter("p", shape=(2,)).dtype is np.float32
    param = gluon.Parameter("q", shape=(2,), dtype=np.float64)
    param.initialize()
    assert param.dtype is np.float64 and param.data().dtype == np.float64
    assert "dtype=<class 'numpy.float64'>" in repr(param)     # printed as given, as MXNet's


def test_a_hybridized_block_returns_several_outputs_as_a_list():
    # MXNet's cached graph hands several outputs back as a list (nested ones too); called
    # without hybridize(), the block returns what hybrid_forward returns.
    class Two(gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            return x + 1, (x * 2, x * 3)

    block = Two()
    x = nd.ones((2,))
    assert type(block(x)) is tuple
    block.hybridize()
    for _ in range(2):      # the call that records the graph, then the cached one
        out = block(x)
        assert type(out) is list and type(out[1]) is list
        assert out[1][1].asnumpy().tolist() == [3, 3]


@pytest.mark.parametrize("hybridize", [False, True])
def test_pixel_shuffle(hybridize):
    from trainer_cli.gluon.contrib import nn as cnn
    x = np.arange(2 * 12 * 3 * 4, dtype=np.float32).reshape(2, 12, 3, 4)
    layer = cnn.PixelShuffle2D((2, 3))
    if hybridize:
        layer.hybridize()
    got = layer(nd.array(x)).asnumpy()
    # MXNet's mapping: output (h*f1 + i, w*f2 + j) of channel c is input channel (c*f1 + i)*f2 + j.
    want = x.reshape(2, 2, 2, 3, 3, 4).transpose(0, 1, 4, 2, 5, 3).reshape(2, 2, 6, 12)
    assert got.shape == (2, 2, 6, 12) and np.array_equal(got, want)
    x1 = np.arange(2 * 6 * 5, dtype=np.float32).reshape(2, 6, 5)
    assert np.array_equal(cnn.PixelShuffle1D(3)(nd.array(x1)).asnumpy(),
                          x1.reshape(2, 2, 3, 5).transpose(0, 1, 3, 2).reshape(2, 2, 15))
    x3 = np.arange(16 * 2 * 3 * 2, dtype=np.float32).reshape(1, 16, 2, 3, 2)
    assert np.array_equal(cnn.PixelShuffle3D(2)(nd.array(x3)).asnumpy(),
                          x3.reshape(1, 2, 2, 2, 2, 2, 3, 2).transpose(0, 1, 5, 2, 6, 3, 7, 4)
                          .reshape(1, 2, 4, 6, 4))
    assert repr(layer) == "PixelShuffle2D((2, 3))"


def test_trainer_step_takes_a_one_element_array_as_its_batch_size():
    # d2l's trainer.step(num_tokens) with num_tokens = valid_len.sum(), an int32 array: MXNet
    # refuses it; here it is its value (an integer array divided as integers gave
    # rescale_grad 0: no update at all).
    net = gluon.nn.Dense(1, in_units=2, use_bias=False)
    net.initialize(mx.init.One())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    for batch_size in (nd.array([4], dtype="int32"), nd.array([4.0]), np.int64(4), 4):
        before = net.weight.data().asnumpy()
        with mx.autograd.record():
            loss = net(nd.ones((4, 2))).sum()
        loss.backward()
        trainer.step(batch_size)
        np.testing.assert_allclose(before - net.weight.data().asnumpy(), 0.1, rtol=1e-6)
    with pytest.raises(TypeError, match="batch_size"):
        trainer.step(nd.array([1.0, 2.0]))


def test_mx_contrib_is_reached_as_an_attribute_and_loads_amp_only_when_asked():
    import subprocess
    import sys
    code = ("import sys, trainer_cli as mx\n"
            "text = mx.contrib.text.vocab.Vocabulary\n"
            "assert 'trainer_cli.contrib.amp' not in sys.modules\n"
            "assert 'trainer_cli.gluon.trainer' not in sys.modules\n"
            "print(mx.contrib.amp.init.__module__)\n"
            "from trainer_cli.contrib.amp import amp\n"      # MXNet's module of the same name
            "assert amp.init is mx.contrib.amp.init\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "trainer_cli.contrib.amp.amp"


def test_mx_random_holds_nd_randoms_draws_beside_seed():
    import subprocess
    import sys
    code = ("import trainer_cli as mx\n"
            "mx.random.seed(5)\n"
            "a = mx.random.uniform(-1, 1, shape=(3,)).asnumpy().tolist()\n"
            "mx.random.seed(5)\n"
            "b = mx.nd.random.uniform(-1, 1, shape=(3,)).asnumpy().tolist()\n"
            "assert a == b, (a, b)\n"
            "names = ['uniform', 'normal', 'randn', 'randint', 'poisson', 'exponential', 'gamma',\n"
            "         'multinomial', 'negative_binomial', 'generalized_negative_binomial', 'shuffle']\n"
            "assert all(getattr(mx.random, n) is getattr(mx.nd.random, n) for n in names)\n"
            "from trainer_cli import random\n"
            "print(random.randn(2, 2).shape)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(2, 2)"


def test_mx_contrib_holds_the_contributed_operators_as_mxnet_does():
    from trainer_cli import contrib
    assert contrib.nd is contrib.ndarray and contrib.sym is contrib.symbol
    assert contrib.nd.MultiBoxPrior is nd.contrib.MultiBoxPrior
    anchors = contrib.nd.MultiBoxPrior(nd.zeros((1, 1, 2, 2)), sizes=[0.5])
    assert anchors.shape == (1, 4, 4)
    assert contrib.sym.box_nms(mx.sym.var("x")).list_arguments() == ["x"]


def test_gluon_utils_download_returns_a_file_in_place_and_downloads_nothing(tmp_path):
    from trainer_cli.base import NotDownloadedError
    from trainer_cli.gluon.utils import download, replace_file
    url = "https://example.com/data/train.csv"
    with pytest.raises(NotDownloadedError, match="it is not there.*fetch https://example.com"):
        download(url, path=str(tmp_path))
    target = tmp_path / "train.csv"
    target.write_bytes(b"a,b\n")
    assert download(url, path=str(tmp_path)) == str(target)           # a folder: URL's name
    assert download(url, path=str(target)) == str(target)
    digest = hashlib.sha1(b"a,b\n").hexdigest()
    assert download(url, path=str(target), sha1_hash=digest) == str(target)
    with pytest.raises(NotDownloadedError, match="another SHA-1"):
        download(url, path=str(target), sha1_hash="0" * 40)
    with pytest.raises(NotDownloadedError, match="overwrite=True"):
        download(url, path=str(target), overwrite=True)
    assert mx.test_utils.NotDownloadedError is NotDownloadedError
    (tmp_path / "new").write_bytes(b"x")
    replace_file(str(tmp_path / "new"), str(target))
    assert target.read_bytes() == b"x" and not (tmp_path / "new").exists()
