"""Where the time of a ResNet-18 case (or another of ``run_all.py``'s heavy cases: the book's
AlexNet, GoogLeNet, ResNet) goes, layer kind by layer kind: this
process's CPU time of each op call of ours (convolutions by kernel, stride and input shape,
ReLU-fused ones too, BatchNorm, ReLU, pooling, Dropout, concat, the residual add, the dense
layer), forward and, for the training
step, backward (each op's vector-Jacobian function timed when autograd runs it), summed over
the step and averaged over ``--steps`` steps, beside the step's own CPU time (the rest: the dense
layer, the loss, the optimizer's update, the tape, Python).

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 NUMBA_NUM_THREADS=1 \\
        python benchmarks/profile_resnet.py --case resnet18_cifar_b32 [--steps 3]

Cases: ``resnet18_cifar_b32`` (the training step), ``resnet18_224_predict_b1`` and
``resnet18_224_predict_b16`` (inference), ``book_alexnet_b32``, ``book_googlenet_b32`` and
``book_resnet_b32`` (training steps). Run it with one thread for figures that add up: with
several, a convolution's pieces run on the other threads too, and their CPU time lands in the
op's row. ``--clock wall --threads 2`` times each op on the wall clock with the BLAS (and so
the pieces) on two threads instead: beside a ``--clock wall --threads 1`` run, which layers
the second thread speeds up (on a loaded machine, wall times carry the load).
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import _worker  # noqa: E402  (benchmarks/ is not a package)

OPS = ("Convolution", "BatchNorm", "Activation", "Pooling", "FullyConnected", "Dropout", "relu",
       "concat")


def _label(name, args, kwargs):
    x = args[0] if args else kwargs.get("data")
    shape = "x".join(str(d) for d in x.shape[1:])
    if name == "Convolution":
        kernel = "x".join(str(k) for k in kwargs.get("kernel", ()))
        stride = "x".join(str(s) for s in (kwargs.get("stride") or (1, 1)))
        return "Convolution %s stride %s of %s" % (kernel, stride, shape)
    if name == "Pooling":
        return "Pooling %s%s of %s" % (kwargs.get("pool_type", "max"),
                                       " global" if kwargs.get("global_pool") else "", shape)
    return "%s of %s" % (name, shape)


def _fused_label(data, weight, bias, kernel, stride, *rest):
    return "Convolution %s stride %s of %s, ReLU" % (
        "x".join(str(k) for k in weight.shape[2:]),
        "x".join(str(s) for s in (stride or (1,) * (weight.ndim - 2))),
        "x".join(str(d) for d in data.shape[1:]))


def instrument(nd, ndarray_module, autograd_node, clock=time.process_time):
    """Time ``nd``'s ops of OPS and the residual add, forward, and the vector-Jacobian function
    each records, backward, on ``clock``; returns the dict of seconds by label."""
    spent = collections.defaultdict(float)
    current = [None]

    def timed(label_of, fn):
        """``fn`` timed under the label ``label_of(args, kwargs)`` gives (untimed where None)."""
        def call(*args, **kwargs):
            label = label_of(args, kwargs)
            if label is None:
                return fn(*args, **kwargs)
            outer, current[0] = current[0], label
            start = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[label + ", forward"] += clock() - start
                current[0] = outer
        return call

    for name in OPS:
        setattr(nd, name, timed(lambda args, kwargs, name=name: _label(name, args, kwargs),
                                getattr(nd, name)))
    # A hybridized sequence's BatchNorm and the ReLU after it run as one op.
    nd.contrib.BatchNormWithReLU = timed(
        lambda args, kwargs: _label("BatchNorm+ReLU", args, kwargs),
        nd.contrib.BatchNormWithReLU)
    # Conv2D(activation='relu') calls the fused convolution itself, not nd.Convolution.
    nd.nn._convolution = timed(lambda args, kwargs: _fused_label(*args) if args[-1] else None,
                               nd.nn._convolution)
    ndarray_module.NDArray.__add__ = timed(
        lambda args, kwargs: "add (residual) of %s" % "x".join(str(d) for d in args[0].shape[1:]),
        ndarray_module.NDArray.__add__)

    def node(inputs, vjp):
        label = current[0]
        if label is None:
            return autograd_node(inputs, vjp)

        def timed_vjp(*args):
            start = clock()
            try:
                return vjp(*args)
            finally:
                spent[label + ", backward"] += clock() - start
        return autograd_node(inputs, timed_vjp)
    ndarray_module._Node = node
    return spent


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="resnet18_cifar_b32", choices=sorted(_worker.HEAVY_CASES))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="this process's CPU time (default) or the wall clock")
    parser.add_argument("--threads", type=int, default=None,
                        help="the BLAS's thread count (threadpoolctl), which the pieces follow")
    args = parser.parse_args(argv)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    from trainer_cli import autograd, nd
    from trainer_cli.ndarray import ndarray as ndarray_module
    if args.threads is not None:    # once NumPy has loaded the BLAS
        from threadpoolctl import threadpool_limits
        threadpool_limits(args.threads, user_api="blas")

    lib = _worker.Gluon("ours")
    step = _worker.HEAVY_CASES[args.case](lib)
    check = step.check() if hasattr(step, "check") else _worker.check_step(step, lib.sync)
    print("checked before timing: %s" % check)
    step()
    spent = instrument(nd, ndarray_module, autograd.Node, clock)
    step()                  # the wrappers' first calls
    spent.clear()
    start = clock()
    for _ in range(args.steps):
        step()
    total = (clock() - start) / args.steps * 1e3
    by_kind = collections.defaultdict(float)
    for label, seconds in spent.items():
        by_kind[label.split(" of ")[0].split(" ")[0] + ", " + label.rsplit(", ", 1)[1]] += seconds
    print("%s: %.1f ms of %s a step (mean of %d steps; load average %s)"
          % (args.case, total, "process CPU time" if args.clock == "cpu" else "wall time",
             args.steps, " ".join("%.2f" % v for v in os.getloadavg())))
    print("by layer (ms a step, and share of the step):")
    for label, seconds in sorted(spent.items(), key=lambda kv: -kv[1]):
        ms = seconds / args.steps * 1e3
        print("  %-62s %8.2f  %5.1f%%" % (label, ms, 100 * ms / total))
    print("by kind:")
    for label, seconds in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        ms = seconds / args.steps * 1e3
        print("  %-30s %8.2f  %5.1f%%" % (label, ms, 100 * ms / total))
    rest = total - sum(spent.values()) / args.steps * 1e3
    print("  %-30s %8.2f  %5.1f%%  (the dense layer, loss, optimizer, tape, Python)"
          % ("the rest", rest, 100 * rest / total))
    return 0


if __name__ == "__main__":
    import _calibrate   # the machine, builds and a one-op calibration, under the figures
    raise SystemExit(_calibrate.main_with_record(main))
