"""mx.profiler: a working per-operator profiler (counts, backward and optimizer entries, pause,
the Chrome trace dump), and nothing of it left in place once stopped; the Domain, Task, Frame,
Event, Counter and Marker objects, recorded under MXNet 1.9.1's categories."""
import json

import numpy
import pytest

import trainer_cli as mx
from trainer_cli import autograd, gluon, nd, profiler
from trainer_cli.ndarray import NDArray, ops


@pytest.fixture
def clean_profiler():
    profiler.set_state("stop")
    profiler.dumps(reset=True)
    yield
    profiler.set_state("stop")
    profiler.resume()
    profiler.dumps(reset=True)


def _counts():
    table = json.loads(profiler.dumps(format="json"))["operator"]
    return {name: entry["Count"] for name, entry in table.items()}


def test_counts_each_outermost_operator_and_its_backward(clean_profiler):
    a = nd.array(numpy.arange(6, dtype=numpy.float32).reshape(2, 3))
    b = nd.ones((3, 4))
    a.attach_grad()
    profiler.set_state("run")
    assert profiler.state() == "run"
    with autograd.record():
        c = nd.dot(a, b)
        d = nd.relu(c) + c
        e = d.sum()
    e.backward()
    profiler.set_state("stop")
    counts = _counts()
    assert counts["dot"] == 1 and counts["relu"] == 1 and counts["elemwise_add"] == 1
    assert counts["sum"] == 1
    assert counts["_backward_dot"] == 1 and counts["_backward_relu"] == 1
    assert counts["_backward_elemwise_add"] == 1 and counts["_backward_sum"] == 1
    numpy.testing.assert_array_equal(a.grad.asnumpy(), numpy.full((2, 3), 8, numpy.float32))


def test_a_training_step_shows_layers_loss_and_update(clean_profiler):
    net = gluon.nn.Dense(4, in_units=3)
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 0.1})
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    x, y = nd.ones((5, 3)), nd.array([0, 1, 2, 3, 0])
    profiler.set_config(profile_all=True, aggregate_stats=True)
    profiler.set_state("run")
    for _ in range(2):
        with autograd.record():
            out = loss(net(x), y)
        out.backward()
        trainer.step(5)
    profiler.pause()
    net(x)                                              # not recorded while paused
    profiler.resume()
    profiler.set_state("stop")
    counts = _counts()
    assert counts["FullyConnected"] == 2 and counts["_backward_FullyConnected"] == 2
    assert counts["softmax_cross_entropy"] == 2 and counts["adam_update"] == 2
    table = profiler.dumps(sort_by="count")
    assert "Profile Statistics" in table and "Avg Time (ms)" in table
    assert "adam_update" in table
    profiler.dumps(reset=True)
    assert _counts() == {}


def test_dump_writes_a_chrome_trace(clean_profiler, tmp_path):
    path = tmp_path / "prof.json"
    profiler.set_config(filename=str(path))
    profiler.set_state("run")
    nd.exp(nd.ones((2, 2)))
    assert profiler.dump() == str(path)
    assert profiler.state() == "stop"                   # finished=True stops it, as MXNet
    trace = json.loads(path.read_text())
    names = [event["name"] for event in trace["traceEvents"]]
    assert "exp" in names and all(event["ph"] == "X" and event["dur"] >= 0
                                  for event in trace["traceEvents"])


def test_nothing_stays_in_place_after_stop(clean_profiler):
    before = (nd.dot, ops.dot, ops._fully_connected, NDArray.__add__, NDArray.__getitem__,
              gluon.loss.softmax_ce_batch_mean)
    profiler.set_state("run")
    assert nd.dot is not before[0] and NDArray.__add__ is not before[3]
    profiler.set_state("run")                           # twice: still one layer of timing
    profiler.set_state("stop")
    after = (nd.dot, ops.dot, ops._fully_connected, NDArray.__add__, NDArray.__getitem__,
             gluon.loss.softmax_ce_batch_mean)
    assert all(x is y for x, y in zip(before, after))


def test_bad_arguments_say_so(clean_profiler):
    with pytest.raises(ValueError, match="unknown option.*profile_everything"):
        profiler.set_config(profile_everything=True)
    with pytest.raises(ValueError, match="'run' or 'stop'"):
        profiler.set_state("go")
    with pytest.raises(ValueError, match="sort_by"):
        profiler.dumps(sort_by="name")
    with pytest.raises(AttributeError):
        profiler.Domains
    with pytest.raises(ValueError, match="scope"):
        profiler.Domain("d").new_marker("m").mark("everywhere")
    assert mx.profiler is profiler


def test_the_objects_record_under_mxnets_categories(clean_profiler, tmp_path):
    # The categories, phases and counter values MXNet 1.9.1 writes for the same calls (its
    # trace: tasks "mydomain", frames "mydomain,frame", events "event", counters "C" events of
    # the domain with the value after each change, markers "mydomain,instant_marker").
    domain = profiler.Domain("mydomain")
    task, frame = domain.new_task("mytask"), domain.new_frame("myframe")
    event, marker = profiler.Event("myevent"), domain.new_marker("mymarker")
    counter = domain.new_counter("mycounter", 5)        # not running: the value only
    task.start()
    task.stop()                                         # not running: nothing recorded
    profiler.set_config(filename=str(tmp_path / "trace.json"))
    profiler.set_state("run")
    counter.set_value(5)
    for _ in range(2):
        task.start()
        task.stop()
    frame.start()
    frame.stop()
    event.start()
    event.stop()
    counter += 3
    counter.increment(2)
    counter.decrement()
    counter -= 4
    counter.set_value(42)
    marker.mark()
    marker.mark("thread")
    profiler.pause()
    task.start()
    task.stop()
    marker.mark()
    counter.increment()
    profiler.resume()
    frame.stop()                                        # no start: nothing
    profiler.dump()
    with open(tmp_path / "trace.json") as f:
        events = json.load(f)["traceEvents"]
    mine = [(e["cat"], e["name"], e["ph"]) for e in events]
    assert mine.count(("mydomain", "mytask", "X")) == 2
    assert mine.count(("mydomain,frame", "myframe", "X")) == 1
    assert mine.count(("event", "myevent", "X")) == 1
    assert [e["args"]["mycounter"] for e in events if e["ph"] == "C"] == [5, 8, 10, 9, 5, 42]
    assert [e["s"] for e in events if e["ph"] == "i"] == ["p", "t"]
    assert {e["cat"] for e in events if e["ph"] == "i"} == {"mydomain,instant_marker"}
    table = json.loads(profiler.dumps(format="json"))
    assert table["mydomain"]["mytask"]["Count"] == 2
    assert table["mydomain"]["mycounter"] == {"Count": 6, "Min": 5, "Max": 42, "Last": 42}
    assert table["mydomain,frame"]["myframe"]["Count"] == 1
    assert table["event"]["myevent"]["Count"] == 1
    assert table["mydomain,instant_marker"]["mymarker"]["Count"] == 2
    text = profiler.dumps()
    sections = [line for line in text.splitlines() if line in
                ("event", "mydomain", "mydomain,frame", "mydomain,instant_marker")]
    assert sections == ["event", "mydomain", "mydomain,frame", "mydomain,instant_marker"]
    assert str(domain) == "mydomain" and str(task) == "mytask" and str(counter) == "mycounter"
