"""Hostile or malformed input found by issue 13 (items 4, 8, 10): every case exits 2 with the
file and the position or row, never a traceback, a MemoryError or a RecursionError."""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from run_helpers import SMALL, write_config
from trainer_cli.cli import main
from trainer_cli.config import ConfigError, validate_config_text
from trainer_cli.config.yamlio import MAX_ALIAS_VALUES, MAX_DEPTH, MAX_DOCUMENT_CHARS, parse_yaml


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def alias_bomb(levels=7, width=9) -> str:
    # About 300 bytes that PyYAML alone would expand to width**levels values.
    lines = ["a0: &a0 [" + ", ".join(["x"] * width) + "]"]
    lines += ["a%d: &a%d [" % (i, i) + ", ".join(["*a%d" % (i - 1)] * width) + "]"
              for i in range(1, levels + 1)]
    return SMALL + "\n".join(lines) + "\n"


HOSTILE = {
    "alias_bomb": (alias_bomb(), "aliases expand to more than %d values" % MAX_ALIAS_VALUES),
    "self_merge": (SMALL + "m: &m {<<: *m}\n", "'<<' merges a mapping that contains it"),
    "deep": (SMALL + "deep: " + "[" * 3000 + "]" * 3000 + "\n",
             "nested more than %d levels deep" % MAX_DEPTH),
    "nul": (SMALL.replace("epochs: 3", "epochs: 3\x00"), "unacceptable character #x0000"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
@pytest.mark.parametrize("command", ["validate", "run"])
def test_hostile_yaml_is_refused_with_position(tmp_path, case, command):
    text, message = HOSTILE[case]
    cfg = write_config(tmp_path, text, "hostile.yaml")
    args = ["--run-dir", tmp_path / "runs"] if command == "run" else []
    result = invoke(command, cfg, *args)
    assert result.exit_code == 2, result.output
    assert message in result.output and "hostile.yaml:" in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "runs").exists()


def test_positions_of_the_limits():
    bomb = parse_yaml(alias_bomb(), "f.yaml")[2]
    # The first alias that pushes the expansion past the bound: level 4 (9**4 > 10000).
    assert [(i.line, i.column) for i in bomb] == [(SMALL.count("\n") + 5, 10)]
    deep = parse_yaml("a:\n  b: " + "[" * 100 + "]" * 100 + "\n", "f.yaml")[2]
    assert [(i.line, i.column) for i in deep] == [(2, 6 + MAX_DEPTH - 2)]
    nul = parse_yaml("a: 1\nbb: 2\x00\n", "f.yaml")[2]
    assert [(i.line, i.column, i.file) for i in nul] == [(2, 6, "f.yaml")]
    big = parse_yaml("a: 1\n" + "#" * MAX_DOCUMENT_CHARS, "f.yaml")[2]
    assert "longer than %d characters" % MAX_DOCUMENT_CHARS in big[0].message
    # Below the bounds, aliases and merges still work.
    data, _, issues = parse_yaml("d: &d {x: 1}\ne: {<<: *d, y: 2}\nl: [*d, *d]\n")
    assert not issues and data == {"d": {"x": 1}, "e": {"x": 1, "y": 2}, "l": [{"x": 1}, {"x": 1}]}


def test_run_directory_config_goes_through_the_same_bounds():
    # resume validates a run directory's config.yaml with validate_config_text.
    with pytest.raises(ConfigError, match="aliases expand to more than"):
        validate_config_text(alias_bomb(), filename="run/config.yaml")


@pytest.mark.parametrize("seed", ["-1", str(2**32)])
def test_seed_out_of_range_fails_validate_not_run(tmp_path, seed):
    cfg = write_config(tmp_path, SMALL.replace("seed: 11", "seed: " + seed))
    result = invoke("validate", cfg)
    assert result.exit_code == 2 and "small.yaml:13:7: seed: expected an integer >= 0" in result.output


LABELS = {
    "out_of_range": (np.r_[np.zeros(29), 7.0], "row 29 (counting from 0): label 7.0"),
    "negative": (np.r_[np.zeros(5), -1.0, np.zeros(24)], "row 5 (counting from 0): label -1.0"),
    "fractional": (np.r_[np.zeros(3), 0.5, np.zeros(26)], "row 3 (counting from 0): label 0.5"),
    "nan": (np.r_[np.nan, np.zeros(29)], "row 0 (counting from 0): label nan"),
    "two_columns": (np.zeros((30, 2)), "expected one class label per row, got labels of shape (30, 2)"),
}


@pytest.mark.parametrize("case", list(LABELS))
def test_bad_class_labels_are_refused_when_data_loads(tmp_path, case):
    labels, message = LABELS[case]
    np.savez(tmp_path / "d.npz", x=np.random.default_rng(0).random((30, 6), np.float32), y=labels)
    text = SMALL.replace("""  train: {type: synthetic, task: classification, num_samples: 120, num_features: 6,
          num_classes: 3, seed: 5}""", "  train: d.npz")
    cfg = write_config(tmp_path, text)
    result = invoke("run", cfg, "--run-dir", tmp_path / "runs")
    assert result.exit_code == 2, result.output
    assert str(tmp_path / "d.npz") in result.output and message in result.output, result.output


def test_good_labels_and_regression_targets_pass(tmp_path):
    from trainer_cli.run.data import DataError, check_class_labels
    check_class_labels(np.array([0.0, 2.0, 1.0], np.float32), 3, "f")
    check_class_labels(np.array([0.0, 9.0], np.float32), 0, "f")  # class count unknown
    with pytest.raises(DataError, match="label 3.0"):
        check_class_labels(np.array([0.0, 3.0], np.float32), 3, "f")


def test_model_file_calling_sys_exit_is_bad_input(tmp_path):
    (tmp_path / "quits.py").write_text("import sys\n\ndef build(**kw):\n    pass\n\nsys.exit(0)\n")
    cfg = write_config(tmp_path, SMALL.replace("name: mlp", "name: quits.py:build"))
    result = invoke("run", cfg, "--run-dir", tmp_path / "runs")
    assert result.exit_code == 2, result.output
    assert "quits.py: the model file called sys.exit(0) while being loaded" in result.output


def test_misspelled_type_is_named_with_its_did_you_mean(tmp_path):
    text = SMALL.replace("train: {type: synthetic", "train: {tyne: synthetic")
    result = invoke("validate", write_config(tmp_path, text))
    assert result.exit_code == 2
    assert ("small.yaml:6:11: data.train.tyne: unknown key; did you mean 'type'? (the required key "
            "'type' is missing: one of synthetic, ratings, npz, npy, csr, libsvm, csv, sklearn, image_folder, image_record, mnist, fashion_mnist, cifar10, cifar100, text)") in result.output, result.output


def test_model_arguments_are_checked_against_the_builders_signature(tmp_path):
    text = SMALL.replace("args: {hidden: [16], classes: 3}", "args: {hidden: 64, classes: four}")
    result = invoke("validate", write_config(tmp_path, text))
    assert result.exit_code == 2
    assert "small.yaml:3:18: model.args.hidden: build() in mlp.py takes a list for hidden, got 64" \
        in result.output, result.output
    assert "small.yaml:3:31: model.args.classes: build() in mlp.py takes an integer for classes, " \
        "got 'four'" in result.output, result.output


def test_argument_kinds_come_from_annotations_then_defaults(tmp_path):
    from trainer_cli.config.schema.files import factory_arg_kinds
    (tmp_path / "m.py").write_text(
        "from typing import Sequence\n"
        "def build(a: int, b: 'float' = 1, c=(1, 2), d='x', e=None, *, f: Sequence[int] = (), g=True):\n"
        "    pass\n")
    assert factory_arg_kinds(str(tmp_path / "m.py"), "build") == {
        "a": "int", "b": "float", "c": "list", "d": "str", "f": "list", "g": "bool"}


def reference_chain(lines=41) -> str:
    # Each key doubles the one before: 2**40 copies of "x" if nothing stopped it.
    keys = ['s0: "x"'] + ['s%d: "${s%d}${s%d}"' % (i, i - 1, i - 1) for i in range(1, lines)]
    return SMALL + "\n".join(keys) + "\n"


def reference_fan(levels=9, width=10) -> str:
    keys = ['l0: "0123456789"'] + ['l%d: "%s"' % (i, "${l%d}" % (i - 1) * width)
                                   for i in range(1, levels + 1)]
    return SMALL + "\n".join(keys) + "\n"


@pytest.mark.parametrize("text", [reference_chain(), reference_fan()], ids=["chain", "fan"])
def test_reference_expansion_is_bounded_like_aliases(tmp_path, text):
    from trainer_cli.config.compose import MAX_REFERENCE_VALUES
    cfg = write_config(tmp_path, text, "refs.yaml")
    result = invoke("validate", cfg)
    assert result.exit_code == 2, result.output
    assert "references expand to more than %d values" % MAX_REFERENCE_VALUES in result.output
    # Placed at the key whose reference crossed the bound, and nothing else reported.
    assert result.output.count("refs.yaml:") == 1, result.output


def test_references_below_the_bound_still_expand():
    from trainer_cli.config.compose import compose
    data, positions, issues = parse_yaml(reference_chain(12) + 'name: "${s11}"\n', "refs.yaml")
    data = compose(data, positions, "refs.yaml", None, issues)[0]
    assert not issues and data["name"] == "x" * 2048


def test_nul_in_an_include_name_and_a_huge_number_are_config_errors(tmp_path, monkeypatch):
    cfg = write_config(tmp_path, SMALL + 'include: "base\\0.yaml"\n', "inc.yaml")
    result = invoke("validate", cfg)
    assert result.exit_code == 2, result.output
    assert "inc.yaml:17:10: include: a file name to include cannot hold a NUL byte" in result.output
    cfg = write_config(tmp_path, SMALL.replace("epochs: 3", "epochs: " + "1" * 5000), "big.yaml")
    result = invoke("validate", cfg)
    assert result.exit_code == 2 and "big.yaml:14:9: epochs: cannot read this value: a number " \
        "of 5000 characters" in result.output, result.output
    monkeypatch.setenv("HUGE", "1" * 100_000)
    cfg = write_config(tmp_path, SMALL.replace("epochs: 3", 'epochs: "${env:HUGE}"'), "env.yaml")
    result = invoke("validate", cfg)
    assert result.exit_code == 2 and "env.yaml:14:9: epochs: expected an integer" in result.output
    assert "Traceback" not in result.output and len(result.output) < 2000


@pytest.mark.parametrize("section, written, key", [
    ("optimizer", "optimizer: {nmae: sgd, learning_rate: 0.1}", "name"),
    ("optimizer", "optimizer:\n  nmae: sgd\n  params: {learning_rate: 0.1}", "name"),
    ("lr_scheduler", "lr_scheduler: {tyne: factor, step: 3}", "type"),
    ("loss", "loss: {nmae: l2}", "name"),
    ("model.init", "model: {name: mlp, init: {Nmae: xavier}}", "name"),
])
def test_a_misspelled_required_key_is_named_in_every_section(tmp_path, section, written, key):
    text = SMALL.replace("optimizer: {name: adam, params: {learning_rate: 0.01}}", written)
    if section == "model.init":
        text = text.replace("model:\n  name: mlp\n  args: {hidden: [16], classes: 3}\n  init: xavier\n", "")
    result = invoke("validate", write_config(tmp_path, text))
    assert result.exit_code == 2, result.output
    typo = "Nmae" if section == "model.init" else "nmae" if key == "name" else "tyne"
    assert "%s.%s: unknown key; did you mean %r? (the required key %r is missing" \
        % (section, typo, key, key) in result.output, result.output
    assert "missing required key" not in result.output, result.output


SHADOW = "root:*:20228:0:99999:7:::\ndaemon:$y$j9T$SECRETHASHSECRETHASH:20228:0:99999:7:::\n"


def test_an_include_names_only_yaml_files_and_never_echoes_another_file(tmp_path):
    (tmp_path / "shadow").write_text(SHADOW)
    (tmp_path / "shadow.yaml").write_text(SHADOW)
    for name in ("shadow", "shadow.yaml"):
        cfg = write_config(tmp_path, SMALL + "include: %s\n" % name, "inc.yaml")
        result = invoke("validate", cfg)
        assert result.exit_code == 2, result.output
        assert "SECRETHASH" not in result.output and "root:*" not in result.output, result.output
    result = invoke("validate", write_config(tmp_path, SMALL + "include: shadow\n", "inc.yaml"))
    assert "inc.yaml:17:10: include: cannot include 'shadow': only .yaml and .yml files can be " \
        "included" in result.output, result.output
    result = invoke("validate", write_config(tmp_path, SMALL + "include: shadow.yaml\n", "inc.yaml"))
    assert "inc.yaml:17:10: include: cannot include shadow.yaml: not a trainer config" \
        in result.output, result.output
    # A config's own long key is shown by its start only.
    result = invoke("validate", write_config(tmp_path, SMALL + "k" * 500 + ": 1\n", "long.yaml"))
    assert result.exit_code == 2 and "k" * 100 not in result.output and "kkk...: unknown key" \
        in result.output, result.output


@pytest.mark.parametrize("kind", ["csv", "npy"])
def test_a_data_path_to_a_file_that_is_not_data_is_not_echoed(tmp_path, kind):
    (tmp_path / "passwd").write_text(SHADOW)
    text = SMALL.replace("""  train: {type: synthetic, task: classification, num_samples: 120, num_features: 6,
          num_classes: 3, seed: 5}""", "  train: {type: %s, path: passwd}" % kind)
    for extra in ("", ", label: x") if kind == "csv" else ("",):
        cfg = write_config(tmp_path, text.replace("path: passwd}", "path: passwd%s}" % extra))
        result = invoke("run", cfg, "--run-dir", tmp_path / "runs")
        assert result.exit_code == 2, result.output
        assert "passwd" in result.output and "Traceback" not in result.output
        assert "root:*" not in result.output and "SECRETHASH" not in result.output, result.output
