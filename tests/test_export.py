"""``trainer export``: a run's weights in MXNet's own ``.params`` format, checked against files and
outputs that real MXNet 1.9.1 produced (tests/data/mxnet_export/, made by the script there)."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from trainer_cli.gluon.param_file import load_arrays, save_arrays
from trainer_cli.run import layout, start_run
from trainer_cli.run.model import create

from run_helpers import run_trainer

GOLDEN = Path(__file__).parent / "data" / "mxnet_export"
MANIFEST = json.loads((GOLDEN / "manifest.json").read_text())

CONFIG = """\
model: {name: %(model)s, args: %(args)s, init: xavier}
data:
  train: {type: synthetic, task: classification, num_samples: 40, num_features: %(features)d,
          num_classes: 3, seed: 1}
  split: 0.25
  batch_size: 10
loss: softmax_cross_entropy
metrics: [accuracy]
optimizer: {name: sgd, params: {learning_rate: 0.1}}
steps: 3
validate_every: 1
checkpoint: {every_steps: 1, keep_last: 1, keep_best: val_loss}
"""


def _train(tmp_path, model) -> Path:
    # In this process (the commands under test run as subprocesses): a few steps, quickly.
    spec = MANIFEST[model]
    config = tmp_path / ("%s.yaml" % model)
    config.write_text(CONFIG % {"model": model, "args": json.dumps(spec["args"]),
                                "features": spec["features"]})
    result = start_run(config, run_root=tmp_path / "runs", handle_signals=False)
    assert result.status == "finished"
    return Path(result.summary["run_dir"])


def _plant(folder: Path, weights: dict):
    """Give checkpoint ``folder`` the parameters ``weights`` (in its own order of names), with
    the size and digest its meta.json records, as a run that had trained to them would."""
    params = folder / layout.PARAMS_FILE
    order = list(load_arrays(params))
    assert sorted(order) == sorted(weights)
    save_arrays(params, {name: weights[name] for name in order})
    meta_path = folder / layout.META_FILE
    meta = json.loads(meta_path.read_text())
    meta["files"][layout.PARAMS_FILE] = {"size": params.stat().st_size,
                                         "sha256": layout.file_digest(params)}
    meta_path.write_text(json.dumps(meta))
    layout.verify_checkpoint(folder)


def _golden_weights(model) -> dict:
    with np.load(GOLDEN / ("%s_weights.npz" % model)) as z:
        return {k: z[k] for k in z.files}


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_export_writes_the_params_file_mxnet_writes_and_loads(tmp_path, model):
    run_dir = _train(tmp_path, model)
    weights = _golden_weights(model)
    _plant(layout.checkpoint_dir(run_dir, layout.read_latest(run_dir)), weights)

    out = tmp_path / "out"
    out.mkdir()
    done = run_trainer("export", run_dir, "--format", "mxnet", "-O", out / model)
    assert done.returncode == 0, done.stderr
    exported = out / ("%s.params" % model)
    assert str(exported) in done.stdout
    data = exported.read_bytes()
    # Byte for byte the file MXNet 1.9.1's save_parameters wrote for these weights.
    assert data == (GOLDEN / ("%s_mxnet.params" % model)).read_bytes()
    assert hashlib.sha256(data).hexdigest() == MANIFEST[model]["params_sha256"]

    # Loaded back here into the network the model's builder makes: MXNet's outputs.
    with np.load(GOLDEN / ("%s_outputs.npz" % model)) as z:
        x, expected = z["x"], z["out"]
    from trainer_cli import nd

    net = create(model, **MANIFEST[model]["args"])
    net.load_parameters(str(exported))
    got = net(nd.array(x)).asnumpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_export_npz_from_best_and_refusals(tmp_path):
    run_dir = _train(tmp_path, "mlp")
    best = layout.read_best(run_dir)
    assert best is not None and (run_dir / "checkpoints" / ("step-%d" % best)).is_dir()

    done = run_trainer("export", run_dir, "--from", "best", "--format", "npz",
                       "--output", tmp_path / "w", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["step"] == best and report["path"] == str(tmp_path / "w.npz")
    expected = load_arrays(layout.checkpoint_dir(run_dir, best) / layout.PARAMS_FILE)
    with np.load(tmp_path / "w.npz", allow_pickle=False) as z:
        assert sorted(z.files) == sorted(expected)
        for name in expected:
            assert np.array_equal(z[name], expected[name])

    # A symbolic link as the output is refused, never followed; so is a checkpoint that is not
    # there (in this process: the CLI maps both to exit 2, as the --from check below shows).
    from trainer_cli._outpath import OutputRefused
    from trainer_cli.run.errors import input_error_types
    from trainer_cli.run.export import export_weights

    target = tmp_path / "victim.params"
    target.write_text("keep me")
    os.symlink(target, tmp_path / "link.params")
    with pytest.raises(OutputRefused, match="symbolic link"):
        export_weights(run_dir, tmp_path / "link")
    assert target.read_text() == "keep me"
    assert issubclass(OutputRefused, input_error_types())
    with pytest.raises(layout.RunDirError, match="step-999"):
        export_weights(run_dir, tmp_path / "x", which=999)

    from trainer_cli.cli.errors import CLIError
    from trainer_cli.cli.run_cmd import parse_from

    assert [parse_from(t) for t in (None, "latest", "best", "step-7", "7")] == \
        [None, None, "best", 7, 7]
    with pytest.raises(CLIError, match="--from: expected best, latest or"):
        parse_from("bestest")
