#!/usr/bin/env bash
# The GPU measurements for a lent device, in one call of under 8 minutes: the GPU tests, then the
# GPU benchmarks (the MLP steps and the 100M-parameter Adam step against PyTorch eager, the lazy
# sparse-embedding steps against PyTorch), each side in a clean process of its own, then where
# those steps' time goes (benchmarks/profile_gpu_step.py).
#
#   benchmarks/gpu_session.sh prepare   # here, with a package index: the wheels the device
#                                       # image lacks (pydantic and its needs) into .whl/
#   benchmarks/gpu_session.sh dry-run   # anywhere, no device: checks the interpreter, the
#                                       # imports, each benchmark side's process and its
#                                       # arguments, and that the GPU tests are collected
#   benchmarks/gpu_session.sh run       # on the device; writes everything under $OUT (or
#                                       # ./gpu-session-out when OUT is unset)
#
# On the device the command is `benchmarks/gpu_session.sh run` with .whl carried along; it ends
# inside 8 minutes (each step has its own limit: GPU_TEST_SECONDS, GPU_BENCH_SECONDS,
# GPU_SPARSE_SECONDS, GPU_PROFILE_SECONDS) and prints a summary last. PYTHON picks the interpreter (default python3,
# which on the device image is the one that holds PyTorch, CuPy and numba). Nothing here claims a
# figure: the numbers are what the run prints, with each side's calibration beside them.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
PYTHON="${PYTHON:-python3}"
WHEELS="$ROOT/.whl"
# What the device image lacks of the package's dependencies (the rest it has: numpy, numba,
# click, pyyaml, rich, threadpoolctl, cupy, torch, pytest, hypothesis).
MISSING=(pydantic pydantic-core annotated-types typing-inspection typing-extensions)
TEST_SECONDS="${GPU_TEST_SECONDS:-200}"
BENCH_SECONDS="${GPU_BENCH_SECONDS:-100}"
SPARSE_SECONDS="${GPU_SPARSE_SECONDS:-100}"
PROFILE_SECONDS="${GPU_PROFILE_SECONDS:-70}"

usage() { echo "usage: benchmarks/gpu_session.sh prepare|dry-run|run" >&2; exit 2; }

prepare() {
    # The versions this checkout is developed with, as wheels for the device's CPython 3.12.
    local specs
    specs=$("$PYTHON" - "${MISSING[@]}" <<'EOF'
import sys
from importlib import metadata
print(" ".join("%s==%s" % (name, metadata.version(name)) for name in sys.argv[1:]))
EOF
) || { echo "prepare: $PYTHON lacks one of: ${MISSING[*]}" >&2; exit 1; }
    mkdir -p "$WHEELS"
    # shellcheck disable=SC2086
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d "$WHEELS" $specs || exit 1
    ls "$WHEELS"
    echo "prepared: run 'benchmarks/gpu_session.sh run' on the device with .whl carried"
}

use_wheels() {
    # Installed beside the image's packages, not over them; without wheels the tests that need
    # pydantic fail to import and say so (the GPU tests themselves mostly do not need it).
    if compgen -G "$WHEELS/*.whl" >/dev/null; then
        "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/gpu-session-site "$WHEELS"/*.whl \
            && export PYTHONPATH="/tmp/gpu-session-site${PYTHONPATH:+:$PYTHONPATH}"
    else
        echo "note: no wheels in .whl/ (benchmarks/gpu_session.sh prepare): pydantic may be missing"
    fi
    export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
}

dry_run() {
    use_wheels
    local rc=0
    "$PYTHON" -c 'import sys, trainer_cli; print("trainer_cli from", trainer_cli.__file__,
                  "on Python", sys.version.split()[0]); print("GPUs visible to CuPy:",
                  trainer_cli.num_gpus())' || rc=1
    "$PYTHON" benchmarks/bench_gpu.py --dry-run || rc=1
    "$PYTHON" benchmarks/bench_sparse.py --help >/dev/null || rc=1
    "$PYTHON" benchmarks/profile_gpu_step.py --steps 2 || rc=1
    local collected
    collected=$("$PYTHON" -m pytest -m gpu --collect-only -q -p no:randomly \
        --continue-on-collection-errors tests 2>&1 | tail -1)
    echo "GPU tests: $collected"
    case "$collected" in *" tests collected"*) ;; *) rc=1 ;; esac
    echo "dry run: $([ $rc -eq 0 ] && echo ok || echo FAILED)"
    return $rc
}

