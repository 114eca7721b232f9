"""The runner's pieces without a training run: batch order, data, metrics, checkpoints, layout."""
import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from trainer_cli import cpu, nd
from trainer_cli.gluon import Block
from trainer_cli.gluon.utils import split_data

from trainer_cli.config import names
from trainer_cli.gluon.data import BatchSampler, Sampler
from trainer_cli import metric as metrics
from trainer_cli.run import checkpoint, layout
from trainer_cli.run.data import Arrays, DataError, load_dataset, split_validation
from trainer_cli.run.loop import TrainingLoop
from trainer_cli.run.order import BatchOrder
from trainer_cli.run.rundir import RunLock, create_run_dir


# ------------------------------------------------------------------------------ batch order
class _EpochSampler(Sampler):
    """Yields ``order.permutation(e)`` on its e-th pass, like a reshuffling RandomSampler."""

    def __init__(self, order):
        self.order, self.epoch = order, 0

    def __iter__(self):
        perm = self.order.permutation(self.epoch)
        self.epoch += 1
        return iter(perm.tolist())

    def __len__(self):
        return self.order.n


@pytest.mark.parametrize("n,b", [(10, 3), (10, 5), (7, 10), (3, 8), (12, 4)])
@pytest.mark.parametrize("last_batch", ["keep", "discard", "rollover"])
def test_batch_order_matches_gluon_batch_sampler(n, b, last_batch):
    order = BatchOrder(n, b, last_batch, shuffle=True, seed=3)
    sampler = BatchSampler(_EpochSampler(order), b, last_batch)
    for epoch in range(6):
        expected = [list(batch) for batch in sampler]
        got = [idx.tolist() for idx in order.batches(epoch)]
        assert got == expected, (epoch, got, expected)
        assert order.num_batches(epoch) == len(expected)


def test_batch_order_is_a_pure_function_of_seed_and_epoch():
    a = BatchOrder(50, 8, "rollover", seed=9)
    b = BatchOrder(50, 8, "rollover", seed=9)
    # b jumps straight to epoch 4: nothing depends on having visited the epochs before.
    assert [x.tolist() for x in a.batches(4)] == [x.tolist() for x in b.batches(4)]
    assert a.carry(4).tolist() == b.carry(4).tolist()
    assert BatchOrder(50, 8, seed=9).permutation(1).tolist() != BatchOrder(50, 8, seed=10).permutation(1).tolist()
    assert BatchOrder(5, 2, shuffle=False).batches(3)[0].tolist() == [0, 1]


def test_total_updates_with_accumulation_and_limits():
    order = BatchOrder(100, 10, "keep")
    assert order.updates_in_epoch(0, 3) == 4  # 10 batches: 3 + 3 + 3 + a short window of 1
    assert order.total_updates(5, None, 3) == 20
    assert order.total_updates(5, 7, 3) == 7
    assert order.total_updates(None, 9, 1) == 9
    rollover = BatchOrder(25, 10, "rollover")
    assert rollover.total_updates(4, None, 1) == sum(rollover.num_batches(e) for e in range(4)) == 10


class _Sizes(Block):
    """Records the batch each device gets; its output is the per-sample sum."""

    def __init__(self):
        super().__init__()
        self.seen = []
        self.w = self.params.get("w", shape=(2,))

    def forward(self, x):
        self.seen.append((x.context, x.shape[0]))
        return (x * self.w.data(x.context)).sum(axis=1)


@pytest.mark.parametrize("batch, workers, devices", [(10, 1, 3), (10, 2, 3), (5, 1, 4), (7, 3, 1),
                                                     (2, 1, 3)])
def test_the_runner_splits_batches_with_mxnets_split_data(batch, workers, devices):
    """Across workers, then across each worker's devices, as gluon.utils.split_data cuts them."""
    x = np.arange(batch * 2, dtype=np.float32).reshape(batch, 2)
    contexts = [cpu(i) for i in range(devices)]
    for rank in range(workers):
        net = _Sizes()
        net.initialize(ctx=contexts)
        parts = SimpleNamespace(train=Arrays(x, np.zeros(batch, np.float32)),
                                num_workers=workers, rank=rank, contexts=contexts, net=net,
                                loss=lambda out, label: out)
        loop = TrainingLoop.__new__(TrainingLoop)
        loop.parts, loop.dtype = parts, np.dtype(np.float32)
        loop._forward_backward(np.arange(batch))
        mine = split_data(nd.array(x), workers, even_split=False)[rank]
        want = [p.shape[0] for p in split_data(mine, devices, even_split=False)]
        # A device without samples runs one with a zero head gradient (its gradient is written).
        assert net.seen == [(ctx, n or 1) for ctx, n in zip(contexts, want)]


