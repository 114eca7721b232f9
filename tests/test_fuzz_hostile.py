"""A small seeded fuzz harness over what a user or a damaged run directory hands the program:
configs, a checkpoint's files (meta.json, trainer.states, params.npz, with hashes made to
match so the damage reaches the parsers) and metrics.jsonl lines. Each case may succeed, or fail
with one of the designated input errors (the CLI's exit 2); anything else (a KeyError, an
OverflowError, a MemoryError, a hang) fails the test and prints the case that caused it.

Seeded and bounded (a few seconds): the same cases every run, so a failure reproduces. Raise
``FUZZ_CASES`` (and change ``FUZZ_SEED``) in the environment to search longer locally.
"""
from __future__ import annotations

import io
import json
import os
import random
import shutil
import signal
import zipfile
from contextlib import contextmanager

import pytest
from click.testing import CliRunner
from rich.console import Console

from run_helpers import SMALL, no_fsync, only_run_dir, write_config
from trainer_cli.cli import main
from trainer_cli.config import load as config_load
from trainer_cli.config.yamlio import parse_yaml
from trainer_cli.report.history import load_history
from trainer_cli.report.html_report import render_report
from trainer_cli.report.inspect_run import inspect_path
from trainer_cli.report.terminal_plot import plot_report
from trainer_cli.report.render import render_inspect, render_plot
from trainer_cli.report.runs_list import list_runs
from trainer_cli.run import layout
from trainer_cli.run import session as _session
from trainer_cli.run.build import build
from trainer_cli.run.checkpoint import load_checkpoint
from trainer_cli.run.errors import input_error_types

CASES = int(os.environ.get("FUZZ_CASES", "40"))
SEED = int(os.environ.get("FUZZ_SEED", "20261127"))
DESIGNATED = input_error_types()

# Values a hostile hand puts where a scalar was: sizes, signs, types, text a terminal obeys.
HOSTILE_VALUES = [
    0, -1, 1, 2 ** 31, 2 ** 63, 10 ** 40, 4000000000, 1e308, -1e308, 1e-320, float("nan"),
    float("inf"), True, None, "", "x" * 300, "\x1b]0;title\x07", "[red]x", "\u202e", "\0",
    [], [4000000000], [-1], {}, {"a": 1}, "1e11", "../../etc/passwd", "/dev/zero",
]


@contextmanager
def deadline(seconds, case):
    def expired(signum, frame):
        raise AssertionError("case %r still running after %d s" % (case, seconds))
    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _designated_or_success(call, case):
    try:
        with deadline(20, case):
            return call()
    except DESIGNATED:
        return None
    except Exception as exc:  # noqa: BLE001 - the harness reports what escaped, and where
        raise AssertionError("case %r raised %s: %s" % (case, type(exc).__name__, exc)) from exc


# ------------------------------------------------------------------------------------ configs

def _leaves(data, path=()):
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _leaves(value, path + (key,))
    elif isinstance(data, list) and data:
        for k, value in enumerate(data):
            yield from _leaves(value, path + (k,))
    else:
        yield path


def _set(data, path, value):
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


def _mutated_config(rng, base: dict):
    data = json.loads(json.dumps(base))
    how = rng.choice(["value", "value", "value", "delete", "unknown", "section"])
    path = rng.choice(list(_leaves(data)))
    if how == "value":
        _set(data, path, rng.choice(HOSTILE_VALUES))
    elif how == "delete" and path:
        parent = data
        for key in path[:-1]:
            parent = parent[key]
        del parent[path[-1]]
    elif how == "unknown":
        data["nmae" if rng.random() < 0.5 else "\x1b[2J"] = rng.choice(HOSTILE_VALUES)
    else:  # a whole section replaced by something of another type
        _set(data, path[:1], rng.choice(HOSTILE_VALUES))
    return data


def test_fuzzed_configs_validate_or_fail_with_a_config_error():
    rng = random.Random(SEED)
    base, _, issues = parse_yaml(SMALL, "small.yaml")
    assert not issues
    text = SMALL.encode()
    for n in range(CASES * 3):
        if n % 4 == 3:  # bytes damaged: truncated, or a random byte changed
            raw = bytearray(text[:rng.randrange(len(text))] if rng.random() < 0.5 else text)
            if raw:
                raw[rng.randrange(len(raw))] = rng.randrange(256)
            case = ("bytes", bytes(raw))

            def call(raw=raw):
                config = config_load.validate_config_text(bytes(raw).decode("utf-8", "replace"),
                                                          filename="fuzz.yaml")
                return config.resolved_yaml()
        else:
            data = _mutated_config(rng, base)
            case = ("data", data)

            def call(data=data):
                return config_load.validate_config_data(data).resolved_yaml()
        _designated_or_success(call, case)


