"""The CUDA source of every fused optimizer rule, compiled on the host as C++, gives bitwise the
numbers of the rule's NumPy body.

No GPU is lent to this project in practice, so the CUDA kernels would otherwise never run. A
CuPy ElementwiseKernel body is C++ over one element: here it goes inside a loop over the
elements (the gradient read from its array, the weight and states read and written back, the
scalars from the row ``kernels.Kernel.row`` builds), with CUDA's ``sqrt`` taken from ``<cmath>``
and FMA contraction off (``-ffp-contract=off``, as ``--fmad=false`` on the device). The inputs
are the golden cases' weights and gradients, stepped through their whole trajectory, and arrays
full of NaN, infinities, signed zeros, subnormals and huge values. One shared library is built
per session into a temporary directory; without a C++ compiler the tests skip.
"""
import ctypes
import itertools
import json
import subprocess
from pathlib import Path

import numpy
import pytest

import required
from trainer_cli.optimizer import adam, kernels, sgd

CXX = required.cxx()
pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler on this machine")

GOLDEN = json.loads((Path(__file__).parent / "data" / "golden_rule_inputs.json").read_text())

# Each kernel with a function turning one step's hyper-parameters into its row's values.
RULES = {
    "sgd": (sgd.SGD_KERNEL, lambda dtype, p: sgd._scalars(dtype, p["lr"], p["wd"], 0.0,
                                                            p["rescale"], p["clip"])),
    "sgd_mom": (sgd.SGD_MOM_KERNEL, lambda dtype, p: sgd._scalars(
        dtype, p["lr"], p["wd"], p["momentum"], p["rescale"], p["clip"])),
    "adam": (adam.ADAM_KERNEL, lambda dtype, p: adam._scalars(
        p["lr"], p["wd"], 0.9, 0.999, 1e-8, p["rescale"], p["clip"])),
    "adamw": (adam.ADAMW_KERNEL, lambda dtype, p: adam._scalars(
        p["lr"], p["wd"], 0.9, 0.999, 1e-6, p["rescale"], p["clip"])),
}


def _numpy_body(name, arrays, p):
    """The rule through its public function, kernels out of reach: the NumPy body."""
    w, g, *states = arrays
    common = dict(wd=p["wd"], rescale=p["rescale"], clip=p["clip"])
    if name in ("sgd", "sgd_mom"):
        sgd.sgd_rule(w, g, states[0] if states else None, lr=p["lr"],
                     momentum=p.get("momentum", 0.0), **common)
    elif name == "adam":
        adam.adam_rule(w, g, *states, lr=p["lr"], beta1=0.9, beta2=0.999, epsilon=1e-8,
                       **common)
    else:
        adam.adamw_rule(w, g, *states, eta=p["lr"], beta1=0.9, beta2=0.999, epsilon=1e-6,
                        **common)


def _params(kernel_source):
    """The names of a comma-separated ``T name`` parameter list."""
    return [part.split()[-1] for part in kernel_source.split(",")]


def _cxx_source(bodies=None):
    parts = ["#include <cmath>", "#include <cstddef>", "using std::sqrt;"]
    for name, (kernel, _) in RULES.items():
        in_params, out_params, body = kernel.cuda
        body = (bodies or {}).get(name, body)
        inputs, outputs = _params(in_params), _params(out_params)
        # The calling convention of ``Kernel.run``: the gradient, then the row, then the arrays
        # written (weight first).
        assert inputs[1:] == list(kernel.scalars) and outputs[0] == "w"
        scalars = "".join("    const T %s = s[%d];\n" % (n, k) for k, n in enumerate(inputs[1:]))
        loads = "".join("        T %s = outs[%d][i];\n" % (n, k) for k, n in enumerate(outputs))
        stores = "".join("        outs[%d][i] = %s;\n" % (k, n) for k, n in enumerate(outputs))
        parts.append(
            "template <typename T>\n"
            "static void %(name)s(std::size_t n, const T* grad, T* const* outs, const T* s) {\n"
            "%(scalars)s"
            "    for (std::size_t i = 0; i < n; ++i) {\n"
            "        const T %(g)s = grad[i];\n"
            "%(loads)s"
            "        {\n%(body)s\n        }\n"
            "%(stores)s"
            "    }\n}\n"
            'extern "C" void %(name)s_f(std::size_t n, const float* g, float* const* o, '
            "const float* s) { %(name)s<float>(n, g, o, s); }\n"
            'extern "C" void %(name)s_d(std::size_t n, const double* g, double* const* o, '
            "const double* s) { %(name)s<double>(n, g, o, s); }\n"
            % dict(name=name, scalars=scalars, g=inputs[0], loads=loads, body=body,
                   stores=stores))
    return "\n".join(parts)


