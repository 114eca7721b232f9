"""Writes trainer_cli/symbol/_op_table.py from real MXNet 1.9.1: for each operator function of
``mx.sym`` (and of ``mx.sym.contrib`` and ``mx.sym.linalg``, keyed ``contrib.<name>``,
``linalg.<name>``) that the symbol tracer knows,
its operator's own name, its input names, its other arguments in order, and how many outputs
its node has (all, and those a symbol shows); beside it, for the operators whose outputs MXNet
names other than ``output``/``output<i>``, those names (``OUTPUT_NAMES``), and the inputs each
operator writes to (auxiliary states, ``MUTATED_INPUTS``).

Run in a venv that has MXNet: python tests/data/hybrid_export/gen_op_table.py trainer_cli/symbol/_op_table.py
"""
import inspect
import json
import sys

import mxnet as mx

NAMES = """FullyConnected Convolution Deconvolution Activation BatchNorm Pooling Dropout Flatten
flatten LayerNorm InstanceNorm GroupNorm Embedding LeakyReLU sigmoid identity clip concat Concat
elemwise_add elemwise_sub elemwise_mul elemwise_div relu swapaxes SwapAxis pad Pad
broadcast_add broadcast_sub broadcast_mul broadcast_div broadcast_maximum broadcast_minimum
broadcast_power transpose reshape Reshape softmax log_softmax SoftmaxActivation mean sum max min
sqrt square exp log tanh dot batch_dot slice_axis expand_dims split SliceChannel where zeros_like
ones_like add_n ElementWiseSum stack abs sign negative reciprocal softsign erf slice squeeze tile
repeat flip reverse cast Cast norm argmax argmin take pick sort broadcast_to broadcast_like
reshape_like L2Normalization BlockGrad stop_gradient rsqrt floor ceil round cos sin
SequenceMask SequenceLast SequenceReverse shape_array size_array maximum minimum power
_plus_scalar _minus_scalar _rminus_scalar _mul_scalar _div_scalar _rdiv_scalar _power_scalar
_rpower_scalar _maximum_scalar _minimum_scalar _Plus _Minus _Mul _Div _Power _PlusScalar
_MinusScalar _RMinusScalar _MulScalar _DivScalar _RDivScalar _PowerScalar _RPowerScalar
_copy _rnn_param_concat _greater _greater_scalar _lesser _lesser_scalar _equal _equal_scalar
_greater_equal _greater_equal_scalar _lesser_equal _lesser_equal_scalar _not_equal _not_equal_scalar
_maximum _minimum _zeros _ones RNN ROIPooling _plus _add _minus _sub _mul _div
argsort batch_take broadcast_axis broadcast_equal broadcast_not_equal broadcast_greater
broadcast_greater_equal broadcast_lesser broadcast_lesser_equal cumsum diag erfinv gamma gammaln
gather_nd linalg_gemm2 make_loss nansum prod slice_like softmax_cross_entropy topk logical_not arccos arcsin arctan log1p expm1 log2 log10 sinh
cosh""".split()

# mx.sym.contrib's operators that nd.contrib computes (its Python-level compositions, foreach,
# while_loop, cond and rand_zipfian, make no single node and are left out).
CONTRIB = """AdaptiveAvgPooling2D BatchNormWithReLU BilinearResize2D CTCLoss ctc_loss
DeformableConvolution ModulatedDeformableConvolution MultiBoxDetection MultiBoxPrior
MultiBoxTarget PSROIPooling ROIAlign SparseEmbedding allclose arange_like bipartite_matching
boolean_mask box_decode box_encode box_iou box_nms box_non_maximum_suppression div_sqrt_dim
getnnz gradientmultiplier index_array index_copy interleaved_matmul_encdec_qk
interleaved_matmul_encdec_valatt interleaved_matmul_selfatt_qk interleaved_matmul_selfatt_valatt
quadratic round_ste sign_ste SyncBatchNorm""".split()

