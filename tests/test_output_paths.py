"""Paths a user names as a command's output: only a regular file or a new path is written to; a
FIFO, a socket, a symbolic link or a directory there is refused (exit 2, naming it) and left as
it was; ``-`` is stdout. ``trainer report`` names its file with ``--output``: ``-o`` means a
``KEY=VALUE`` override everywhere else."""
from __future__ import annotations

import os
import socket
import stat

import pytest
from click.testing import CliRunner

from run_helpers import one_epoch_run
from trainer_cli._outpath import OutputRefused, check_output_path, write_output_text
from trainer_cli.cli import main


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return one_epoch_run(tmp_path_factory.mktemp("outputs"))


def _make(kind, path, tmp_path):
    """A thing of ``kind`` at ``path``; returns a check that it is still there, unchanged."""
    if kind == "fifo":
        os.mkfifo(path)
        return lambda: stat.S_ISFIFO(os.lstat(path).st_mode)
    if kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
        return lambda: stat.S_ISSOCK(os.lstat(path).st_mode)
    if kind == "symlink":
        target = tmp_path / "precious.txt"
        target.write_text("keep me")
        os.symlink(target, path)
        return lambda: os.path.islink(path) and target.read_text() == "keep me"
    if kind == "dangling_symlink":
        os.symlink(tmp_path / "nowhere", path)
        return lambda: os.path.islink(path) and not (tmp_path / "nowhere").exists()
    if kind == "directory":
        path.mkdir()
        return lambda: path.is_dir()
    raise AssertionError(kind)


KINDS = ["fifo", "socket", "symlink", "dangling_symlink", "directory"]


@pytest.mark.parametrize("kind", KINDS)
def test_report_refuses_a_non_regular_output_and_leaves_it_alone(run_dir, tmp_path, kind):
    out = tmp_path / "out.html"
    intact = _make(kind, out, tmp_path)
    result = invoke("report", run_dir, "--output", out)
    assert result.exit_code == 2, (result.output, result.exception)
    assert str(out) in result.output and "Traceback" not in result.output
    assert intact()


@pytest.mark.parametrize("kind", KINDS)
def test_the_library_check_refuses_the_same_kinds(tmp_path, kind):
    out = tmp_path / "x"
    intact = _make(kind, out, tmp_path)
    with pytest.raises(OutputRefused, match="name a regular file or a new path|a folder"):
        write_output_text(out, "text")
    assert intact()


def test_a_regular_file_or_a_new_path_is_written(tmp_path):
    existing = tmp_path / "old.html"
    existing.write_text("old")
    write_output_text(existing, "new")
    assert existing.read_text() == "new"
    check_output_path(tmp_path / "fresh.html")
    with pytest.raises(OutputRefused, match="does not exist"):
        check_output_path(tmp_path / "no" / "such" / "folder.html")


def test_report_to_stdout_with_a_dash(run_dir):
    result = invoke("report", run_dir, "--output", "-")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("<!DOCTYPE html>")
    assert result.output.endswith("</html>\n")  # the page alone
    assert invoke("report", run_dir, "--output", "-", "--json").exit_code == 2


def test_report_dash_o_with_key_value_is_an_error_with_a_hint(run_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("report", run_dir, "-o", "epochs=3")
    assert result.exit_code == 2, result.output
    assert "--output" in result.output and "override" in result.output
    assert not (tmp_path / "epochs=3").exists()


def test_report_dash_o_file_still_works_with_a_warning(run_dir, tmp_path):
    out = tmp_path / "page.html"
    result = CliRunner().invoke(main, ["report", str(run_dir), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "deprecated" in result.stderr and "--output" in result.stderr
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_report_html_a_directory_in_the_run_dir_is_exit_2(run_dir, tmp_path):
    import shutil

    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy)
    (copy / "report.html").unlink(missing_ok=True)
    (copy / "report.html").mkdir()
    result = invoke("report", copy)
    assert result.exit_code == 2, (result.output, result.exception)
    assert "report.html" in result.output and "a folder" in result.output