def _compile(folder, stem, source, what):
    """``source`` built as a shared library in ``folder`` (FMA contraction off, as on the device)."""
    path, library = folder / (stem + ".cpp"), folder / (stem + ".so")
    path.write_text(source)
    command = [CXX, "-O2", "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off",
               "-fno-fast-math", "-fno-math-errno", str(path), "-o", str(library)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, "%s do not compile as C++:\n%s" % (what, proc.stderr)
    return ctypes.CDLL(str(library))


def _build(folder, bodies=None):
    return _compile(folder, "rules", _cxx_source(bodies), "the CUDA sources")


@pytest.fixture(scope="session")
def cuda_on_host(tmp_path_factory):
    """The rules' CUDA sources as one shared library, built once per session."""
    return _build(tmp_path_factory.mktemp("cuda_on_host"))


def _run_cxx(lib, name, arrays, p):
    kernel, values = RULES[name]
    w, g, *states = arrays
    dtype = w.dtype
    row = kernel.row(numpy.dtype(dtype), **values(numpy.dtype(dtype), p))
    suffix = "f" if dtype == numpy.float32 else "d"
    written = [w] + states
    outs = (ctypes.c_void_p * len(written))(*[a.ctypes.data for a in written])
    fn = getattr(lib, "%s_%s" % (name, suffix))
    fn(ctypes.c_size_t(w.size), ctypes.c_void_p(g.ctypes.data), outs,
       ctypes.c_void_p(row.ctypes.data))


def _bits(a):
    return a.view(numpy.uint32 if a.dtype == numpy.float32 else numpy.uint64)


def _compare(lib, name, arrays, p):
    reference = [a.copy() for a in arrays]
    compiled = [a.copy() for a in arrays]
    with numpy.errstate(all="ignore"):
        _numpy_body(name, reference, p)
        _run_cxx(lib, name, compiled, p)
    for what, x, y in zip(("weight", "gradient", "state 1", "state 2"), reference, compiled):
        numpy.testing.assert_array_equal(_bits(x), _bits(y), err_msg="%s, %s, %s" % (name, what, p))


def _state_count(name):
    return {"sgd": 0, "sgd_mom": 1, "adam": 2, "adamw": 2}[name]


@pytest.fixture
def numpy_bodies(monkeypatch):
    monkeypatch.setattr(kernels, "MIN_SIZE", 1 << 60)      # the rules' public functions: NumPy


@pytest.mark.parametrize("case,name", [
    ("sgd_plain", "sgd"), ("sgd_mom_wd_clip", "sgd_mom"), ("adam_wd_clip", "adam"),
    ("adam_wd_clip", "adamw")])
@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
def test_cuda_source_follows_the_golden_trajectories_bitwise(cuda_on_host, numpy_bodies, case,
                                                              name, dtype):
    spec = GOLDEN[case]
    hp = spec["optimizer_params"]
    p = {"lr": hp["learning_rate"], "wd": hp.get("wd", 0.0), "momentum": hp.get("momentum", 0.0),
         "rescale": 1.0, "clip": hp.get("clip_gradient")}
    for k, weight in enumerate(spec["weights"]):
        w = numpy.asarray(weight, dtype).ravel()
        reference = [w.copy()] + [numpy.zeros_like(w) for _ in range(_state_count(name))]
        compiled = [a.copy() for a in reference]
        for t, grads in enumerate(spec["grads"], start=1):
            g = numpy.asarray(grads[k], dtype).ravel()
            if name == "adam":      # the bias-corrected rate the optimizer plans
                p["lr"] = hp["learning_rate"] * (1 - 0.999 ** t) ** 0.5 / (1 - 0.9 ** t)
            with numpy.errstate(all="ignore"):
                _numpy_body(name, [reference[0], g] + reference[1:], p)
                _run_cxx(cuda_on_host, name, [compiled[0], g] + compiled[1:], p)
            for x, y in zip(reference, compiled):
                numpy.testing.assert_array_equal(_bits(x), _bits(y), err_msg="step %d" % t)


SPECIAL = [numpy.nan, numpy.inf, -numpy.inf, 0.0, -0.0, 1e-45, -1e-45, 3e38, -3e38, 1e-38, 0.5,
           2.0, -7.0, 1e20, -1e20, 5e-324, -5e-324, 1e300, -1e300]


def _special(dtype, seed, positive=False):
    """Every special value against every other (weight x gradient), then random magnitudes."""
    rng = numpy.random.default_rng(seed)
    pairs = numpy.array(list(itertools.product(SPECIAL, SPECIAL)))
    column = pairs[:, seed % 2]
    a = numpy.concatenate([column, rng.standard_normal(300) * 10.0 ** rng.integers(-8, 4, 300)])
    with numpy.errstate(all="ignore"):
        a = a.astype(dtype)
    return numpy.abs(a) if positive else a


@pytest.mark.parametrize("name", list(RULES))
@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
def test_cuda_source_is_bitwise_the_numpy_body_on_special_values(cuda_on_host, numpy_bodies,
                                                                 name, dtype):
    states = _state_count(name)
    for k, (clip, wd, rescale) in enumerate(itertools.product(
            [None, 0.5], [0.0, 1e-3, -0.0], [1.0, 1 / 64, 0.37, -2.0])):
        arrays = [_special(dtype, 0), _special(dtype, 1)]
        arrays += [_special(dtype, 2 + j, positive=(j == 1)) for j in range(states)]
        p = {"lr": 0.1 if k % 2 else -0.0, "wd": wd, "momentum": 0.9, "rescale": rescale,
             "clip": clip}
        _compare(cuda_on_host, name, arrays, p)


def test_a_cuda_source_rounding_otherwise_is_caught(tmp_path, numpy_bodies):
    """The comparison has teeth: SGD's element with ``(g*lr)*rescale`` in place of
    ``g*(lr*rescale)`` (one rounding in another place) no longer matches the NumPy body."""
    body = sgd.SGD_KERNEL.cuda[2]
    original = "T x = g * (clipping != 0 ? rescale : lr * rescale);"
    assert original in body
    wrong = _build(tmp_path, {"sgd": body.replace(original, "T x = (g * lr) * rescale;")})
    arrays = [_special(numpy.float32, 0), _special(numpy.float32, 1)]
    p = {"lr": 0.1, "wd": 0.0, "momentum": 0.0, "rescale": 0.37, "clip": None}
    with pytest.raises(AssertionError):
        _compare(wrong, "sgd", arrays, p)


# ----------------------------------------------------------------------------- multi-tensor
# The multi-tensor kernel (``kernels._multi_source``) on the host: CUDA's block and thread
# indices become globals that a driver loops over, a grid far smaller than the tensors so that
# every thread strides.
_HOST_GRID = (3, 32)        # blocks per tensor, threads per block


# What a CUDA kernel's source needs to compile as host C++: no __global__, and the grid's
# coordinates as globals that the wrappers set before each call.
_HOST_GRID_GLOBALS = ["#define __global__", "struct host_dim3 { unsigned x, y; };",
                      "static host_dim3 blockIdx, blockDim, gridDim, threadIdx;"]


def _host_kernel(symbol, source, params, args, threads, blocks):
    """``source`` (its kernel renamed ``symbol``) in a namespace of its own, and
    ``run_<symbol>(params)``: the kernel called with ``args`` for every thread of a 1-D grid of
    ``blocks`` (a C expression) blocks of ``threads``, one after another."""
    return ("namespace ns_%(s)s {\n%(source)s\n}\n"
            'extern "C" void run_%(s)s(%(params)s) {\n'
            "    blockDim.x = %(threads)d; gridDim.x = (unsigned)(%(blocks)s);\n"
            "    for (unsigned b = 0; b < gridDim.x; ++b) for (unsigned t = 0; t < %(threads)d; "
            "++t) {\n"
            "        blockIdx.x = b; threadIdx.x = t;\n"
            "        ns_%(s)s::%(s)s(%(args)s);\n"
            "    }\n}\n" % dict(s=symbol, source=source, params=params, args=args,
                               threads=threads, blocks=blocks))


def _multi_cxx_source():
    parts = ["#include <cmath>", "using std::sqrt;", *_HOST_GRID_GLOBALS]
    for name, (kernel, _) in RULES.items():
        for dtype, suffix in ((numpy.float32, "f"), (numpy.float64, "d")):
            symbol = "multi_%s_%s" % (name, suffix)
            source = kernels._multi_source(name, kernel.cuda, numpy.dtype(dtype))
            ctype = "float" if suffix == "f" else "double"
            args = ", ".join("s[%d]" % k for k in range(len(kernel.scalars)))
            parts.append("namespace ns_%s {\n%s\n}" % (
                symbol, source.replace("trainer_cli_multi_" + name, symbol)))
            parts.append(
                'extern "C" void run_%(symbol)s(const long long* table, int count, '
                "const %(ctype)s* s) {\n"
                "    gridDim.x = %(blocks)d; blockDim.x = %(threads)d;\n"
                "    for (unsigned y = 0; y < (unsigned)count; ++y)\n"
                "        for (unsigned b = 0; b < gridDim.x; ++b)\n"
                "            for (unsigned t = 0; t < blockDim.x; ++t) {\n"
                "                blockIdx.y = y; blockIdx.x = b; threadIdx.x = t;\n"
                "                ns_%(symbol)s::%(symbol)s(table, 0, %(args)s);\n"
                "            }\n}\n" % dict(symbol=symbol, ctype=ctype, args=args,
                                          blocks=_HOST_GRID[0], threads=_HOST_GRID[1]))
    return "\n".join(parts)


@pytest.fixture(scope="session")
def multi_on_host(tmp_path_factory):
    return _compile(tmp_path_factory.mktemp("multi_on_host"), "multi", _multi_cxx_source(),
                    "the multi-tensor sources")


@pytest.mark.parametrize("name", list(RULES))
@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
def test_multi_tensor_cuda_source_is_bitwise_the_numpy_body(multi_on_host, numpy_bodies, name,
                                                            dtype):
    """Three tensors of other sizes than the grid (one smaller than a block) in one launch: each
    comes out as the NumPy body makes it, the table's column order (size, gradient, weight,
    states) included."""
    kernel, values = RULES[name]
    p = {"lr": 0.1, "wd": 1e-3, "momentum": 0.9, "rescale": 0.37, "clip": 0.5}
    tensors = []
    for k, size in enumerate((461, 5, 200)):
        arrays = [_special(dtype, k)[:size], _special(dtype, k + 1)[:size]]
        arrays += [_special(dtype, k + 2 + j, positive=(j == 1))[:size]
                   for j in range(_state_count(name))]
        tensors.append([numpy.ascontiguousarray(a) for a in arrays])
    reference = [[a.copy() for a in arrays] for arrays in tensors]
    with numpy.errstate(all="ignore"):
        for arrays in reference:
            _numpy_body(name, arrays, p)
    order = lambda arrays: [arrays[1], arrays[0]] + arrays[2:]      # noqa: E731
    table = numpy.array([[a[0].size] + [x.ctypes.data for x in order(a)] for a in tensors],
                        dtype=numpy.int64)
    row = kernel.row(numpy.dtype(dtype), **values(numpy.dtype(dtype), p))
    fn = getattr(multi_on_host, "run_multi_%s_%s" % (name, "f" if dtype == numpy.float32 else "d"))
    with numpy.errstate(all="ignore"):
        fn(ctypes.c_void_p(table.ctypes.data), ctypes.c_int(len(tensors)),
           ctypes.c_void_p(row.ctypes.data))
    for k, (want, got) in enumerate(zip(reference, tensors)):
        for what, x, y in zip(("weight", "gradient", "state 1", "state 2"), want, got):
            numpy.testing.assert_array_equal(_bits(x), _bits(y),
                                             err_msg="%s tensor %d %s" % (name, k, what))


# ----------------------------------------------------------------------------- rows added by index
def _rows_cxx_source():
    from trainer_cli.ndarray import _rows_cuda
    parts = list(_HOST_GRID_GLOBALS)
    for ctype, suffix in (("float", "f"), ("double", "d")):
        symbol = "rows_add_" + suffix
        parts.append(_host_kernel(
            symbol, (_rows_cuda._SOURCE % {"ctype": ctype}).replace("trainer_cli_rows_add", symbol),
            "const %(t)s* v, const long long* order, const long long* starts, "
            "const long long* dest, long long groups, long long n, long long width, %(t)s* out, "
            "int accumulate" % {"t": ctype},
            "v, order, starts, dest, groups, n, width, out, accumulate",
            32, "(groups * width + 31) / 32"))
    return "\n".join(parts)


@pytest.fixture(scope="session")
def rows_on_host(tmp_path_factory):
    return _compile(tmp_path_factory.mktemp("rows_on_host"), "rows", _rows_cxx_source(),
                    "the row-adding kernel's sources")


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
def test_rows_added_by_index_are_numpy_add_at_bitwise(rows_on_host, dtype):
    """The GPU's deterministic ``target[keys] += values``: a stable order of the keys, then each
    key's rows added left to right onto the target, as ``numpy.add.at`` does; and the same
    kernel's group sums (no target) add left to right too."""
    rng = numpy.random.default_rng(3)
    keys = rng.integers(0, 40, size=900)
    values = (rng.standard_normal((900, 5)) * 10.0 ** rng.integers(-6, 6, (900, 1))).astype(dtype)
    target = rng.standard_normal((40, 5)).astype(dtype)
    order = numpy.argsort(keys, kind="stable").astype(numpy.int64)
    ordered = keys[order]
    starts = numpy.flatnonzero(numpy.concatenate(([True], ordered[1:] != ordered[:-1])))
    starts = starts.astype(numpy.int64)
    dest = ordered[starts].astype(numpy.int64)
    fn = getattr(rows_on_host, "run_rows_add_" + ("f" if dtype == numpy.float32 else "d"))
    p = lambda a: ctypes.c_void_p(a.ctypes.data)       # noqa: E731
    got = target.copy()
    fn(p(values), p(order), p(starts), p(dest), ctypes.c_longlong(len(starts)),
       ctypes.c_longlong(len(keys)), ctypes.c_longlong(5), p(got), ctypes.c_int(1))
    want = target.copy()
    numpy.add.at(want, keys, values)
    assert got.tobytes() == want.tobytes()
    sums = numpy.empty((len(starts), 5), dtype=dtype)
    fn(p(values), p(order), p(starts), ctypes.c_void_p(0), ctypes.c_longlong(len(starts)),
       ctypes.c_longlong(len(keys)), ctypes.c_longlong(5), p(sums), ctypes.c_int(0))
    for s, key in enumerate(dest):
        acc = None
        for row in values[keys == key]:             # in their original order
            acc = row.copy() if acc is None else acc + row
        assert sums[s].tobytes() == acc.tobytes()


# ----------------------------------------------------------------------------- inf/NaN flags
def _nonfinite_cxx_source():
    from trainer_cli.ndarray import _finite_cuda
    parts = list(_HOST_GRID_GLOBALS)
    for size, (utype, mask) in _finite_cuda._TYPES.items():
        symbol = "nonfinite_%d" % size
        parts.append("namespace ns_%s {\n%s\n}" % (symbol, (_finite_cuda.SOURCE % {
            "utype": utype, "mask": mask}).replace("trainer_cli_nonfinite", symbol)))
        parts.append(
            'extern "C" int run_%(s)s(const long long* table, int count) {\n'
            "    int flag = 0;\n"
            "    blockDim.x = 4; gridDim.x = 3;\n"
            "    for (unsigned y = 0; y < (unsigned)count; ++y)\n"
            "        for (unsigned b = 0; b < gridDim.x; ++b) for (unsigned t = 0; t < 4; ++t) {\n"
            "            blockIdx.y = y; blockIdx.x = b; threadIdx.x = t;\n"
            "            ns_%(s)s::%(s)s(table, 0, &flag);\n"
            "        }\n"
            "    return flag;\n}\n" % dict(s=symbol))
    return "\n".join(parts)


@pytest.fixture(scope="session")
def nonfinite_on_host(tmp_path_factory):
    return _compile(tmp_path_factory.mktemp("nonfinite_on_host"), "nonfinite",
                    _nonfinite_cxx_source(), "the inf/NaN kernel's sources")


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64", "complex128"])
def test_the_inf_nan_kernel_flags_exactly_the_arrays_numpy_calls_not_finite(nonfinite_on_host,
                                                                            dtype):
    """Several arrays in one launch (sizes off the grid's multiples): the flag is raised by an
    inf or NaN anywhere in any of them, by nothing else (huge, tiny, subnormal, signed zeros)."""
    from trainer_cli.ndarray import _finite_cuda
    rng = numpy.random.default_rng(5)
    finite = numpy.array([0.0, -0.0, 1e-45, 6e-8, 65000.0, -1.5, 3e38 if dtype != "float16"
                          else 60000.0], dtype=numpy.float64)
    for bad in (None, numpy.inf, -numpy.inf, numpy.nan):
        arrays = []
        for n in (37, 5, 100):
            a = rng.choice(finite, size=n).astype(dtype)
            if numpy.dtype(dtype).kind == "c":
                a = a + 1j * rng.choice(finite, size=n).astype(dtype)
            arrays.append(a)
        if bad is not None:
            target = arrays[2] if numpy.dtype(dtype).kind != "c" else arrays[2].view(
                arrays[2].real.dtype)
            target[77] = bad
        size = _finite_cuda._size(arrays[0])
        table = numpy.array([[a.nbytes // size, a.ctypes.data] for a in arrays], numpy.int64)
        flag = getattr(nonfinite_on_host, "run_nonfinite_%d" % size)(
            ctypes.c_void_p(table.ctypes.data), ctypes.c_int(len(arrays)))
        assert bool(flag) == (bad is not None)
        assert bool(flag) == (not all(numpy.isfinite(a).all() for a in arrays))


# ----------------------------------------------------------------------------- row_sparse rules
# The lazy row_sparse kernels (``kernels._rows_source``): one thread per element of the present
# rows, the weight's row ``rows[k / width]``, run on the host as the multi-tensor kernel is.
ROW_RULES = {
    "sgd_lazy": (sgd.SGD_ROWS_KERNEL, 0),
    "sgd_mom": (sgd.SGD_MOM_ROWS_KERNEL, 1),
    "adam": (adam.ADAM_ROWS_KERNEL, 2),
}


def _row_kernels_cxx_source():
    parts = ["#include <cmath>", "using std::sqrt;", *_HOST_GRID_GLOBALS]
    for name, (kernel, states) in ROW_RULES.items():
        for dtype, suffix in ((numpy.float32, "f"), (numpy.float64, "d")):
            symbol = "rows_%s_%s" % (name, suffix)
            source = kernels._rows_source(kernel.name, kernel.cuda, kernel.scalars,
                                          numpy.dtype(dtype))
            ctype = "float" if suffix == "f" else "double"
            outs = ", ".join("(%s*)o[%d]" % (ctype, k) for k in range(1 + states))
            args = ", ".join("s[%d]" % k for k in range(len(kernel.scalars)))
            parts.append("namespace ns_%s {\n%s\n}" % (
                symbol, source.replace("trainer_cli_rows_" + kernel.name, symbol)))
            parts.append(
                'extern "C" void run_%(symbol)s(const long long* rows, long long n, '
                "long long width, long long count, const %(ctype)s* g, void* const* o, "
                "const %(ctype)s* s) {\n"
                "    gridDim.x = %(blocks)d; blockDim.x = %(threads)d;\n"
                "    for (unsigned b = 0; b < gridDim.x; ++b)\n"
                "        for (unsigned t = 0; t < blockDim.x; ++t) {\n"
                "            blockIdx.x = b; threadIdx.x = t;\n"
                "            ns_%(symbol)s::%(symbol)s(rows, n, width, count, g, %(outs)s, "
                "%(args)s);\n"
                "        }\n}\n" % dict(symbol=symbol, ctype=ctype, outs=outs, args=args,
                                      blocks=_HOST_GRID[0], threads=_HOST_GRID[1]))
    return "\n".join(parts)


@pytest.fixture(scope="session")
def row_kernels_on_host(tmp_path_factory):
    return _compile(tmp_path_factory.mktemp("row_kernels_on_host"), "row_kernels",
                    _row_kernels_cxx_source(), "the row_sparse kernels' sources")


def _rows_numpy_body(name, w, rows, g, states, p):
    if name == "adam":
        adam._adam_rows_numpy(w, rows, g, *states, p["lr"], p["wd"], 0.9, 0.999, 1e-8,
                              p["rescale"], p["clip"])
    else:
        sgd._sgd_rows_numpy(w, rows, g, states[0] if states else None, p["lr"], p["wd"],
                            p["momentum"], p["rescale"], p["clip"])


def _rows_scalars(name, dtype, p):
    if name == "adam":
        return adam._scalars(p["lr"], p["wd"], 0.9, 0.999, 1e-8, p["rescale"], p["clip"])
    return sgd._scalars(dtype, p["lr"], p["wd"], p["momentum"], p["rescale"], p["clip"])


def _run_rows_cxx(lib, name, w, rows, g, states, p):
    kernel, _ = ROW_RULES[name]
    dtype = w.dtype
    row = kernel.row(dtype, _rows_scalars(name, dtype, p))
    written = [w] + states
    outs = (ctypes.c_void_p * len(written))(*[a.ctypes.data for a in written])
    fn = getattr(lib, "run_rows_%s_%s" % (name, "f" if dtype == numpy.float32 else "d"))
    fn(ctypes.c_void_p(rows.ctypes.data), ctypes.c_longlong(len(rows)),
       ctypes.c_longlong(w.shape[1]), ctypes.c_longlong(w.shape[0]),
       ctypes.c_void_p(g.ctypes.data), outs, ctypes.c_void_p(row.ctypes.data))


@pytest.mark.parametrize("name", list(ROW_RULES))
@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
def test_row_sparse_cuda_source_is_bitwise_the_numpy_body(row_kernels_on_host, name, dtype):
    """Special values in the present rows of a table (a width off the grid's multiples), for
    clipping on and off, decay of 0, -0.0 and not, rates of -0.0 and not: the present rows come
    out as the NumPy body (gather, dense body, scatter) makes them; absent rows keep their bits."""
    _, states = ROW_RULES[name]
    dtype = numpy.dtype(dtype)
    width, table_rows = 7, 160
    rows = numpy.arange(1, table_rows, 3, dtype=numpy.int64)[:len(_special(dtype, 0)) // width]
    for k, (clip, wd, rescale) in enumerate(itertools.product(
            [None, 0.5], [0.0, 1e-3, -0.0], [1.0, 0.37, -2.0])):
        p = {"lr": 0.1 if k % 2 else -0.0, "wd": wd, "momentum": 0.9, "rescale": rescale,
             "clip": clip}
        w = numpy.resize(_special(dtype, 0), (table_rows, width))
        g = numpy.ascontiguousarray(_special(dtype, 1)[:len(rows) * width].reshape(-1, width))
        arrays = [numpy.resize(_special(dtype, 2 + j, positive=(j == 1)), w.shape)
                  for j in range(states)]
        reference = [w.copy()] + [a.copy() for a in arrays]
        compiled = [w.copy()] + [a.copy() for a in arrays]
        with numpy.errstate(all="ignore"):
            _rows_numpy_body(name, reference[0], rows, g, reference[1:], p)
            _run_rows_cxx(row_kernels_on_host, name, compiled[0], rows, g, compiled[1:], p)
        for what, x, y in zip(("weight", "state 1", "state 2"), reference, compiled):
            numpy.testing.assert_array_equal(_bits(x), _bits(y),
                                             err_msg="%s %s %s %s" % (name, dtype, what, p))


def test_row_sparse_cuda_source_skips_row_ids_outside_the_weight(row_kernels_on_host):
    """The kernel writes no row outside the weight whatever ids it is handed (the caller refuses
    them before a launch; this is the device's own guard): the ids in range are updated."""
    w = numpy.ones((4, 3), dtype=numpy.float32)
    guard = numpy.full((2, 3), 7.0, dtype=numpy.float32)     # the memory right after ``w``
    block = numpy.concatenate([w, guard])
    table = block[:4]
    rows = numpy.array([-1, 1, 4, 5], dtype=numpy.int64)
    g = numpy.ones((4, 3), dtype=numpy.float32)
    p = {"lr": 0.5, "wd": 0.0, "momentum": 0.0, "rescale": 1.0, "clip": None}
    _run_rows_cxx(row_kernels_on_host, "sgd_lazy", table, rows, g, [], p)
    assert block[4:].tolist() == guard.tolist()
    assert table.tolist() == [[1, 1, 1], [0.5, 0.5, 0.5], [1, 1, 1], [1, 1, 1]]


def test_row_ids_are_checked_at_both_ends_in_one_transfer():
    """``kernels.rows_in_range`` reads the first and last of the sorted ids (a device array's
    ``get``): the ids refused are those a row update must refuse."""
    class Device(numpy.ndarray):
        def get(self):
            return numpy.asarray(self)
    for ids, count, ok in (([], 3, True), ([2], 3, True), ([3], 3, False), ([-1, 0], 3, False),
                           ([0, 1, 2], 3, True), ([0, 5, 9], 9, False)):
        rows = numpy.array(ids, dtype=numpy.int64).view(Device)
        assert kernels.rows_in_range(rows, count) is ok, (ids, count)


# ----------------------------------------------------------------------------- softmax CE loss
def _loss_cxx_source():
    from trainer_cli.ndarray import _loss_cuda
    parts = ["#include <cmath>", "using std::exp; using std::log;", *_HOST_GRID_GLOBALS]
    for ctype, suffix in (("float", "f"), ("double", "d")):
        dtype = numpy.dtype(suffix)
        for label in ("f", "l"):
            symbol = "ce_forward_%s%s" % (suffix, label)
            source = _loss_cuda.forward_source(dtype, numpy.dtype(label))
            parts.append(_host_kernel(
                symbol, source.replace("trainer_cli_softmax_ce_forward", symbol),
                "const %(t)s* d, const void* lab, long long rows, long long classes, "
                "%(t)s* logp, %(t)s* loss, long long* idx" % {"t": ctype},
                "d, (const ns_%s::L*)lab, rows, classes, logp, loss, idx" % symbol,
                4, "(rows + 3) / 4"))
        symbol = "ce_backward_" + suffix
        parts.append(_host_kernel(
            symbol, (_loss_cuda.BACKWARD_SOURCE % {"ctype": ctype}).replace(
                "trainer_cli_softmax_ce_backward", symbol),
            "const %(t)s* head, const %(t)s* logp, const long long* idx, long long rows, "
            "long long classes, %(t)s* grad" % {"t": ctype},
            "head, logp, idx, rows, classes, grad", 4, "(rows + 3) / 4"))
    return "\n".join(parts)


@pytest.fixture(scope="session")
def loss_on_host(tmp_path_factory):
    return _compile(tmp_path_factory.mktemp("loss_on_host"), "loss", _loss_cxx_source(),
                    "the softmax cross-entropy kernels' sources")


def _loss_on_host(lib, scores, labels, head):
    suffix = "f" if scores.dtype == numpy.float32 else "d"
    rows, classes = scores.shape
    logp, loss = numpy.empty_like(scores), numpy.empty(rows, scores.dtype)
    idx, grad = numpy.empty(rows, numpy.int64), numpy.empty_like(scores)
    p = lambda a: ctypes.c_void_p(a.ctypes.data)       # noqa: E731
    getattr(lib, "run_ce_forward_%s%s" % (suffix, labels.dtype.char))(
        p(scores), p(labels), ctypes.c_longlong(rows), ctypes.c_longlong(classes), p(logp),
        p(loss), p(idx))
    getattr(lib, "run_ce_backward_" + suffix)(p(head), p(logp), p(idx), ctypes.c_longlong(rows),
                                              ctypes.c_longlong(classes), p(grad))
    return loss, idx, grad


def _loss_on_cpu(scores, labels, head):
    from trainer_cli import autograd, gluon, nd
    x = nd.array(scores, dtype=scores.dtype)
    x.attach_grad()
    with autograd.record():
        loss = gluon.loss.SoftmaxCrossEntropyLoss()(x, nd.array(labels, dtype=labels.dtype))
    loss.backward(nd.array(head, dtype=head.dtype))
    return loss.asnumpy(), x.grad.asnumpy()


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
@pytest.mark.parametrize("label_dtype", [numpy.float32, numpy.int64])
@pytest.mark.parametrize("classes", [1, 10, 37])
def test_softmax_ce_cuda_source_is_the_cpu_loss(loss_on_host, dtype, label_dtype, classes):
    """The GPU's fused SoftmaxCrossEntropyLoss against the CPU's, forward and backward: the
    labels clipped as ``pick`` clips them (NaN, huge and negative labels to a class), the
    values to float rounding (CUDA's exp and log are the host's here, not NumPy's)."""
    rng = numpy.random.default_rng(classes)
    rows = 45
    scores = (rng.standard_normal((rows, classes)) * 4).astype(dtype)
    labels = rng.integers(-2, classes + 2, rows).astype(label_dtype)
    if label_dtype == numpy.float32:
        labels[:4] = [numpy.nan, 1e30, -1e30, 2.7]
    head = rng.standard_normal(rows).astype(dtype)
    loss, idx, grad = _loss_on_host(loss_on_host, scores, labels, head)
    with numpy.errstate(invalid="ignore"):
        want_idx = numpy.clip(labels.astype(numpy.int64), 0, classes - 1)
    assert idx.tolist() == want_idx.tolist()
    with numpy.errstate(invalid="ignore"):
        want_loss, want_grad = _loss_on_cpu(scores, labels, head)
    rtol = 2e-6 if dtype == numpy.float32 else 1e-13
    numpy.testing.assert_allclose(loss, want_loss, rtol=rtol, atol=rtol)
    numpy.testing.assert_allclose(grad, want_grad, rtol=rtol, atol=rtol)


def test_softmax_ce_cuda_source_keeps_nan_and_infinity_where_the_cpu_does(loss_on_host):
    scores = numpy.array([[1.0, numpy.nan, 2.0], [numpy.inf, 0.0, 1.0], [3.0, 3.0, 3.0],
                          [-numpy.inf, 0.0, 0.0]], dtype=numpy.float32)
    labels = numpy.array([0, 1, 2, 0], dtype=numpy.float32)
    head = numpy.array([1.0, numpy.inf, 0.5, 2.0], dtype=numpy.float32)
    loss, _, grad = _loss_on_host(loss_on_host, scores, labels, head)
    with numpy.errstate(all="ignore"):
        want_loss, want_grad = _loss_on_cpu(scores, labels, head)
    numpy.testing.assert_array_equal(numpy.isnan(loss), numpy.isnan(want_loss))
    numpy.testing.assert_array_equal(numpy.isnan(grad), numpy.isnan(want_grad))
    finite = numpy.isfinite(want_loss)
    numpy.testing.assert_allclose(loss[finite], want_loss[finite], rtol=2e-6)
    assert numpy.array_equal(numpy.isinf(loss), numpy.isinf(want_loss))
    assert loss[2].tobytes() == want_loss[2].tobytes()


# ----------------------------------------------------------------------------- Dense's elements
def _fc_cxx_source():
    from trainer_cli.ndarray import _fc_cuda
    parts = ["#include <cmath>", "#include <algorithm>", "using std::max;"]
    for ctype, suffix in (("float", "f"), ("double", "d")):
        parts.append(
            'extern "C" void bias_relu_%(s)s(long long rows, long long n, const %(t)s* bias, '
            "%(t)s* outs) {\n    typedef %(t)s T;\n"
            "    for (long long i = 0; i < rows * n; ++i) {\n"
            "        const T b = bias[i %% n]; T &out = outs[i];\n        %(body)s\n    }\n}\n"
            'extern "C" void mask_%(s)s(long long size, const %(t)s* gs, const %(t)s* outs, '
            "%(t)s* rs) {\n    typedef %(t)s T;\n"
            "    for (long long i = 0; i < size; ++i) {\n"
            "        const T g = gs[i], out = outs[i]; T &r = rs[i];\n        %(mask)s\n    }\n}\n"
            % dict(s=suffix, t=ctype, body=_fc_cuda._BIAS_RELU[2], mask=_fc_cuda._MASK[2]))
    return "\n".join(parts)


@pytest.fixture(scope="session")
def fc_on_host(tmp_path_factory):
    return _compile(tmp_path_factory.mktemp("fc_on_host"), "fc", _fc_cxx_source(),
                    "Dense's element-wise CUDA bodies")


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
def test_dense_cuda_elements_are_the_array_operations_they_replace(fc_on_host, dtype):
    """Bias plus ReLU: ``maximum(out + b, 0)``, the same rounding, NaN kept (its zeros may differ
    from NumPy's in sign only: ``maximum(-0.0, 0)`` is -0.0 in NumPy, +0.0 in CUDA's ``max``);
    the ReLU mask: ``g * (out > 0)`` bit for bit, NaN and infinite gradients included."""
    suffix = "f" if dtype == numpy.float32 else "d"
    p = lambda a: ctypes.c_void_p(a.ctypes.data)       # noqa: E731
    out = numpy.resize(_special(dtype, 0), (37, 11)).copy()
    bias = numpy.resize(_special(dtype, 1), 11).copy()
    with numpy.errstate(all="ignore"):
        want = numpy.maximum(out + bias, 0)
    got = out.copy()
    getattr(fc_on_host, "bias_relu_" + suffix)(ctypes.c_longlong(37), ctypes.c_longlong(11),
                                               p(bias), p(got))
    assert numpy.array_equal(got, want, equal_nan=True)
    assert numpy.array_equal(numpy.isnan(got), numpy.isnan(want))
    g = numpy.resize(_special(dtype, 2), out.shape).copy()
    with numpy.errstate(all="ignore"):
        want = g * (want > 0)
    mask = numpy.empty_like(g)
    getattr(fc_on_host, "mask_" + suffix)(ctypes.c_longlong(g.size), p(g), p(got), p(mask))
    assert mask.tobytes() == want.tobytes()


def _bias_grad_cxx_source():
    from trainer_cli.ndarray import _fc_cuda
    parts = list(_HOST_GRID_GLOBALS)
    for ctype, suffix in (("float", "f"), ("double", "d")):
        symbol = "bias_grad_" + suffix
        parts.append(_host_kernel(
            symbol, (_fc_cuda.BIAS_GRAD_SOURCE % {"ctype": ctype}).replace(
                "trainer_cli_fc_bias_grad", symbol),
            "const %(t)s* g, const %(t)s* out, long long rows, long long cols, int relu, "
            "%(t)s* masked, %(t)s* sums" % {"t": ctype},
            "g, out, rows, cols, relu, masked, sums", 8, "(cols + 7) / 8"))
    return "\n".join(parts)


@pytest.fixture(scope="session")
def bias_grad_on_host(tmp_path_factory):
    return _compile(tmp_path_factory.mktemp("bias_grad_on_host"), "bias_grad",
                    _bias_grad_cxx_source(), "the bias gradient kernel's source")


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
@pytest.mark.parametrize("relu", [True, False])
def test_bias_gradient_cuda_source_masks_and_sums_each_unit_in_batch_order(bias_grad_on_host,
                                                                            dtype, relu):
    """The mask as ``g * (out > 0)`` bit for bit; each unit's sum as adding its batch in order
    from +0.0 (NumPy's ``add.accumulate`` down the batch is that order), special values
    included."""
    suffix = "f" if dtype == numpy.float32 else "d"
    p = lambda a: ctypes.c_void_p(a.ctypes.data)       # noqa: E731
    g = numpy.resize(_special(dtype, 3), (61, 13)).copy()
    out = numpy.resize(_special(dtype, 4), g.shape).copy()
    masked, sums = numpy.full_like(g, 7), numpy.empty(13, dtype)
    getattr(bias_grad_on_host, "run_bias_grad_" + suffix)(
        p(g), p(out), ctypes.c_longlong(61), ctypes.c_longlong(13), ctypes.c_int(relu),
        p(masked), p(sums))
    with numpy.errstate(all="ignore"):
        want = g * (out > 0) if relu else g
        want_sums = numpy.add.accumulate(numpy.concatenate([numpy.zeros((1, 13), dtype), want]),
                                         axis=0)[-1]
    if relu:
        assert masked.tobytes() == want.tobytes()
    else:
        assert (masked == 7).all()      # nothing written without the mask
    assert sums.tobytes() == want_sums.tobytes()


# ----------------------------------------------------------------------------- embedding ids
def _ids_cxx_source():
    from trainer_cli.ndarray import _rows_cuda
    parts = ["#include <cstddef>"]
    for ctype, suffix in (("float", "f"), ("double", "d"), ("long long", "l")):
        parts.append(
            'extern "C" void table_rows_%(s)s(std::size_t n, const %(t)s* xs, long long last, '
            "long long* out) {\n    typedef %(t)s T;\n"
            "    for (std::size_t i = 0; i < n; ++i) {\n"
            "        const T ids = xs[i]; long long &rows = out[i];\n        %(body)s\n    }\n}\n"
            % dict(s=suffix, t=ctype, body=_rows_cuda.TABLE_ROWS[2]))
    parts.append(
        'extern "C" void run_starts(std::size_t n, const long long* ordered, bool* out) {\n'
        "    for (std::size_t i = 0; i < n; ++i) {\n        bool &first = out[i];\n        %s\n"
        "    }\n}\n" % _rows_cuda.RUN_STARTS[2])
    return "\n".join(parts)


@pytest.fixture(scope="session")
def ids_on_host(tmp_path_factory):
    return _compile(tmp_path_factory.mktemp("ids_on_host"), "ids", _ids_cxx_source(),
                    "the embedding ids' CUDA bodies")


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64, numpy.int64])
def test_embedding_ids_cuda_body_is_astype_then_clip(ids_on_host, dtype):
    """The ids as ``astype(int64)`` then clipped to ``[0, rows)``, for the ids a conversion
    defines on both sides (NaN and values beyond int64 convert by the device's rule, CuPy's
    ``astype`` on the GPU: not comparable on the host)."""
    ids = numpy.array([0, 1, 2.7, -0.5, -3, 9, 10, 11, 1e9, -1e9, 5.999, -0.0][:12])
    ids = ids.astype(dtype) if dtype != numpy.int64 else numpy.trunc(ids).astype(dtype)
    out = numpy.empty(len(ids), numpy.int64)
    suffix = {numpy.float32: "f", numpy.float64: "d", numpy.int64: "l"}[dtype]
    getattr(ids_on_host, "table_rows_" + suffix)(ctypes.c_size_t(len(ids)),
                                                 ctypes.c_void_p(ids.ctypes.data),
                                                 ctypes.c_longlong(9),
                                                 ctypes.c_void_p(out.ctypes.data))
    want = ids.astype(numpy.int64)
    numpy.maximum(want, 0, out=want)
    numpy.minimum(want, 9, out=want)
    assert out.tolist() == want.tolist()


def test_run_starts_cuda_body_marks_where_each_run_of_keys_begins(ids_on_host):
    ordered = numpy.array([0, 0, 3, 3, 3, 4, 9, 9, 10], numpy.int64)
    out = numpy.zeros(len(ordered), numpy.bool_)
    ids_on_host.run_starts(ctypes.c_size_t(len(ordered)), ctypes.c_void_p(ordered.ctypes.data),
                           ctypes.c_void_p(out.ctypes.data))
    want = numpy.concatenate(([True], ordered[1:] != ordered[:-1]))
    assert out.tolist() == want.tolist()
