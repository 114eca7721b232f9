"""Names, paths and metric keys from a run directory reach the terminal with their control
characters escaped (``\\x1b``) and rich markup printed as itself: a folder named ``ESC ] 0;title
BEL`` or ``ESC [2J`` cannot retitle or clear the terminal of whoever lists the runs."""
from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from run_helpers import no_fsync, only_run_dir, write_config
from trainer_cli._printable import printable, printable_tree
from trainer_cli.cli import main
from trainer_cli.run import layout

HOSTILE = "evil\x1b]0;pwned\x07[red]x[bold]\x1b[2J\u202e\x9b31m"
KEY = "train_l\x1b[31moss"


def invoke(*args):
    # color=True: click would otherwise strip ANSI sequences itself and hide what we print
    return CliRunner().invoke(main, [str(a) for a in args], color=True, env={"COLUMNS": "400"})


def _clean(text):
    for raw in ("\x1b", "\x07", "\u202e", "\x9b"):
        assert raw not in text, repr(text)


@pytest.fixture(scope="module")
def hostile_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("escape")
    mp = pytest.MonkeyPatch()
    no_fsync(mp)
    try:
        result = invoke("run", write_config(root), "--run-dir", root / "made", "-q",
                        "-o", "epochs=1")
    finally:
        mp.undo()
    assert result.exit_code == 0, result.output
    run_dir = root / "runs" / (HOSTILE + "-20261127-000000")
    (root / "runs").mkdir()
    shutil.copytree(only_run_dir(root / "made"), run_dir)
    with open(run_dir / layout.METRICS_FILE, "a") as f:
        f.write(json.dumps({"kind": "train", "step": 7, "epoch": 1, KEY: 0.5}) + "\n")
    return root / "runs", run_dir


def test_printable_escapes_controls_and_keeps_the_rest():
    assert printable("a\x1b[2Jb\x07") == "a\\x1b[2Jb\\x07"
    assert printable("caf\u00e9 \u6f22") == "caf\u00e9 \u6f22"
    assert printable("line\nnext", keep_newlines=True) == "line\nnext"
    assert printable("line\nnext") == "line\\x0anext"
    assert printable("bad\udcff") == "bad\\xff"        # an undecodable byte of a file name
    assert printable_tree({"k\x1b": ["v\x07", 1.5]}) == {"k\\x1b": ["v\\x07", 1.5]}


@pytest.mark.parametrize("command", ["runs", "plot", "inspect", "report", "resume_last",
                                     "plot_unknown_key"])
def test_hostile_names_and_keys_are_printed_escaped(hostile_root, command, tmp_path):
    root, run_dir = hostile_root
    args = {"runs": ["runs", root], "plot": ["plot", run_dir, "-m", KEY],
            "inspect": ["inspect", run_dir],
            "report": ["report", run_dir, "--output", tmp_path / "r.html"],
            "resume_last": ["resume", "--last", "--run-dir", tmp_path / "copy", "-o", "epochs=2"],
            "plot_unknown_key": ["plot", run_dir, "-m", "nope"]}[command]
    if command == "resume_last":
        shutil.copytree(root, tmp_path / "copy")
    result = invoke(*args)
    assert "Traceback" not in result.output
    assert not isinstance(result.exception, (UnicodeError, AttributeError, TypeError)), result.exception
    _clean(result.output)
    unwrapped = "".join(result.output.split())  # rich may wrap a long name
    if command in ("runs", "plot", "inspect", "resume_last"):
        assert "evil\\x1b]0;pwned\\x07[red]x[bold]" in unwrapped, result.output
    if command in ("plot", "inspect", "plot_unknown_key"):
        assert "train_l\\x1b[31moss" in unwrapped, result.output
