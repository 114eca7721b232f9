"""What predict mode's one-pass BatchNorm (and the ReLU it takes from the layer after it) saves
one image through the model zoo's ``resnet18_v1`` at 224x224, outside ``autograd.record()``.

Both ways run in this one process, taking turns call by call, so that a machine whose speed
moves from second to second moves both alike: "apart" puts a forward hook on every BatchNorm
(which keeps a sequence from running a BatchNorm and its ReLU as one op) and has
``_bn_kernels.predict`` decline (so BatchNorm makes its scale by NumPy calls and runs the
scale-and-shift kernel, the path from before); "one pass" is the library as it is. The outputs
of both are checked bit for bit first.

    python benchmarks/bench_bn_predict.py [--calls 100] [--threads 2]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100, help="calls of each way")
    parser.add_argument("--threads", type=int, default=2, help="the BLAS's thread count")
    parser.add_argument("--batch-size", type=int, default=1)
    args = parser.parse_args(argv)
    import numpy as np
    from threadpoolctl import threadpool_limits
    from trainer_cli import nd
    from trainer_cli.gluon import nn
    from trainer_cli.gluon.model_zoo import vision
    from trainer_cli.ndarray import _bn_kernels
    threadpool_limits(args.threads, user_api="blas")

    net = vision.resnet18_v1()
    net.initialize()
    rng = np.random.RandomState(0)
    x = nd.array(rng.uniform(size=(args.batch_size, 3, 224, 224)).astype(np.float32))
    batch_norms = []
    net.apply(lambda b: batch_norms.append(b) if type(b) is nn.BatchNorm else None)
    one_pass = _bn_kernels.predict
    hooks = []

    def apart(on):
        while hooks:
            hooks.pop().detach()
        _bn_kernels.predict = (lambda *a: None) if on else one_pass
        if on:
            hooks.extend(b.register_forward_hook(lambda *a: None) for b in batch_norms)

    outputs = {}
    for way in (True, False):
        apart(way)
        outputs[way] = net(x).asnumpy()
    if outputs[True].tobytes() != outputs[False].tobytes():
        raise SystemExit("the two ways differ: not measured")
    for _ in range(3):
        net(x).wait_to_read()
    seconds = {True: [], False: []}
    for i in range(args.calls):
        for way in ((True, False) if i % 2 else (False, True)):
            apart(way)
            start = time.perf_counter()
            net(x).wait_to_read()
            seconds[way].append(time.perf_counter() - start)
    apart(False)
    ratios = np.array(seconds[False]) / np.array(seconds[True])
    print("resnet18_v1, %d image(s) of 3x224x224, %d BLAS thread(s), %d calls each, taking turns"
          % (args.batch_size, args.threads, args.calls))
    for way, name in ((True, "apart (before)"), (False, "one pass")):
        print("  %-15s median %7.2f ms, mean %7.2f ms" % (
            name, np.median(seconds[way]) * 1e3, np.mean(seconds[way]) * 1e3))
    print("  one pass / apart, paired calls: median %.3f (quartiles %.3f-%.3f)"
          % (np.median(ratios), np.percentile(ratios, 25), np.percentile(ratios, 75)))
    return 0


if __name__ == "__main__":
    import _calibrate   # the machine, builds and a one-op calibration, under the figures
    raise SystemExit(_calibrate.main_with_record(main))