# --------------------------------------------------------------------------- a checkpoint

@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    mp = pytest.MonkeyPatch()
    no_fsync(mp)
    try:
        result = CliRunner().invoke(main, ["run", str(write_config(root)), "--run-dir",
                                           str(root / "runs"), "-q", "-o", "epochs=1"])
    finally:
        mp.undo()
    assert result.exit_code == 0, result.output
    return only_run_dir(root / "runs")


def _rehash(folder):
    meta = json.loads((folder / layout.META_FILE).read_text())
    for name in meta["files"]:
        meta["files"][name] = {"size": (folder / name).stat().st_size,
                               "sha256": layout.file_digest(folder / name)}
    (folder / layout.META_FILE).write_text(json.dumps(meta))


def _damage_json(rng, text):
    data = json.loads(text)
    paths = list(_leaves(data))
    for _ in range(rng.randint(1, 3)):
        _set(data, rng.choice(paths), rng.choice(HOSTILE_VALUES))
    return json.dumps(data)


def _damage_bytes(rng, data: bytes) -> bytes:
    data = bytearray(data)
    how = rng.choice(["flip", "flip", "truncate", "member"])
    if how == "truncate":
        return bytes(data[:rng.randrange(len(data))])
    if how == "member":  # a member's .npy header rewritten to claim another shape or dtype
        with zipfile.ZipFile(io.BytesIO(bytes(data))) as zf:
            members = {info.filename: zf.read(info) for info in zf.infolist()}
        name = rng.choice(sorted(members))
        shape = rng.choice([(4000000000,), (-1,), (2 ** 40, 2 ** 40), (), (0,), (3, 5)])
        descr = rng.choice(["<f4", "<f8", "|O", "<i8", "|b1", "<c16"])
        header = "{'descr': '%s', 'fortran_order': False, 'shape': %r, }" % (descr, shape)
        header += " " * (63 - (len(header) + 10) % 64) + "\n"
        members[name] = (b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little")
                         + header.encode() + members[name][-64:])
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            for member, payload in members.items():
                zf.writestr(member, payload)
        return buf.getvalue()
    for _ in range(rng.randint(1, 8)):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return bytes(data)