def test_a_batch_of_one_piece_gives_what_the_splitting_path_gives():
    """One worker on one device: the batch goes through without being cut, to the same bits
    (loss sum, count, labels, outputs and gradients) as the path that splits it."""
    rng = np.random.RandomState(3)
    x, y = rng.randn(9, 2).astype(np.float32), rng.randn(9).astype(np.float32)
    idx = np.array([4, 0, 7, 2, 8])
    found = []
    for one_piece in (False, True):
        net = _Sizes()
        net.initialize()
        net.w.set_data(nd.array([0.5, -1.25]))
        parts = SimpleNamespace(train=Arrays(x, y), num_workers=1, rank=0, contexts=[cpu(0)],
                                net=net, loss=lambda out, label: (out - label) ** 2)
        loop = TrainingLoop.__new__(TrainingLoop)
        loop.parts, loop.dtype, loop._one_piece = parts, np.dtype(np.float32), one_piece
        loss_sum, count, pairs = loop._forward_backward(idx)
        (label, out), = pairs
        found.append((loss_sum, count, label, out.asnumpy(), net.w.grad().asnumpy()))
    (a_sum, a_count, a_label, a_out, a_grad), (b_sum, b_count, b_label, b_out, b_grad) = found
    assert (a_sum, a_count) == (b_sum, b_count) and a_count == 5
    assert np.array_equal(a_label, y[idx]) and np.array_equal(b_label, y[idx])
    assert a_out.tobytes() == b_out.tobytes() and a_grad.tobytes() == b_grad.tobytes()
    assert np.any(b_grad != 0)


