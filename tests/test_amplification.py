"""Amplification refused before the work: compressed ``.npz`` members are checked from the sizes
the archive declares before anything inflates (a checkpoint's archives, written uncompressed,
refuse any compressed member even with matching hashes), and a report of thousands of logged keys
charts a bounded number of them and says what it left out."""
from __future__ import annotations

import io
import json
import shutil
import struct
import zipfile

import numpy as np
import pytest
from click.testing import CliRunner

from run_helpers import latest_dir, one_epoch_run
from trainer_cli._npz import MAX_INFLATED_BYTES, NpzError, read_npz
from trainer_cli.cli import main
from trainer_cli.gluon.param_file import ParamFileError, load_arrays
from trainer_cli.run import layout


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    return one_epoch_run(tmp_path_factory.mktemp("bombs"))


def _rehash(folder):
    meta = json.loads((folder / "meta.json").read_text())
    for name in meta["files"]:
        meta["files"][name] = {"size": (folder / name).stat().st_size,
                               "sha256": layout.file_digest(folder / name)}
    (folder / "meta.json").write_text(json.dumps(meta))


def _compressed_copy(path):
    """The same archive with every member deflated (what np.savez_compressed writes)."""
    with zipfile.ZipFile(path) as zf:
        members = {info.filename: zf.read(info) for info in zf.infolist()}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    path.write_bytes(buf.getvalue())


@pytest.mark.parametrize("name", [layout.PARAMS_FILE, layout.STATES_FILE])
@pytest.mark.parametrize("command", ["resume", "inspect"])
def test_a_compressed_checkpoint_archive_is_refused_before_inflating(finished_run, tmp_path,
                                                                     name, command):
    run_dir = tmp_path / finished_run.name
    shutil.copytree(finished_run, run_dir)
    folder = latest_dir(run_dir)
    _compressed_copy(folder / name)
    _rehash(folder)
    args = [command, run_dir] + (["-o", "epochs=2", "-q"] if command == "resume" else [])
    result = invoke(*args)
    assert result.exit_code == 2, (result.output, result.exception)
    assert str(folder / name) in result.output and "compressed" in result.output
    assert "Traceback" not in result.output


def _claiming(total_bytes):
    """A small deflated .npz whose directory says its one member inflates to ``total_bytes``."""
    buf = io.BytesIO()
    np.savez_compressed(buf, w=np.zeros(4, np.float32))
    data = bytearray(buf.getvalue())
    for signature, offset in ((b"PK\x01\x02", 24), (b"PK\x03\x04", 22)):
        at = data.find(signature)
        struct.pack_into("<I", data, at + offset, total_bytes)
    return bytes(data)


def test_compressed_members_claiming_too_much_are_refused_at_once(tmp_path):
    bomb = _claiming(MAX_INFLATED_BYTES + 1)
    with pytest.raises(NpzError, match="claim"):    # refused from the directory, nothing inflated
        read_npz(io.BytesIO(bomb))
    path = tmp_path / "bomb.params"
    path.write_bytes(bomb)
    with pytest.raises(ParamFileError, match="bomb.params"):
        load_arrays(path)
    from trainer_cli import nd
    from trainer_cli.ndarray.mxnet_format import MXNetFileError

    with pytest.raises(MXNetFileError, match="claim"):
        nd.load(str(path))
    # a compressed archive within the bound still loads (a user's np.savez_compressed)
    buf = io.BytesIO()
    np.savez_compressed(buf, w=np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal(read_npz(io.BytesIO(buf.getvalue()))["w"], np.arange(6))
    with pytest.raises(NpzError, match="compressed"):
        read_npz(io.BytesIO(buf.getvalue()), stored_only=True)


def test_a_report_of_thousands_of_keys_stays_small_and_says_what_it_left_out(finished_run,
                                                                             tmp_path):
    from trainer_cli.report.html_report import MAX_CHARTED_METRICS

    run_dir = tmp_path / finished_run.name
    shutil.copytree(finished_run, run_dir)
    with open(run_dir / layout.METRICS_FILE, "a") as f:
        for i in range(40):
            prefix = "train_" if i % 2 else "val_"
            row = {"kind": "train" if i % 2 else "val", "step": 10 + i, "epoch": 1}
            row.update({prefix + "k%04d" % k: k * 0.001 + i for k in range(2000)})
            f.write(json.dumps(row) + "\n")
    out = tmp_path / "page.html"
    result = invoke("report", run_dir, "--output", out)
    assert result.exit_code == 0, (result.output, result.exception)
    page = out.read_text()
    assert len(page) < 2 << 20, len(page)
    assert 0 < page.count("<svg class=\"chart\"") <= 2 * (MAX_CHARTED_METRICS + 2)
    assert "more metrics not shown (at most %d are charted" % MAX_CHARTED_METRICS in page
    assert "k1999" not in page.split("Best values")[0]