# mx.sym.linalg's operators (keyed linalg.<name>), which nd.linalg computes.
LINALG = """gemm gemm2 potrf potri trmm trsm sumlogdiag syrk gelqf syevd inverse det slogdet
extractdiag makediag extracttrian maketrian""".split()


# Arguments an operator cannot be made without (any valid value: only the node's shape counts).
_CONV = {"kernel": (1, 1), "num_filter": 1}
NEEDED = {"FullyConnected": {"num_hidden": 1}, "Convolution": _CONV, "Deconvolution": _CONV,
          "Activation": {"act_type": "relu"}, "Pooling": {"kernel": (2, 2), "pool_type": "avg"},
          "Embedding": {"input_dim": 1, "output_dim": 1}, "clip": {"a_min": 0, "a_max": 1},
          "pad": {"mode": "edge", "pad_width": (0,) * 8}, "Pad": {"mode": "edge", "pad_width": (0,) * 8},
          "Reshape": {"shape": (1,)}, "reshape": {"shape": (1,)}, "slice_axis": {"axis": 0, "begin": 0, "end": 1},
          "expand_dims": {"axis": 0}, "split": {"num_outputs": 2}, "SliceChannel": {"num_outputs": 2},
          "slice": {"begin": (0,), "end": (1,)}, "tile": {"reps": (1,)}, "repeat": {"repeats": 1},
          "flip": {"axis": 0}, "reverse": {"axis": 0}, "cast": {"dtype": "float32"},
          "Cast": {"dtype": "float32"}, "broadcast_to": {"shape": (1,)},
          "_rnn_param_concat": {"dim": 0}, "_zeros": {"shape": (1,)}, "_ones": {"shape": (1,)},
          "RNN": {"state_size": 1, "num_layers": 1, "mode": "gru"}, "concat": {"dim": 1}, "Concat": {"dim": 1},
          "ROIPooling": {"pooled_size": (1, 1), "spatial_scale": 1.0},
          "contrib.DeformableConvolution": _CONV, "contrib.ModulatedDeformableConvolution": _CONV,
          "contrib.ROIAlign": {"pooled_size": (1, 1), "spatial_scale": 1.0},
          "contrib.PSROIPooling": {"pooled_size": 1, "spatial_scale": 1.0, "output_dim": 1},
          "contrib.SparseEmbedding": {"input_dim": 1, "output_dim": 1},
          "contrib.SyncBatchNorm": {"key": "k"},
          "contrib.bipartite_matching": {"threshold": 0.5},
          "contrib.interleaved_matmul_encdec_qk": {"heads": 1},
          "contrib.interleaved_matmul_encdec_valatt": {"heads": 1},
          "contrib.interleaved_matmul_selfatt_qk": {"heads": 1},
          "contrib.interleaved_matmul_selfatt_valatt": {"heads": 1}}


def function(fname):
    if fname.startswith("contrib."):
        return getattr(mx.sym.contrib, fname[len("contrib."):], None)
    if fname.startswith("linalg."):
        return getattr(mx.sym.linalg, fname[len("linalg."):], None)
    return getattr(mx.sym, fname, None) or getattr(mx.sym._internal, fname, None)


