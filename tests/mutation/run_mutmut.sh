#!/usr/bin/env bash
# Mutation testing with mutmut over the scope [tool.mutmut] in pyproject.toml sets (optional,
# slow: every mutant is a run of the selected tests). Arguments restrict it to mutant names:
#
#   tests/mutation/run_mutmut.sh 'trainer_cli.optimizer.adagrad*'     # one module
#   tests/mutation/run_mutmut.sh                                       # the whole scope (hours)
#
# then `mutmut results` lists the survivors and `mutmut show NAME` shows one. It works in
# ./mutants (a copy of the sources; delete it to start afresh). numba is off (TRAINER_NO_NUMBA):
# mutmut's trampolines cannot be compiled, so the NumPy bodies are what is mutated and tested.
set -euo pipefail
cd "$(dirname "$0")/../.."
export TRAINER_NO_NUMBA=1 PYTHONPATH="$PWD/mutants${PYTHONPATH:+:$PYTHONPATH}"
exec python -m mutmut run "$@"