class _PassSizes(Block):
    """Records the batch of each pass; its output is the per-sample sum."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, x):
        self.seen.append((x.context, x.shape[0]))
        return x.sum(axis=1)


@pytest.mark.parametrize("features,passes", [
    (2, [23]),                    # 8 bytes a sample: up to 4 x VAL_BATCHES batches a pass
    (8192, [8, 8, 7]),            # 32 KiB a sample: VAL_BATCHES batches a pass
    (5000, [12, 11]),             # between: the whole batches VAL_INPUT_BYTES holds
])
def test_validation_passes_take_whole_batches_over_the_whole_set(features, passes):
    """No tape and no kept activations: a validation pass takes VAL_BATCHES training batches, up
    to four times that for samples of few features, and the set is seen once, in order."""
    from trainer_cli.run.loop import VAL_BATCHES, VAL_INPUT_BYTES
    from trainer_cli.run.state import LoopState

    assert VAL_BATCHES == 4 and VAL_INPUT_BYTES == 256 << 10
    x = np.arange(23 * features, dtype=np.float32).reshape(23, features)
    net = _PassSizes()
    rows = []
    loop = TrainingLoop.__new__(TrainingLoop)
    loop.parts = SimpleNamespace(val=Arrays(x, np.zeros(23, np.float32)), val_metrics={},
                                 contexts=[cpu(0)], net=net, loss=lambda out, label: out * 0)
    loop.config = SimpleNamespace(data=SimpleNamespace(batch_size=2))
    loop.dtype, loop.state, loop.early = np.dtype(np.float32), LoopState(), None
    loop.recorder = SimpleNamespace(row=rows.append)
    loop._validate()
    assert [n for _, n in net.seen] == passes
    assert rows[0]["kind"] == "val" and rows[0]["val_loss"] == 0.0


# ------------------------------------------------------------------------------ data
def _spec(**kw):
    from trainer_cli.config import DataSection
    return DataSection.model_validate({"train": kw}, context={"check_files": False}).train


def test_synthetic_data_is_seeded_and_typed():
    a = load_dataset(_spec(type="synthetic", task="classification", num_samples=50, num_classes=3))
    b = load_dataset(_spec(type="synthetic", task="classification", num_samples=50, num_classes=3))
    assert a.x.dtype == np.float32 and a.x.shape == (50, 10) and a.y.shape == (50,)
    assert np.array_equal(a.x, b.x) and set(np.unique(a.y)) <= {0.0, 1.0, 2.0}
    c = load_dataset(_spec(type="synthetic", task="classification", num_samples=50, seed=1))
    assert not np.array_equal(a.x, c.x)


def test_files_npz_npy_csv(tmp_path):
    x = np.arange(12, dtype=np.float64).reshape(4, 3)
    y = np.array([0, 1, 0, 1])
    np.savez(tmp_path / "d.npz", feats=x, lab=y)
    got = load_dataset(_spec(type="npz", path=str(tmp_path / "d.npz"), x="feats", y="lab"))
    assert np.array_equal(got.x, x.astype(np.float32)) and np.array_equal(got.y, y)
    np.save(tmp_path / "d.npy", np.column_stack([x, y]))
    got = load_dataset(_spec(type="npy", path=str(tmp_path / "d.npy")))
    assert np.array_equal(got.x, x) and np.array_equal(got.y, y)
    (tmp_path / "d.csv").write_text("a,b,label,c\n1,2,0,3\n4,5,1,6\n\n")
    got = load_dataset(_spec(type="csv", path=str(tmp_path / "d.csv"), label="label", columns=["c", "a"]))
    assert got.x.tolist() == [[3, 1], [6, 4]] and got.y.tolist() == [0, 1]
    (tmp_path / "bad.csv").write_text("a,label\n1,0\nx,1\n")
    with pytest.raises(DataError, match=r"bad.csv:3: a: expected a number, got 'x'"):
        load_dataset(_spec(type="csv", path=str(tmp_path / "bad.csv"), label="label"))
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DataError, match="obj.npy"):
        load_dataset(_spec(type="npy", path=str(tmp_path / "obj.npy"), label_path=str(tmp_path / "d.npy")))


def test_split_is_seeded_and_keeps_order():
    data = Arrays(np.arange(20).reshape(20, 1).astype(np.float32), np.arange(20).astype(np.float32))
    split = type("S", (), {"val_fraction": 0.25, "shuffle": True, "seed": 4})
    train, val = split_validation(data, split)
    assert len(train) == 15 and len(val) == 5
    assert sorted(train.y.tolist() + val.y.tolist()) == list(range(20))
    assert train.y.tolist() == sorted(train.y.tolist())
    assert split_validation(data, split)[1].y.tolist() == val.y.tolist()
    split.shuffle = False
    assert split_validation(data, split)[1].y.tolist() == [15, 16, 17, 18, 19]


# ------------------------------------------------------------------------------ metrics
def test_metric_registry_is_what_configs_name():
    assert names.metric_names() == ["accuracy", "cross_entropy", "f1", "mae", "mse", "perplexity",
                                    "rmse", "top_k_accuracy"]
    assert names.lookup("metric", "top_k_accuracy") is metrics.TopKAccuracy
    assert "top_k" in names.metric_params("top_k_accuracy").accepted


def test_metric_values():
    labels = np.array([0, 1, 2, 1])
    logits = np.array([[3, 1, 0], [0, 2, 1], [1, 2, 0], [0, 1, 5]], dtype=np.float32)
    acc = metrics.Accuracy()
    acc.update([labels], [logits])
    assert acc.get() == ("accuracy", 0.5)
    top2 = metrics.TopKAccuracy(top_k=2)
    top2.update([labels], [logits])
    assert top2.get()[1] == 0.75
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    ce_logits, ce_probs = metrics.CrossEntropy(from_logits=True), metrics.CrossEntropy()
    ce_logits.update([labels], [logits])
    ce_probs.update([labels], [probs])
    assert ce_logits.get()[1] == pytest.approx(ce_probs.get()[1], rel=1e-6)
    ppl = metrics.Perplexity(from_logits=True)
    ppl.update([labels], [logits])
    assert ppl.get()[1] == pytest.approx(np.exp(ce_logits.get()[1]))
    y, p = np.array([1.0, 2.0, 4.0]), np.array([[1.5], [2.0], [2.0]])
    for cls, pooled, per_update in ((metrics.MAE, 2.5 / 3, (0.25 + 2) / 2),
                                    (metrics.MSE, 4.25 / 3, (0.125 + 4) / 2),
                                    (metrics.RMSE, np.sqrt(4.25 / 3), (np.sqrt(0.125) + 2) / 2)):
        for average, want in (("micro", pooled), ("macro", per_update)):
            m = cls(average=average)
            m.update([y[:2]], [p[:2]])
            m.update([y[2:]], [p[2:]])  # micro: weighted by samples; macro (MXNet's): by updates
            assert m.get()[1] == pytest.approx(want)
        assert cls().average == "macro"
    f1 = metrics.F1()
    f1.update([np.array([1, 0, 1, 1])], [np.array([[0, 1], [0, 1], [1, 0], [0, 1]])])
    assert f1.get()[1] == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))


def test_a_run_pools_regression_metrics_and_f1_over_samples():
    from trainer_cli.run.build import build_metrics
    config = SimpleNamespace(metrics=[SimpleNamespace(name=n, params={})
                                      for n in ("mae", "mse", "rmse", "f1", "accuracy")])
    built = build_metrics(config)
    assert [built[n].average for n in ("mae", "mse", "rmse", "f1")] == ["micro"] * 4
    kept = build_metrics(SimpleNamespace(metrics=[SimpleNamespace(name="f1",
                                                                  params={"average": "macro"})]))
    assert kept["f1"].average == "macro"


def test_metric_state_round_trips_through_json():
    for m in (metrics.Accuracy(), metrics.F1(), metrics.F1(average="micro"), metrics.RMSE(),
              metrics.RMSE(average="micro")):
        preds = np.array([[1.0, 0.0], [0.2, 0.9], [0.7, 0.1]])
        m.update([np.array([0, 1, 1])], [preds[:, :1] if isinstance(m, metrics.RMSE) else preds])
        restored = type(m)(average=m.average) if hasattr(m, "average") else type(m)()
        restored.set_state(json.loads(json.dumps(m.get_state())))
        assert restored.get() == m.get()


# ------------------------------------------------------------------------------ run dirs and checkpoints
def test_run_dir_is_new_every_time(tmp_path):
    a = create_run_dir(tmp_path, "x", "a: 1\n", now=0)
    b = create_run_dir(tmp_path, "x", "a: 2\n", now=0)
    assert a.name == "x-19700101-000000" and b.name == "x-19700101-000000-2"
    assert (a / "config.yaml").read_text() == "a: 1\n" and (b / "checkpoints").is_dir()


def test_run_lock_excludes_a_second_writer(tmp_path):
    with RunLock(tmp_path):
        with pytest.raises(layout.RunDirError, match="another trainer process"):
            RunLock(tmp_path).acquire()
    RunLock(tmp_path).acquire().release()


def _fake_checkpoint(run_dir, step, value=None):
    folder = layout.checkpoint_dir(run_dir, step)
    folder.mkdir(parents=True)
    files = {}
    for name in (layout.PARAMS_FILE, layout.STATES_FILE):
        (folder / name).write_bytes(b"data %d" % step)
        files[name] = {"size": (folder / name).stat().st_size,
                       "sha256": layout.file_digest(folder / name)}
    meta = {"format": layout.META_FORMAT, "step": step, "files": files,
            "metrics": {} if value is None else {"val_accuracy": value}}
    (folder / layout.META_FILE).write_text(json.dumps(meta))
    (run_dir / layout.CHECKPOINTS / layout.LATEST).write_text("step-%d\n" % step)


def test_prune_keeps_last_latest_and_best(tmp_path):
    for step, value in ((10, 0.5), (20, 0.9), (30, 0.7), (40, 0.6), (50, 0.65)):
        _fake_checkpoint(tmp_path, step, value)
    best = type("K", (), {"metric": "val_accuracy", "mode": "max"})
    checkpoint.prune(tmp_path, keep_last=2, keep_best=best)
    assert [s for s, _ in layout.list_checkpoints(tmp_path)] == [20, 40, 50]
    checkpoint.prune(tmp_path, keep_last=1)
    assert [s for s, _ in layout.list_checkpoints(tmp_path)] == [50]


def test_verify_refuses_files_meta_json_should_not_name(tmp_path):
    _fake_checkpoint(tmp_path, 5)
    meta_path = layout.checkpoint_dir(tmp_path, 5) / layout.META_FILE
    meta = json.loads(meta_path.read_text())
    meta["files"]["../../../etc/passwd"] = {"size": 1, "sha256": "0"}
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(layout.RunDirError, match="unexpected file"):
        layout.verify_checkpoint(layout.checkpoint_dir(tmp_path, 5))


def test_resume_point_names_damage_and_the_intact_fallback(tmp_path):
    _fake_checkpoint(tmp_path, 10)
    _fake_checkpoint(tmp_path, 20)
    (layout.checkpoint_dir(tmp_path, 20) / layout.STATES_FILE).write_bytes(b"garbage")
    with pytest.raises(layout.RunDirError) as err:
        checkpoint.resume_point(tmp_path)
    text = str(err.value)
    assert "trainer.states" in text and "--from step-10" in text
    assert checkpoint.resume_point(tmp_path, 10)[0] == 10
    (tmp_path / "checkpoints" / "latest").write_text("nonsense")
    with pytest.raises(layout.RunDirError, match="latest.*step-10"):
        checkpoint.resume_point(tmp_path)
    assert checkpoint.resume_point(tmp_path / "nowhere") is None


def test_metric_create_takes_mxnets_names_and_aliases():
    from trainer_cli import metric
    # name -> the class MXNet 1.9.1's mx.metric.create gives for it
    mxnet = {"acc": "Accuracy", "accuracy": "Accuracy", "Accuracy": "Accuracy",
             "top_k_acc": "TopKAccuracy", "top_k_accuracy": "TopKAccuracy",
             "topkaccuracy": "TopKAccuracy", "ce": "CrossEntropy", "crossentropy": "CrossEntropy",
             "mae": "MAE", "MSE": "MSE", "rmse": "RMSE", "f1": "F1"}
    for name, cls in mxnet.items():
        assert type(metric.create(name)).__name__ == cls, name
    assert metric.create("top_k_acc", top_k=3).top_k == 3
    acc = metric.Accuracy()
    assert metric.create(acc) is acc
    with pytest.raises(ValueError, match="already an instance"):
        metric.create(acc, axis=0)
    with pytest.raises(ValueError, match="unknown metric 'cross-entropy'"):
        metric.create("cross-entropy")  # not an MXNet name either


def test_a_steps_loss_sum_is_its_float64_sum_and_non_finite_where_numpy_is():
    from trainer_cli.run import loop as run_loop

    rng = np.random.default_rng(3)
    for size in (1, 7, 32, 4096, 4097, 20000):     # both sides of the fsum / NumPy cut
        values = (rng.standard_normal(size) * 10.0 ** rng.integers(-8, 8, size)).astype(np.float32)
        exact = sum(map(float, values.astype(np.float64)))      # left to right, in float64
        got = run_loop._loss_sum(nd.array(values))
        assert got == pytest.approx(exact, rel=1e-12, abs=1e-300)
        assert got == float(values.astype(np.float64).sum()) or size <= run_loop._FSUM_MAX
    inf = np.float32("inf")
    for values, want in (([1.0, inf], inf), ([-inf, 2.0], -inf), ([inf, -inf], None),
                         ([np.nan, 1.0], None)):
        got = run_loop._loss_sum(nd.array(np.array(values, np.float32)))
        assert (got != got) if want is None else got == want


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_the_loops_global_norm_keeps_global_norms_bits_as_the_gradients_change():
    from trainer_cli import autograd
    from trainer_cli.gluon import nn
    from trainer_cli.run import grads

    net = nn.Sequential()
    net.add(nn.Dense(7, in_units=5), nn.Dense(3, in_units=7))
    net.initialize()
    params = list(net.collect_params().values())
    rng = np.random.default_rng(5)
    norm = grads.GlobalNorm()
    for step in range(4):
        x = nd.array(rng.standard_normal((4, 5)).astype(np.float32))
        with autograd.record():
            loss = net(x).sum()
        loss.backward()                          # new values in the same gradient arrays
        if step == 2:                            # values whose squares overflow float32
            params[0].grad()._data[...] = 3e20
        assert norm(params) == grads.global_norm(params)
        assert math.isfinite(norm(params))
    for param in params:                         # other arrays: flattened anew
        param.grad()._data = param.grad()._data.copy()
    params[1].grad()._data[...] = np.nan
    assert norm(params) != norm(params) and grads.global_norm(params) != grads.global_norm(params)


def test_skipped_steps_are_told_one_by_one_then_at_powers_of_ten():
    from trainer_cli.run.loop import SKIPS_TOLD, _tells_skip

    told = [n for n in range(1, 20001) if _tells_skip(n)]
    assert told == list(range(1, SKIPS_TOLD + 1)) + [100, 1000, 10000]
