"""``Block.summary``: MXNet's per-layer table of output shapes and parameter counts, taken from a
real forward pass through forward hooks."""
from __future__ import annotations

from collections import OrderedDict

from ..ndarray import NDArray

__all__ = ["print_summary"]


def _shape_str(args):
    """MXNet's rendering: one shape as ``(2, 4)``, several (nested) as ``(2, 4), [(1,), (3,)]``."""
    def shapes(value):
        if isinstance(value, (list, tuple)):
            return [shapes(item) for item in value]
        return value.shape if isinstance(value, NDArray) else value
    rendered = shapes(args)
    if isinstance(args, (list, tuple)):
        return str(rendered)[1:-1].replace("L", "")
    return str(rendered).replace("L", "")


def print_summary(block, inputs):
    from .block import HybridBlock, HybridSequential, Sequential
    rows = OrderedDict()
    rows["Input"] = {"output_shape": _shape_str(inputs), "n_params": 0, "trainable": 0, "shared": 0}
    seen = set()
    hooks = []

    def record(layer, _, outputs):
        row = {"output_shape": _shape_str(outputs), "n_params": 0, "trainable": 0, "shared": 0}
        rows["%s-%i" % (type(layer).__name__, len(rows))] = row
        for param in layer.params.values():
            size = param.data().size
            row["n_params"] += size
            row["trainable"] += 0 if param.grad_req == "null" else size
            if id(param) in seen:
                row["shared"] += size
            else:
                seen.add(id(param))

    def register(layer):
        if isinstance(layer, HybridBlock) and layer._active:
            raise AssertionError('"{}" must not be hybridized to print summary.'.format(layer.name))
        if not isinstance(layer, (Sequential, HybridSequential)):
            hooks.append(layer.register_forward_hook(record))

    try:
        block.apply(register)
        block(*inputs)
        line = "{:>20}  {:>42} {:>15}"
        print("-" * 80)
        print(line.format("Layer (type)", "Output Shape", "Param #"))
        print("=" * 80)
        total = trainable = shared = 0
        for name, row in rows.items():
            print(line.format(name, str(row["output_shape"]), row["n_params"]))
            total += row["n_params"]
            trainable += row["trainable"]
            shared += row["shared"]
        print("=" * 80)
        print("Parameters in forward computation graph, duplicate included")
        print("   Total params: " + str(total))
        print("   Trainable params: " + str(trainable))
        print("   Non-trainable params: " + str(total - trainable))
        print("Shared params in forward computation graph: " + str(shared))
        print("Unique parameters in model: " + str(total - shared))
        print("-" * 80)
    finally:
        for hook in hooks:
            hook.detach()
