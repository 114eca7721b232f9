"""A data path that exists but is no regular file (a FIFO, /dev/zero) is said to be that, not
"not found", and never opened (a FIFO would block the read forever)."""
from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from run_helpers import write_config
from trainer_cli.cli import main


@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_a_data_path_that_is_not_a_regular_file(tmp_path, kind):
    path = tmp_path / "train.csv"
    if kind == "fifo":
        os.mkfifo(path)
        said = "a FIFO"
    else:
        os.symlink("/dev/zero", path)
        said = "a character device"
    for command in ("validate", "run"):
        result = CliRunner().invoke(main, [command, str(write_config(tmp_path)), "-o",
                                           "data.train={type: csv, path: %s}" % path])
        assert result.exit_code == 2, (result.output, result.exception)
        assert "not a regular file but %s" % said in result.output, result.output
        assert "not found" not in result.output
