"""What BatchNorm's one-pass forms save in a network: predict mode's BatchNorm in one compiled
pass, and a sequence's BatchNorm and ReLU run as one op (forward and, recorded, backward).

Both ways run in this one process, taking turns call by call, so that a machine whose speed
moves from second to second moves both alike. "apart" puts a forward hook on every BatchNorm
(which keeps a sequence from running a BatchNorm and its ReLU as one op) and has
``_bn_kernels.predict`` decline (so that predict mode's BatchNorm makes its scale by NumPy
calls and runs the scale-and-shift kernel, the path from before); "one pass" is the library as
it is. A predict case's outputs are checked bit for bit first.

    python benchmarks/bench_bn_relu.py [--case resnet18_224_predict_b1] [--calls 100]
                                       [--threads 2]

Cases (``_worker.HEAVY_CASES``): ``resnet18_224_predict_b1`` (the default) and ``_b16``, and the
training steps ``mobilenet0_5_b8``, ``resnet18_cifar_b32``, ``book_resnet_b32``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import _worker  # noqa: E402  (benchmarks/ is not a package)

CASES = ("resnet18_224_predict_b1", "resnet18_224_predict_b16", "mobilenet0_5_b8",
         "resnet18_cifar_b32", "book_resnet_b32")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default=CASES[0], choices=CASES)
    parser.add_argument("--calls", type=int, default=100, help="calls of each way")
    parser.add_argument("--threads", type=int, default=2, help="the BLAS's thread count")
    args = parser.parse_args(argv)
    import numpy as np
    from threadpoolctl import threadpool_limits
    from trainer_cli.gluon import nn
    from trainer_cli.ndarray import _bn_kernels
    threadpool_limits(args.threads, user_api="blas")

    made = []
    init = nn.BatchNorm.__init__

    def noting(self, *a, **k):
        init(self, *a, **k)
        made.append(self)
    nn.BatchNorm.__init__ = noting
    try:
        step = _worker.HEAVY_CASES[args.case](_worker.Gluon("ours"))
    finally:
        nn.BatchNorm.__init__ = init
    batch_norms = [b for b in made if type(b) is nn.BatchNorm]
    one_pass = _bn_kernels.predict
    hooks = []

    def apart(on):
        while hooks:
            hooks.pop().detach()
        _bn_kernels.predict = (lambda *a: None) if on else one_pass
        if on:
            hooks.extend(b.register_forward_hook(lambda *a: None) for b in batch_norms)

    if "predict" in args.case:
        outputs = []
        for way in (True, False):
            apart(way)
            outputs.append(step.outputs())
        if outputs[0].tobytes() != outputs[1].tobytes():
            raise SystemExit("the two ways differ: not measured")
    for _ in range(3):
        step()
    seconds = {True: [], False: []}
    for i in range(args.calls):
        for way in ((True, False) if i % 2 else (False, True)):
            apart(way)
            start = time.perf_counter()
            step()
            seconds[way].append(time.perf_counter() - start)
    apart(False)
    ratios = np.array(seconds[False]) / np.array(seconds[True])
    print("%s, %d BatchNorm layers, %d BLAS thread(s), %d calls each, taking turns"
          % (args.case, len(batch_norms), args.threads, args.calls))
    for way, name in ((True, "apart (before)"), (False, "one pass")):
        print("  %-15s median %8.2f ms, mean %8.2f ms" % (
            name, np.median(seconds[way]) * 1e3, np.mean(seconds[way]) * 1e3))
    print("  one pass / apart, paired calls: median %.3f (quartiles %.3f-%.3f)"
          % (np.median(ratios), np.percentile(ratios, 25), np.percentile(ratios, 75)))
    return 0


if __name__ == "__main__":
    import _calibrate   # the machine, builds and a one-op calibration, under the figures
    raise SystemExit(_calibrate.main_with_record(main))