def test_fuzzed_checkpoint_files_load_or_fail_with_a_designated_error(finished_run, tmp_path,
                                                                      monkeypatch):
    no_fsync(monkeypatch)
    rng = random.Random(SEED + 1)
    config = _session.read_run_config(finished_run)
    parts = build(config, config_file=finished_run / layout.CONFIG_FILE, run_dir=finished_run)
    names = [layout.META_FILE, layout.STATES_FILE, layout.PARAMS_FILE]
    for n in range(CASES // 2):
        run_dir = tmp_path / ("r%d" % n)
        shutil.copytree(finished_run, run_dir)
        folder = layout.checkpoint_dir(run_dir, layout.read_latest(run_dir))
        name = names[n % len(names)]
        path = folder / name
        if name == layout.META_FILE:
            path.write_text(_damage_json(rng, path.read_text()))
        else:
            path.write_bytes(_damage_bytes(rng, path.read_bytes()))
            _rehash(folder)
        case = (name, n)

        def resume_parts(folder=folder):
            meta, _ = load_checkpoint(folder, parts.net, parts.trainer, parts.kvstore,
                                      parts.contexts)
            return _session._loop_state(meta, meta["step"], folder, parts)

        _designated_or_success(resume_parts, case)

        def shown(run_dir=run_dir):
            report = inspect_path(run_dir)
            render_inspect(Console(file=io.StringIO(), width=120), report)
            return report

        _designated_or_success(shown, case)
        shutil.rmtree(run_dir)


# ------------------------------------------------------------------------ metrics.jsonl rows

def _hostile_row(rng):
    row = {"kind": rng.choice(["train", "val", "epoch", 3, None]),
           "step": rng.choice([0, 1, 7, -1, 2 ** 70, "6", 1.5, None]),
           "epoch": rng.choice([1, -3, 2 ** 70, None, "1"])}
    for _ in range(rng.randint(0, 6)):
        key = rng.choice(["train_loss", "val_accuracy", "lr", "time", "train_\x1b[31mx",
                          "val_" + "k" * 200, "skipped", "samples"])
        row[key] = rng.choice(HOSTILE_VALUES + [0.5, 2.5, 1e9])
    return row


def test_fuzzed_metrics_rows_never_break_the_readers(finished_run, tmp_path):
    rng = random.Random(SEED + 2)
    for n in range(CASES // 4):
        run_dir = tmp_path / ("m%d" % n)
        shutil.copytree(finished_run, run_dir)
        with open(run_dir / layout.METRICS_FILE, "a") as f:
            for _ in range(rng.randint(1, 12)):
                line = json.dumps(_hostile_row(rng))
                if rng.random() < 0.2:
                    line = line[:rng.randrange(len(line))]
                f.write(line + "\n")
        case = ("metrics", n, (run_dir / layout.METRICS_FILE).read_text()[-2000:])

        def read_all(run_dir=run_dir):
            history = load_history(run_dir)
            keys = history.metric_keys()[:3]
            render_plot(Console(file=io.StringIO(), width=100), plot_report(history, keys), 80)
            render_report([history])
            list_runs(run_dir.parent)
            return history

        _designated_or_success(read_all, case)
        shutil.rmtree(run_dir)


# ------------------------------------------- what predict reads, the best pointer, env.json

def _damaged_inputs(rng, folder):
    """``(name, bytes)`` of predict inputs: a valid .npy, .npz or .csv damaged at random."""
    import numpy as np

    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    buf = io.BytesIO()
    np.save(buf, x)
    npy = buf.getvalue()
    buf = io.BytesIO()
    np.savez(buf, x=x)
    npz = buf.getvalue()
    text = b"a,b,c\n" + b"\n".join(b",".join(b"%g" % v for v in row) for row in x) + b"\n"
    for n in range(CASES):
        suffix, good = [(".npy", npy), (".npz", npz), (".csv", text)][n % 3]
        if suffix == ".npz" and n % 2:
            data = _damage_bytes(rng, good)   # a member's header rewritten, bits, truncation
        else:
            data = bytearray(good[:rng.randrange(1, len(good) + 1)] if rng.random() < 0.3 else good)
            for _ in range(rng.randint(1, 6)):
                data[rng.randrange(len(data))] = rng.choice(
                    [0, 0xff, ord(","), ord("\n"), ord("("), ord("9"), rng.randrange(256)])
        yield "in%d%s" % (n, suffix), bytes(data)


def test_fuzzed_predict_inputs_are_read_or_refused_with_a_data_error(tmp_path):
    from trainer_cli.run.predict import read_input

    rng = random.Random(SEED + 3)
    for name, data in _damaged_inputs(rng, tmp_path):
        path = tmp_path / name
        path.write_bytes(data)
        _designated_or_success(lambda path=path: read_input(path), (name, data[:200]))
        path.unlink()


def test_fuzzed_best_pointers_and_env_records_are_refused_or_noted(finished_run, tmp_path):
    from trainer_cli.run.checkpoint import resume_point
    from trainer_cli.run.env_record import ENV_FILE, env_changes

    rng = random.Random(SEED + 4)
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    pointer = run_dir / layout.CHECKPOINTS / layout.BEST
    contents = [b"step-1", b"step-%d" % (2 ** 70), b"step--1", b"../../etc", b"latest",
                b"step-0\x00", b"\xff\xfe", b"step-1\n" * 2000, b"", b" step-1 \n"]
    for n in range(CASES // 2):
        if os.path.lexists(pointer):
            (os.rmdir if pointer.is_dir() and not pointer.is_symlink() else os.unlink)(pointer)
        how = n % 5
        if how == 0:
            os.mkfifo(pointer)
        elif how == 1:
            os.symlink(rng.choice(["/dev/zero", "/etc/passwd", "latest", "nowhere"]), pointer)
        elif how == 2:
            os.mkdir(pointer)
        else:
            pointer.write_bytes(rng.choice(contents))
        _designated_or_success(lambda: resume_point(run_dir, "best"), ("best", how, n))
        # env.json: damage is a note on resume, never an error.
        (run_dir / ENV_FILE).write_text(_damage_json(rng, json.dumps(
            {"format": 1, "salt": "00ff", "variables": {"TOKEN": {"set": True, "sha256": "ab"}}})))
        with deadline(20, ("env", n)):
            notes = env_changes(run_dir, {"TOKEN": "x", "OTHER": None})
        assert all(isinstance(note, str) for note in notes)


# ------------------------------------------------- library readers: CSVIter, SymbolBlock

def test_fuzzed_csv_and_symbol_files_are_read_or_refused_with_their_errors(tmp_path):
    from trainer_cli import gluon, io as mxio, nd
    from trainer_cli.io.csv_iter import CSVError
    from trainer_cli.gluon.parameter import DeferredInitializationError
    from trainer_cli.symbol.symbol import MXNetSymbolError

    rng = random.Random(SEED + 5)
    graph = {"nodes": [{"op": "null", "name": "data", "inputs": []},
                       {"op": "null", "name": "w", "inputs": []},
                       {"op": "FullyConnected", "name": "fc", "inputs": [[0, 0, 0], [1, 0, 0]],
                        "attrs": {"num_hidden": "2", "no_bias": "True"}},
                       {"op": "Reshape", "name": "r", "inputs": [[2, 0, 0]],
                        "attrs": {"shape": "(-1, 2)"}}],
             "arg_nodes": [0, 1], "heads": [[3, 0, 0]], "attrs": {"mxnet_version": ["int", 10901]}}
    hostile_attrs = ["(" * 3000 + ")" * 3000, "1" * 5000, "1e99999", "(2, -7)", "[None, x]",
                     "nan", "-0", "(,)", "((1, 2), (3,))", "\x00", "9" * 41]
    csv_text = "1,2,3\n4,5,6\n"
    params = tmp_path / "s-0000.params"
    nd.save(str(params), {"arg:w": nd.ones((2, 3))})
    for n in range(CASES // 2):
        data = json.loads(json.dumps(graph))
        if n % 2:
            _set(data, rng.choice(list(_leaves(data))), rng.choice(HOSTILE_VALUES))
        else:
            node = rng.choice(data["nodes"][2:])
            node["attrs"][rng.choice(sorted(node["attrs"]))] = rng.choice(hostile_attrs)
        path = tmp_path / "s-symbol.json"
        path.write_text(json.dumps(data))
        case = ("symbol", data)

        def imported(path=path):
            block = gluon.SymbolBlock.imports(str(path), ["data"], str(params),
                                              allow_missing=True, ignore_extra=True)
            return block(nd.ones((1, 3)))
        with deadline(20, case[0]):
            try:
                imported()
            except RecursionError as exc:
                raise AssertionError("case %s raised RecursionError" % repr(case)[:600]) from exc
            except (MXNetSymbolError, ValueError, TypeError, KeyError, RuntimeError,
                    DeferredInitializationError):
                pass    # errors that name the node, the parameter or the file, as MXNet's do
            except Exception as exc:  # noqa: BLE001 - the harness reports what escaped
                raise AssertionError("case %s raised %s: %s"
                                     % (repr(case)[:600], type(exc).__name__, str(exc)[:300]))

        raw = bytearray(csv_text.encode())
        for _ in range(rng.randint(1, 4)):
            raw[rng.randrange(len(raw))] = rng.choice([0, 0xff, ord(","), ord("\n"), ord("9"),
                                                       ord("-"), ord("e")])
        raw += rng.choice([b"", b"9" * 30 + b",1,1\n", b"1," * 2000 + b"1\n"])
        path = tmp_path / "c.csv"
        path.write_bytes(bytes(raw))
        dtype = rng.choice(["float32", "int32", "uint8", "float16"])
        case = ("csv", dtype, bytes(raw)[:200])
        with deadline(20, case[:2]):
            try:
                mxio.CSVIter(data_csv=str(path), data_shape=(3,), batch_size=1, dtype=dtype)
            except CSVError:
                pass
            except Exception as exc:  # noqa: BLE001 - the harness reports what escaped
                raise AssertionError("case %r raised %s: %s"
                                     % (case, type(exc).__name__, str(exc)[:300]))
