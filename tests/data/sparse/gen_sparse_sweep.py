"""Record the storage type MXNet 1.9.1 gives for every swept ``nd`` name and operator on a
row_sparse and a csr input (or that it raises), for ``tests/test_sparse_dispatch.py``.

Run with MXNet 1.9.1 installed (it needs numpy < 1.24), from the repository root::

    MXNET_STORAGE_FALLBACK_LOG_VERBOSE=0 python tests/data/sparse/gen_sparse_sweep.py NAMES.txt

``NAMES.txt``: the swept names, one a line (the test writes them: ``python -c "import
tests.test_sparse_dispatch as t; t.write_names('names.txt')"``). Writes ``mxnet_sweep.json``
beside this script: ``{name: {stype: [output stypes] or "error"}}``.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))

import mxnet as mx  # noqa: E402

import sparse_sweep_cases as cases  # noqa: E402


# Calls that crash MXNet 1.9.1's process (heap corruption), recorded as such.
CRASHES = {"unravel_index": "row_sparse input: malloc_consolidate(): invalid chunk size"}


def outcome(result):
    if isinstance(result, tuple):
        return "error"
    return [stype for stype, _ in result]


def main(names_file):
    nd = mx.nd
    names = [line.strip() for line in open(names_file) if line.strip()]
    table = {}
    for name in names:
        if name in CRASHES:
            table[name] = {"crash": CRASHES[name]}
            continue
        print(name, flush=True)
        if name in cases.OPERATORS:
            inputs = cases.make_inputs(nd, cases.SHAPE)
            fn = cases.OPERATORS[name]
            table[name] = {st: outcome(cases.run_operator(nd, fn, x)) for st, x in inputs.items()}
            continue
        base = name.split("|")[0]
        if not hasattr(nd, base):
            table[name] = {"missing": True}
            continue
        shape, call = cases.case(name)
        inputs = cases.make_inputs(nd, shape)
        table[name] = {st: outcome(cases.run(nd, call, x)) for st, x in inputs.items()}
    with open(os.path.join(HERE, "mxnet_sweep.json"), "w") as f:
        json.dump(table, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