run() {
    local out="${OUT:-$ROOT/gpu-session-out}"
    mkdir -p "$out"
    local started=$SECONDS
    {
        date -u
        nvidia-smi -L 2>&1 || echo "nvidia-smi: not found"
        "$PYTHON" -c 'import sys; print("Python", sys.version.split()[0])'
    } >"$out/env.txt" 2>&1
    use_wheels >>"$out/env.txt" 2>&1
    export PYTHONUNBUFFERED=1
    # 1. The GPU tests: a missing GPU is an error (TRAINER_REQUIRE_GPU), a test file that cannot
    #    be imported does not stop the others; the skips and the slowest tests are listed.
    echo "== GPU tests (limit ${TEST_SECONDS}s)"
    TRAINER_REQUIRE_GPU=1 CI=1 timeout "$TEST_SECONDS" "$PYTHON" -m pytest -m gpu -q -p no:randomly \
        -p no:cacheprovider --continue-on-collection-errors -rfEs --durations=15 tests \
        >"$out/gpu-tests.log" 2>&1
    local tests_rc=$?
    tail -n 3 "$out/gpu-tests.log"
    # 2. The MLP steps and the Adam step against PyTorch eager, each side its own process.
    echo "== bench_gpu.py (limit ${BENCH_SECONDS}s)"
    timeout "$BENCH_SECONDS" "$PYTHON" benchmarks/bench_gpu.py --quick --rounds 3 --json \
        >"$out/bench_gpu.json" 2>"$out/bench_gpu.log"
    local gpu_rc=$?
    "$PYTHON" - "$out/bench_gpu.json" <<'EOF' | tee "$out/summary.md"
import json, sys
sys.path.insert(0, "benchmarks")
import bench_gpu
try:
    with open(sys.argv[1]) as f:
        bench_gpu.print_report(json.loads(f.read(1 << 20)))
except (OSError, ValueError) as exc:
    print("bench_gpu.py gave no report: %s" % exc)
EOF
    # 3. Lazy SGD / Adam on a row_sparse embedding against PyTorch's sparse embedding.
    echo "== bench_sparse.py --gpu (limit ${SPARSE_SECONDS}s)"
    timeout "$SPARSE_SECONDS" "$PYTHON" benchmarks/bench_sparse.py --gpu --rounds 2 --steps 300 \
        >"$out/bench_sparse.txt" 2>&1
    local sparse_rc=$?
    tee -a "$out/summary.md" <"$out/bench_sparse.txt"
    # 4. Where the steps' time goes (phases, device waits, Python's own time; a CUDA graph trial).
    echo "== profile_gpu_step.py (limit ${PROFILE_SECONDS}s)"
    timeout "$PROFILE_SECONDS" "$PYTHON" benchmarks/profile_gpu_step.py --steps 200 \
        >"$out/profile_gpu.txt" 2>&1
    local profile_rc=$?
    grep "^==" "$out/profile_gpu.txt" | tee -a "$out/summary.md"
    {
        echo "exit status: GPU tests $tests_rc, bench_gpu $gpu_rc, bench_sparse $sparse_rc," \
             "profile $profile_rc (124: ran past its limit); $((SECONDS - started)) s in all"
    } | tee -a "$out/summary.md"
    [ "$tests_rc" -eq 0 ] && [ "$gpu_rc" -eq 0 ] && [ "$sparse_rc" -eq 0 ] \
        && [ "$profile_rc" -eq 0 ]
}

case "${1:-}" in
    prepare) prepare ;;
    dry-run) dry_run ;;
    run) run ;;
    *) usage ;;
esac
