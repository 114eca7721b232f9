"""Errors in a user's own model code keep their place: the block (name, class, shapes) and the
user's file:line, in one paragraph that ends with how to see the whole traceback."""
import pytest

import os

from report_helpers import invoke
from run_helpers import only_run_dir, run_trainer
from trainer_cli.cli.errors import DEBUG_HINT

MODEL = '''\
from trainer_cli.gluon import nn


class Net(nn.HybridBlock):
    def __init__(self, in_units=6, flatten_batch=False):
        super().__init__()
        self.flatten_batch = flatten_batch
        with self.name_scope():
            self.hidden = nn.Dense(8, in_units=in_units)
            self.out = nn.Dense(3)

    def hybrid_forward(self, F, x):
        if self.flatten_batch:
            x = F.reshape(x, (1, -1))     # a bug that only a batch of more than one shows
        h = self.hidden(x)
        return self.out(h)


def build(in_units: int = 6, flatten_batch: bool = False):
    return Net(in_units, flatten_batch)


def broken():
    net = Net()
    return net.missing_attribute
'''

CONFIG = """\
model: net.py:build
data:
  train: {type: synthetic, task: classification, num_samples: 40, num_features: 6,
          num_classes: 3, seed: 5}
  batch_size: 8
loss: softmax_cross_entropy
steps: 2
"""


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "net.py").write_text(MODEL)
    (tmp_path / "c.yaml").write_text(CONFIG)
    return tmp_path


def _run(folder, *overrides, **env):
    args = [a for o in overrides for a in ("-o", o)]
    return run_trainer("run", "c.yaml", "--run-dir", "runs", *args, cwd=folder,
                       env=dict(os.environ, **env))


def _invoke(folder, *overrides):
    """The same command in this process (for failures before training: no start-up to pay)."""
    args = [a for o in overrides for a in ("-o", o)]
    done = invoke("run", folder / "c.yaml", "--run-dir", folder / "runs", *args)
    done.returncode = done.exit_code
    return done


def test_a_shape_error_names_the_block_its_shapes_and_the_users_line(folder):
    done = _invoke(folder, "model.args.in_units=7")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == DEBUG_HINT and len(lines) == 2, done.stderr
    text = lines[0]
    assert text.startswith("error: the model's first forward pass")
    assert "ShapeError in block 'net0_dense0' (Dense; input (1, 6); weight (8, 7), bias (8,))" in text
    assert "at %s:15 (in hybrid_forward)" % (folder / "net.py") in text
    # The operator's own words stay.
    assert ("FullyConnected: weight shape (8, 7) and bias shape (8,) does not fit data shape "
            "(1, 6)") in text


def test_a_shape_error_during_training_is_told_the_same_way_and_logged(folder):
    done = _run(folder, "model.args.flatten_batch=true")
    assert done.returncode == 1
    want = ("ShapeError in block 'net0_dense0' (Dense; input (1, 48); weight (8, 6), bias (8,)), "
            "at %s:15 (in hybrid_forward)" % (folder / "net.py"))
    assert "error: after step 0: " + want in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == DEBUG_HINT
    log = (only_run_dir(folder / "runs") / "train.log").read_text()
    assert want in log


def test_a_build_that_raises_shows_its_line(folder):
    done = _invoke(folder, "model=net.py:broken")
    assert done.returncode == 1
    assert ("broken(**{}) failed at %s:25 (in broken): AttributeError: 'Net' object has no "
            "attribute 'missing_attribute'" % (folder / "net.py")) in done.stderr
    assert "Traceback" not in done.stderr and done.stderr.strip().endswith(DEBUG_HINT)


def test_trainer_debug_prints_the_whole_traceback(folder):
    done = _run(folder, "model.args.in_units=7", TRAINER_DEBUG="1")
    assert done.returncode == 1
    assert "Traceback (most recent call last)" in done.stderr
    assert 'net.py", line 15, in hybrid_forward' in done.stderr
    assert DEBUG_HINT not in done.stderr


def test_bad_input_exits_2_without_the_hint(folder):
    done = _invoke(folder, "steps=0")
    assert done.returncode == 2 and DEBUG_HINT not in done.stderr