def info(fname):
    fn = function(fname)
    if fn is None or not callable(fn):
        return None
    sig = inspect.signature(fn)
    params = [p for p in sig.parameters.values() if p.name not in ("name", "attr", "out")]
    inputs = [p.name for p in params if p.default is None and p.kind != p.VAR_POSITIONAL]
    variadic = [p.name for p in params if p.kind == p.VAR_POSITIONAL]
    others = [p.name for p in params if p.default is not None and p.kind == p.POSITIONAL_OR_KEYWORD
              and p.name not in inputs]
    if variadic and fname not in ("maximum", "minimum", "power"):
        args = [mx.sym.var("a"), mx.sym.var("b")]
    elif fname in ("maximum", "minimum", "power"):
        return None
    else:
        args = [mx.sym.var(n) for n in inputs]
    kwargs = {"scalar": 1} if "scalar" in others else {}
    kwargs.update(NEEDED.get(fname, {}))
    sym, given = made(fn, args, kwargs)
    entry = {"op": None, "inputs": inputs, "args": others,
             "variadic": bool(variadic), "outputs": None, "visible": None,
             "names": None, "mutated": ()}
    if sym is not None:
        graph = json.loads(sym.tojson())
        entry["op"] = graph["nodes"][-1]["op"]
        entry["outputs"] = graph["node_row_ptr"][-1] - graph["node_row_ptr"][-2]
        entry["visible"] = len(sym.list_outputs())
        # Every output a symbol can show: with output_mean_var, where the operator has it.
        if "output_mean_var" in others:
            sym, given = made(fn, args, dict(kwargs, output_mean_var=True))
        prefix = graph["nodes"][-1]["name"] + "_"
        entry["names"] = tuple(n[len(prefix):] for n in sym.list_outputs())
        if not variadic:
            positions = {n: i for i, n in enumerate(inputs[:len(given)])}
            entry["mutated"] = tuple(sorted(positions[n] for n in sym.list_auxiliary_states()))
    return entry


def made(fn, args, kwargs):
    """The symbol of ``fn`` on ``args`` (or its first only: some operators refuse an optional
    input by default) and the inputs it took, or (None, ())."""
    for given in (args, args[:1]):
        try:
            return fn(*given, **kwargs), given
        except Exception:  # noqa: BLE001 - left to the code: op and outputs stay None
            pass
    return None, ()


def main(path):
    table = {}
    for fname in NAMES + ["contrib." + n for n in CONTRIB] + ["linalg." + n for n in LINALG]:
        entry = info(fname)
        if entry is not None:
            table[fname] = entry
    with open(path, "w") as f:
        f.write('"""MXNet 1.9.1\'s operator functions as the symbol tracer needs them (generated by\n'
                'tests/data/hybrid_export/gen_op_table.py from real MXNet; do not edit by hand).\n\n'
                'name -> (op, inputs, args, variadic, outputs, visible): the operator a node records,\n'
                'its array inputs in order, its other arguments in positional order, whether it takes\n'
                'any number of inputs, and the outputs of its node and those a symbol shows (as\n'
                'made with default arguments; some depend on them). A key contrib.<name> is\n'
                'F.contrib.<name>, a key linalg.<name> F.linalg.<name>. OUTPUT_NAMES: op ->\n'
                'the names of the outputs a symbol can show, where MXNet\'s differ from\n'
                'output/output<i>; MUTATED_INPUTS: op -> the positions of the inputs it writes\n'
                'to (auxiliary states)."""\n\nOPS = ')
        f.write("{\n")
        for name in sorted(table):
            e = table[name]
            f.write("    %r: (%r, %r, %r, %r, %r, %r),\n" % (
                name, e["op"], tuple(e["inputs"]), tuple(e["args"]), e["variadic"],
                e["outputs"], e["visible"]))
        f.write("}\n")
        # Output names MXNet gives that the default (output, or output<i> for a node of
        # several outputs) would not, and the inputs written to (auxiliary states), per op.
        names, mutated = {}, {}
        for e in table.values():
            if e["op"] is None or e["names"] is None:
                continue
            default = ["output"] if e["outputs"] == 1 else \
                ["output%d" % i for i in range(e["outputs"])]
            if list(e["names"]) != default[:len(e["names"])]:
                names.setdefault(e["op"], e["names"])
            if e["mutated"]:
                mutated.setdefault(e["op"], e["mutated"])
        f.write("\nOUTPUT_NAMES = {\n")
        for op in sorted(names):
            f.write("    %r: %r,\n" % (op, names[op]))
        f.write("}\n\nMUTATED_INPUTS = {\n")
        for op in sorted(mutated):
            f.write("    %r: %r,\n" % (op, mutated[op]))
        f.write("}\n")


if __name__ == "__main__":
    main(sys.argv[1])
